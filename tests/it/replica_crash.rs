//! Three `serve` replicas on one PostgreSQL database under signed load spread over all of
//! them, a random replica SIGKILLed and started again, again and again: afterwards every
//! acknowledged delivery is applied exactly once, there is one ledger entry per accepted
//! consent event, a follower of the change feed has seen every entry once and in order, and
//! no two reconciliation passes ever ran at the same time.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use outreach_sync_sandbox::{Sandbox, SandboxConfig};
use serde_json::Value;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::common::{Moments, eventually};
use crate::daemon_process::{Daemon, Load, LoadPlan};
use crate::postgres::TestDatabase;

const REPLICAS: usize = 3;
/// SIGKILLs, each of a replica picked at random, before the final, clean phase.
const KILLS: usize = 9;
/// Seed of the victims and moments: the same run every time.
const SEED: u64 = 0x5EED_2026_1123;
/// A replica lives at least this long after it starts before a kill, at most this plus
/// [`KILL_SPREAD_MS`].
const MIN_RUN_MS: u64 = 300;
const KILL_SPREAD_MS: u64 = 1_200;
/// The leader's lease: short, so that leadership moves several times during the test.
const LEASE_SECS: &str = "2";
const ADMIN_TOKEN: &str = "replica-crash-admin-token";

/// Follows the change feed through whichever replica answers, as a subscriber would: every
/// seq it is given, in the order given.
struct Follower {
    admin_urls: Mutex<Vec<String>>,
    seen: Mutex<Vec<i64>>,
}

impl Follower {
    async fn run(self: Arc<Self>, stop: CancellationToken) {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("client");
        let mut after = 0;
        let mut turn = 0usize;
        loop {
            let url = {
                let urls = self.admin_urls.lock().expect("urls");
                turn += 1;
                urls[turn % urls.len()].clone()
            };
            // Answered at the next commit on any replica (or after a second, empty).
            let page = http
                .get(format!(
                    "{url}/v1/consent/changes?after={after}&limit=500&wait=1"
                ))
                .bearer_auth(ADMIN_TOKEN)
                .send()
                .await;
            let page: Option<Value> = match page {
                Ok(response) if response.status().is_success() => response.json().await.ok(),
                // A replica just killed: the next turn asks another.
                _ => None,
            };
            let items = page
                .as_ref()
                .and_then(|p| p["items"].as_array())
                .cloned()
                .unwrap_or_default();
            for item in &items {
                let seq = item["seq"].as_i64().expect("seq");
                self.seen.lock().expect("seen").push(seq);
                after = seq;
            }
            if items.is_empty() && stop.is_cancelled() {
                return;
            }
        }
    }
}

fn env(
    database: &TestDatabase,
    sandbox_url: &str,
    config: &SandboxConfig,
) -> Vec<(String, String)> {
    [
        ("OUTREACH_SYNC__DATABASE__URL", database.url.as_str()),
        ("OUTREACH_SYNC__REPLICA__LEASE_SECS", LEASE_SECS),
        ("OUTREACH_SYNC__ADMIN__TOKENS", ADMIN_TOKEN),
        ("OUTREACH_SYNC__CONSENT__ACCOUNT_SYNC", "false"),
        ("OUTREACH_SYNC__SERVICE__BASE_URL", sandbox_url),
        (
            "OUTREACH_SYNC__SERVICE__CLIENT_ID",
            config.client_id.as_str(),
        ),
        (
            "OUTREACH_SYNC__SERVICE__CLIENT_SECRET",
            config.client_secret.as_str(),
        ),
        ("OUTREACH_SYNC__SERVICE__REQUESTS_PER_SECOND", "1000"),
        // A pass every second, on whichever replica leads.
        ("OUTREACH_SYNC__RECONCILE__SCHEDULE", "* * * * * *"),
        ("OUTREACH_SYNC__RECONCILE__ON_START", "true"),
        ("OUTREACH_SYNC__LOG__LEVEL", "info"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value.to_owned()))
    .collect()
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_killed_at_random_lose_nothing_apply_once_and_never_reconcile_twice_at_once() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 300,
        organizations: 2,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let env = env(&database, &sandbox.base_url(), sandbox.config());
    let dir = tempfile::tempdir().unwrap();
    let mut replicas = Vec::new();
    for i in 0..REPLICAS {
        replicas.push(Daemon::start(dir.path(), &format!("replica-{i}-start"), &env).await);
    }
    let ingest_urls = |replicas: &[Daemon]| replicas.iter().map(|d| d.url("/webhooks")).collect();
    let admin_urls = |replicas: &[Daemon]| replicas.iter().map(|d| d.admin_url("")).collect();

    let plan = LoadPlan {
        clients: 6,
        phones: 200,
        events_per_client: 1_000_000,
        // A refused or cut-off delivery is sent again, to another replica, as the service
        // (behind a load balancer) would.
        attempts_per_event: 10_000,
        max_duration: Duration::from_secs(90),
    };
    let (load, clients) = Load::start(plan, None);
    load.set_targets(ingest_urls(&replicas));
    let follower = Arc::new(Follower {
        admin_urls: Mutex::new(admin_urls(&replicas)),
        seen: Mutex::new(Vec::new()),
    });
    let follower_stop = CancellationToken::new();
    let following = tokio::spawn(follower.clone().run(follower_stop.clone()));

    let mut moments = Moments::new(
        SEED,
        Duration::from_millis(MIN_RUN_MS),
        Duration::from_millis(KILL_SPREAD_MS),
    );
    let started = Instant::now();
    for kill in 0..KILLS {
        moments.next().await;
        let victim = moments.victim(REPLICAS);
        replicas[victim].kill();
        // The balancer notices: deliveries go to the survivors while the victim restarts.
        let survivors: Vec<String> = ingest_urls(&replicas)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i != victim)
            .map(|(_, url)| url)
            .collect();
        load.set_targets(survivors);
        replicas[victim] = Daemon::start(
            dir.path(),
            &format!("replica-{victim}-after-kill-{kill}"),
            &env,
        )
        .await;
        load.set_targets(ingest_urls(&replicas));
        *follower.admin_urls.lock().unwrap() = admin_urls(&replicas);
    }
    load.stop();
    for client in clients {
        client.await.unwrap();
    }
    let acked = load.acked();
    let load_took = started.elapsed();

    // The survivors' workers drain what is left; the follower catches up.
    // The replicas are other processes: their progress is looked at in the database.
    let pool = database.pool().await;
    let patience = Duration::from_secs(30);
    eventually("the outbox to be drained", patience, async || {
        count(&pool, "SELECT COUNT(*) FROM outbox WHERE state = 'pending'").await == 0
    })
    .await;
    // Whoever leads now goes on reconciling (each kill of a leader in mid-pass leaves its
    // leases to lapse first): at least two finished passes to compare.
    eventually("two reconciliation passes", patience, async || {
        count(&pool, "SELECT COUNT(*) FROM reconcile_passes").await >= 2
    })
    .await;
    let ledger_max = count(&pool, "SELECT COALESCE(MAX(seq), 0) FROM ledger").await;
    eventually("the follower to catch up", patience, async || {
        follower.seen.lock().unwrap().last().copied().unwrap_or(0) >= ledger_max
    })
    .await;
    follower_stop.cancel();
    following.await.unwrap();
    for replica in &mut replicas {
        replica.signal(libc::SIGTERM);
        let status = replica
            .exit_within(Duration::from_secs(10))
            .await
            .expect("exits");
        assert!(status.success(), "{status}: {}", replica.logs());
    }

    let stored = count(&pool, "SELECT COUNT(*) FROM outbox").await;
    let applied = count(&pool, "SELECT COUNT(*) FROM outbox WHERE state = 'applied'").await;
    let ledger = count(&pool, "SELECT COUNT(*) FROM ledger").await;
    let stored_keys: BTreeSet<String> = sqlx::query_scalar("SELECT dedup_key FROM outbox")
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let passes: Vec<(DateTime<Utc>, DateTime<Utc>)> =
        sqlx::query_as("SELECT started_at, finished_at FROM reconcile_passes ORDER BY started_at")
            .fetch_all(&pool)
            .await
            .unwrap();
    let seen = follower.seen.lock().unwrap().clone();
    println!(
        "replicas {REPLICAS}, kills {KILLS}, acked {}, stored {stored}, applied {applied}, \
         ledger entries {ledger}, seen by the follower {}, reconciliation passes {}, \
         statuses {:?}, transport errors {}, load {} ms",
        acked.len(),
        seen.len(),
        passes.len(),
        load.statuses(),
        load.transport_errors(),
        load_took.as_millis()
    );

    let missing: Vec<&String> = acked.iter().filter(|k| !stored_keys.contains(*k)).collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    assert_eq!(applied, stored, "every stored delivery is applied");
    let not_once = count(
        &pool,
        "SELECT COUNT(*) FROM outbox o
         WHERE (SELECT COUNT(*) FROM ledger l WHERE l.event_ref = o.dedup_key) != 1",
    )
    .await;
    assert_eq!(not_once, 0, "one ledger entry per consent event");
    let webhook_entries = count(
        &pool,
        "SELECT COUNT(*) FROM ledger WHERE source = 'webhook'",
    )
    .await;
    assert_eq!(
        webhook_entries, stored,
        "no webhook entry without its delivery"
    );

    let all_seqs: Vec<i64> = sqlx::query_scalar("SELECT seq FROM ledger ORDER BY seq")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(
        seen, all_seqs,
        "the follower saw every entry once, in seq order, none skipped"
    );

    for pair in passes.windows(2) {
        let ((_, first_finished), (second_started, _)) = (pair[0], pair[1]);
        assert!(
            second_started >= first_finished,
            "two reconciliation passes overlapped: {pair:?}"
        );
    }
    pool.close().await;
    sandbox.shutdown().await;
    database.drop().await;
}
