//! Crash safety of the real process: `serve` killed with SIGKILL at random moments under
//! signed load, restarted each time on the same database file, loses no acknowledged
//! delivery and applies none twice.

use crate::common::{Moments, within};
use crate::daemon_process;

use std::time::{Duration, Instant};

use daemon_process::{Daemon, Load, LoadPlan, missing_from_outbox, open_database};

/// SIGKILLs before the final, clean run.
const KILLS: usize = 24;
/// Seed of the kill moments: the same run every time.
const SEED: u64 = 0x5EED_2026_1121;
/// Each run serves this long at least, and at most this plus [`KILL_SPREAD_MS`].
const MIN_RUN_MS: u64 = 30;
const KILL_SPREAD_MS: u64 = 570;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_at_random_moments_loses_no_acknowledged_delivery_and_applies_none_twice() {
    let dir = tempfile::tempdir().unwrap();
    let plan = LoadPlan {
        clients: 6,
        phones: 300,
        events_per_client: 1_000_000,
        // A refused or cut-off delivery is sent again, across restarts, like the service does.
        attempts_per_event: 10_000,
        max_duration: Duration::from_secs(60),
    };
    let (load, clients) = Load::start(plan, None);
    let mut moments = Moments::new(
        SEED,
        Duration::from_millis(MIN_RUN_MS),
        Duration::from_millis(KILL_SPREAD_MS),
    );
    let started = Instant::now();
    let mut acked_per_run = Vec::new();
    for run in 0..KILLS {
        let mut daemon = Daemon::start(dir.path(), &format!("run-{run}"), &[]).await;
        let before = load.acked_count();
        load.set_target(Some(daemon.url("/webhooks")));
        // The random moment of the crash, under load (not a wait for background work).
        moments.next().await;
        daemon.kill();
        load.set_target(None);
        acked_per_run.push(load.acked_count() - before);
    }
    load.stop();
    for client in clients {
        client.await.unwrap();
    }
    let acked = load.acked();
    let load_took = started.elapsed();

    // A last, clean run applies what the crashes left pending.
    let mut daemon = Daemon::start(dir.path(), "final", &[]).await;
    let pool = open_database(dir.path()).await;
    let pending = || {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM outbox WHERE state = 'pending'")
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    // The daemon is another process: its progress is looked at, not signalled.
    within(Duration::from_secs(30), async || pending().await == 0).await;
    assert_eq!(
        pending().await,
        0,
        "the worker drains the outbox: {}",
        daemon.logs()
    );
    daemon.signal(libc::SIGTERM);
    let status = daemon
        .exit_within(Duration::from_secs(10))
        .await
        .expect("exits");
    assert!(status.success(), "{status}: {}", daemon.logs());

    let count = |sql: &'static str| crate::daemon_process::count(&pool, sql);
    let stored = count("SELECT COUNT(*) FROM outbox").await;
    let applied = count("SELECT COUNT(*) FROM outbox WHERE state = 'applied'").await;
    let ledger = count("SELECT COUNT(*) FROM ledger").await;
    println!(
        "kills {KILLS}, acked {}, stored {stored}, applied {applied}, ledger entries {ledger}, \
         statuses {:?}, transport errors {}, load {} ms, acked per run {acked_per_run:?}",
        acked.len(),
        load.statuses(),
        load.transport_errors(),
        load_took.as_millis()
    );
    assert!(
        acked_per_run.iter().filter(|n| **n > 0).count() >= KILLS / 2,
        "most runs took deliveries before their crash: {acked_per_run:?}"
    );
    let missing = missing_from_outbox(&pool, &acked).await;
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    assert_eq!(applied, stored, "every stored delivery is applied");
    let not_once = count(
        "SELECT COUNT(*) FROM outbox o
         WHERE (SELECT COUNT(*) FROM ledger l WHERE l.event_ref = o.dedup_key) != 1",
    )
    .await;
    assert_eq!(not_once, 0, "one ledger entry per consent event");
    assert_eq!(ledger, stored, "no ledger entry without its delivery");
    let not_latest = count(
        "SELECT COUNT(*) FROM consent_state c
         WHERE c.opted_out != (SELECT l.opted_out FROM ledger l
             WHERE l.organization_id = c.organization_id AND l.phone_number = c.phone_number
             ORDER BY l.occurred_at DESC, l.seq DESC LIMIT 1)",
    )
    .await;
    assert_eq!(not_latest, 0, "each number's consent is its latest event's");
    let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(integrity, "ok");
}
