//! Replicas of one database: each says it is alive, one leads at a time (the reconciler's
//! schedule and the pusher run there), a dead leader is replaced within two lease periods,
//! a leader that stops hands over at once, `status` lists them, and the token guard counts
//! the failures of all of them together.

use std::time::Duration;

use chrono::{SubsecRound as _, Utc};
use outreach_sync::client::{TokenGuardState, TokenGuardStore as _};
use outreach_sync::ledger;
use outreach_sync::replica::{self, Replica};
use outreach_sync::settings::Settings;
use outreach_sync::store::Pool;
use outreach_sync::upstream::DbTokenGuardStore;
use serde_json::Value;
use sqlx::SqlitePool;
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

use crate::common::{Backend, on_both_backends, spawn_app, spawn_app_on, with_admin_token};
use crate::postgres::TestDatabase;

const LEASE: Duration = Duration::from_secs(1);

async fn database() -> (tempfile::TempDir, SqlitePool) {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings::default();
    settings.database.url = format!("sqlite://{}", dir.path().join("r.db").display());
    let pool = outreach_sync::store::pool(&settings).await.unwrap();
    outreach_sync::store::migrate(&pool).await.unwrap();
    (dir, pool)
}

/// Runs `replica` with duties that report when they start and when they end.
fn run(
    replica: Replica,
    shutdown: CancellationToken,
) -> (
    tokio::task::JoinHandle<()>,
    mpsc::UnboundedReceiver<&'static str>,
) {
    let (events, received) = mpsc::unbounded_channel();
    let task = tokio::spawn(replica.run(shutdown, move |stop| {
        let events = events.clone();
        async move {
            let _ = events.send("leading");
            stop.cancelled().await;
            let _ = events.send("stopped");
        }
    }));
    (task, received)
}

async fn next(
    events: &mut mpsc::UnboundedReceiver<&'static str>,
    within: Duration,
) -> &'static str {
    timeout(within, events.recv())
        .await
        .expect("in time")
        .expect("an event")
}

#[tokio::test]
async fn one_replica_leads_and_a_dead_leader_is_replaced_within_two_lease_periods() {
    let (_dir, pool) = database().await;
    a_dead_leader_is_replaced(Pool::from(pool)).await;
}

#[tokio::test]
async fn on_postgres_one_replica_leads_and_a_dead_leader_is_replaced_within_two_lease_periods() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    let pool = database.pool().await;
    outreach_sync::store::POSTGRES_MIGRATOR
        .run(&pool)
        .await
        .unwrap();
    a_dead_leader_is_replaced(Pool::from(&pool)).await;
    pool.close().await;
    database.drop().await;
}

async fn a_dead_leader_is_replaced(pool: Pool) {
    let a = Replica::with_lease(pool.clone(), "a".into(), LEASE);
    let b = Replica::with_lease(pool.clone(), "b".into(), LEASE);
    // As `serve` does: listed before its loops start (whose first beat and first try for
    // the lead race each other).
    a.heartbeat().await.unwrap();
    let (a_task, mut a_events) = run(a, CancellationToken::new());
    assert_eq!(next(&mut a_events, LEASE).await, "leading");

    b.heartbeat().await.unwrap();
    assert!(b.try_lead().await.unwrap().is_none(), "a leads: b may not");
    let seen = replica::seen(pool.clone()).await.unwrap();
    let leaders: Vec<(&str, bool)> = seen.iter().map(|r| (r.name.as_str(), r.leader)).collect();
    assert_eq!(leaders, [("a", true), ("b", false)]);

    // The leader dies without a word: its lease lapses and b takes over.
    a_task.abort();
    let died = Instant::now();
    let (_b_task, mut b_events) = run(b, CancellationToken::new());
    assert_eq!(next(&mut b_events, 2 * LEASE + LEASE / 2).await, "leading");
    let took = died.elapsed();
    assert!(took <= 2 * LEASE + LEASE / 2, "took over after {took:?}");
    let seen = replica::seen(pool.clone()).await.unwrap();
    let leaders: Vec<&str> = seen
        .iter()
        .filter(|r| r.leader)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(leaders, ["b"]);
    let status = ledger::status(pool).await.unwrap();
    let listed: Vec<(&str, bool)> = status
        .replicas
        .iter()
        .map(|r| (r.name.as_str(), r.leader))
        .collect();
    assert_eq!(listed, [("a", false), ("b", true)], "status lists them");
}

#[tokio::test]
async fn a_leader_that_stops_hands_over_at_once() {
    let (_dir, pool) = database().await;
    let a = Replica::with_lease(pool.clone(), "a".into(), LEASE);
    let stop_a = CancellationToken::new();
    let (a_task, mut a_events) = run(a, stop_a.clone());
    assert_eq!(next(&mut a_events, LEASE).await, "leading");
    stop_a.cancel();
    assert_eq!(next(&mut a_events, LEASE).await, "stopped");
    a_task.await.unwrap();
    let b = Replica::with_lease(pool, "b".into(), LEASE);
    assert!(
        b.try_lead().await.unwrap().is_some(),
        "the lease was given back"
    );
}

#[tokio::test]
async fn a_leader_whose_lease_was_taken_stops_its_duties() {
    let (_dir, pool) = database().await;
    let a = Replica::with_lease(pool.clone(), "a".into(), LEASE);
    let (_a_task, mut a_events) = run(a, CancellationToken::new());
    assert_eq!(next(&mut a_events, LEASE).await, "leading");
    // As if a stalled past its lease and another replica took it.
    sqlx::query("UPDATE leases SET holder = 'z' WHERE name = 'leader'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(next(&mut a_events, LEASE).await, "stopped");
}

#[tokio::test]
async fn status_lists_the_daemon_as_a_replica() {
    let app = spawn_app(|settings| {
        with_admin_token(settings);
        settings.replica.name = "replica-one".into();
    })
    .await;
    let status: Value = app.admin_get("/v1/status").await.json().await.unwrap();
    let replicas = status["replicas"].as_array().expect("replicas");
    assert_eq!(replicas.len(), 1, "{status}");
    assert_eq!(replicas[0]["name"], "replica-one");
    assert!(
        replicas[0]["lastSeen"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    let listed = ledger::status(&app.pool).await.unwrap().replicas;
    assert_eq!(listed[0].name, "replica-one");
    app.stop().await;
}

on_both_backends!(the_token_guard_counts_the_failures_of_every_replica_together);
async fn the_token_guard_counts_the_failures_of_every_replica_together(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    // Two replicas: two pools on the one database.
    let other = outreach_sync::store::open(&app.settings).await.unwrap();
    let replicas = [
        DbTokenGuardStore::new(&app.pool),
        DbTokenGuardStore::new(other),
    ];
    let block_until = (Utc::now() + chrono::Duration::minutes(10)).trunc_subsecs(3);

    // Twenty failed token requests at once, half on each replica.
    let failures = (0..20).map(|i| replicas[i % 2].record_failure(100, block_until));
    let mut counts: Vec<u32> = futures::future::join_all(failures)
        .await
        .into_iter()
        .map(|state| state.unwrap().consecutive_failures)
        .collect();
    counts.sort_unstable();
    assert_eq!(
        counts,
        (1..=20).collect::<Vec<u32>>(),
        "none lost, none counted twice"
    );
    let seen = replicas[1].load().await.unwrap();
    assert_eq!((seen.consecutive_failures, seen.blocked_until), (20, None));

    // The failure that reaches the limit blocks every replica.
    let blocked = replicas[0].record_failure(21, block_until).await.unwrap();
    assert_eq!(blocked.blocked_until, Some(block_until));
    assert_eq!(replicas[1].load().await.unwrap(), blocked);

    // A granted token starts the count again, for all.
    replicas[1].reset().await.unwrap();
    assert_eq!(
        replicas[0].load().await.unwrap(),
        TokenGuardState::default()
    );
    app.stop().await;
}
