//! The apply path on PostgreSQL: the same outcome as on SQLite for the same deliveries, and
//! workers applying at once (as on replicas) that apply each delivery once and end in the
//! state of applying every event alone in time order.

use std::collections::HashMap;
use std::sync::Arc;

use outreach_sync::outbox::OutboxState;
use outreach_sync::settings::Settings;
use outreach_sync::store::Pool;
use outreach_sync::worker::Worker;
use proptest::prelude::*;
use proptest::strategy::ValueTree as _;
use serde_json::Value;
use sqlx::{PgPool, SqlitePool};

use crate::apply::{consent, lead, status};
use crate::common::{self, rows};
use crate::postgres::TestDatabase;

/// A migrated database of its own on the test server, or `None` when there is none.
pub(crate) async fn postgres() -> Option<(TestDatabase, PgPool)> {
    let database = TestDatabase::create().await?;
    let pool = database.pool().await;
    outreach_sync::store::POSTGRES_MIGRATOR
        .run(&pool)
        .await
        .unwrap();
    Some((database, pool))
}

pub(crate) async fn sqlite() -> (tempfile::TempDir, SqlitePool) {
    let dir = tempfile::tempdir().unwrap();
    let mut settings: Settings = common::test_settings(dir.path());
    settings.database.synchronous = outreach_sync::settings::Synchronous::Normal;
    let pool = outreach_sync::store::pool(&settings).await.unwrap();
    outreach_sync::store::migrate(&pool).await.unwrap();
    (dir, pool)
}

fn key(body: &Value) -> String {
    format!("event:{}", body["id"].as_str().unwrap())
}

/// Adds deliveries to the PostgreSQL outbox as ingest does (duplicates keep one row).
pub(crate) async fn deliver_pg(pool: &PgPool, bodies: &[Value]) {
    let keys: Vec<String> = bodies.iter().map(key).collect();
    let bytes: Vec<Vec<u8>> = bodies.iter().map(|b| b.to_string().into_bytes()).collect();
    sqlx::query(
        "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index)
         SELECT k, '2026-11-21T12:00:00Z', b, '{}', 0 FROM unnest($1::text[], $2::bytea[]) AS d (k, b)
         ON CONFLICT DO NOTHING",
    )
    .bind(keys)
    .bind(bytes)
    .execute(pool)
    .await
    .unwrap();
}

pub(crate) async fn deliver_sqlite(pool: &SqlitePool, bodies: &[Value]) {
    let mut tx = pool.begin().await.unwrap();
    for body in bodies {
        sqlx::query(
            "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index)
             VALUES (?, '2026-11-21T12:00:00.000Z', ?, '{}', 0) ON CONFLICT DO NOTHING",
        )
        .bind(key(body))
        .bind(body.to_string().into_bytes())
        .execute(&mut *tx)
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
}

/// What a user sees of a database after applying: current consent, message statuses,
/// ledger entries per source, outbox rows per state, leads' first names.
#[derive(Debug, PartialEq)]
struct Seen {
    consent: Vec<(String, String, Option<String>, bool, String)>,
    messages: Vec<(String, String, Option<String>)>,
    ledger: Vec<(String, String, bool, bool)>,
    outbox: Vec<(String, i64)>,
    leads: Vec<(String, Option<String>)>,
}

const CONSENT: &str = "SELECT organization_id, phone_number, lead_id, opted_out, source FROM consent_state ORDER BY 1, 2";
const MESSAGES: &str = "SELECT id, status, error_code FROM messages ORDER BY 1";
const LEDGER: &str =
    "SELECT event_ref, organization_id, opted_out, superseded FROM ledger ORDER BY 1, 2";
const OUTBOX: &str = "SELECT state, COUNT(*) FROM outbox GROUP BY state ORDER BY state";
const LEADS: &str = "SELECT id, first_name FROM leads ORDER BY 1";

/// What the apply path left in the database, whichever the backend.
async fn seen(pool: impl Into<Pool>) -> Seen {
    let pool = pool.into();
    Seen {
        consent: rows(&pool, CONSENT).await,
        messages: rows(&pool, MESSAGES).await,
        ledger: rows(&pool, LEDGER).await,
        outbox: rows(&pool, OUTBOX).await,
        leads: rows(&pool, LEADS).await,
    }
}

/// A mixed day: opt-outs and opt-ins of numbers held by two organizations (account sync),
/// events by lead id only, full lead resources, statuses, a duplicate and an unparseable one.
pub(crate) fn mixed_deliveries() -> Vec<Value> {
    let mut bodies = vec![
        lead("lead_1", "o1", "+15550000001", "Ada", 1),
        lead("lead_2", "o2", "+15550000001", "Bea", 2),
        lead("lead_1", "o1", "+15550000001", "Ada Older", 0),
        serde_json::json!({"type": "consentUpdate-v1", "id": "evt_by_id", "createdAt": "2026-11-21T10:30:00Z",
                           "data": {"id": "lead_2", "globalOptedOut": true}}),
        serde_json::json!({"type": "consentUpdate-v1", "id": "evt_unknown", "createdAt": "2026-11-21T10:31:00Z",
                           "data": {"id": "lead_nobody", "globalOptedOut": true}}),
        serde_json::json!({"type": "surely-not-an-event", "id": "evt_bad"}),
    ];
    for i in 0..60u32 {
        bodies.push(consent(
            &format!("evt_{i}"),
            &format!("o{}", i % 3),
            &format!("+1555000000{}", i % 4),
            i % 2 == 0,
            i % 7,
        ));
        bodies.push(status(
            &format!("st_{i}"),
            &format!("m{}", i % 5),
            ["queued", "sent", "delivered", "failed"][(i % 4) as usize],
            i % 9,
        ));
    }
    bodies.push(bodies[10].clone());
    bodies
}

#[tokio::test]
async fn on_postgres_the_worker_leaves_what_it_leaves_on_sqlite() {
    let Some((database, pg)) = postgres().await else {
        return;
    };
    let (_dir, lite) = sqlite().await;
    let bodies = mixed_deliveries();
    deliver_pg(&pg, &bodies).await;
    deliver_sqlite(&lite, &bodies).await;
    let state = Arc::new(OutboxState::default());
    let on_pg = Worker::new(pg.clone(), state.clone(), true)
        .drain_in_order()
        .await;
    let on_lite = Worker::new(lite.clone(), state, true).drain().await;
    assert_eq!(on_pg.unwrap(), on_lite.unwrap());
    let (on_pg, on_lite) = (seen(&pg).await, seen(&lite).await);
    assert_eq!(on_pg, on_lite);
    let reasons: Vec<(String, String)> = sqlx::query_as(
        "SELECT dedup_key, last_error FROM outbox WHERE state = 'quarantined' ORDER BY 1",
    )
    .fetch_all(&pg)
    .await
    .unwrap();
    assert_eq!(
        reasons,
        vec![
            ("event:evt_bad".into(), "no `data` object".into()),
            (
                "event:evt_unknown".into(),
                "lead lead_nobody is not in the mirror; replay after reconciliation".into()
            ),
        ]
    );
    assert_eq!(
        on_pg.outbox,
        vec![("applied".into(), 124), ("quarantined".into(), 2)]
    );
    assert!(
        on_pg.consent.iter().any(|c| c.0 == "o2" && c.3),
        "the event by lead id reached o2's number: {:?}",
        on_pg.consent
    );
    database.drop().await;
}

/// Applies `bodies` with `workers` workers at once, each taking small batches, as the
/// workers of several replicas do.
async fn apply_concurrently(pool: &PgPool, workers: usize, batch: i64) {
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let worker = Worker::new(pool.clone(), Arc::new(OutboxState::default()), false);
            tokio::spawn(async move {
                while !worker.try_execute_task(batch).await.unwrap().is_idle() {}
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// (phone, opted out, minute) per event; the winner of a pair is its latest event, and of
/// events at the same minute the opt-out.
fn expected_states(events: &[(u8, bool, u8)]) -> HashMap<String, bool> {
    let mut best: HashMap<String, (u8, bool)> = HashMap::new();
    for &(phone, opted_out, minute) in events {
        let entry = best
            .entry(format!("+1555100{phone:04}"))
            .or_insert((minute, opted_out));
        *entry = (*entry).max((minute, opted_out));
    }
    best.into_iter().map(|(k, (_, out))| (k, out)).collect()
}

async fn check_concurrent_apply(pool: &PgPool, case: u64, events: &[(u8, bool, u8)]) {
    let org = format!("case{case}");
    let bodies: Vec<Value> = events
        .iter()
        .enumerate()
        .map(|(i, &(phone, opted_out, minute))| {
            consent(
                &format!("{org}_evt_{i}"),
                &org,
                &format!("+1555100{phone:04}"),
                opted_out,
                minute.into(),
            )
        })
        .collect();
    deliver_pg(pool, &bodies).await;
    apply_concurrently(pool, 4, 3).await;

    let states: Vec<(String, bool, i64)> = sqlx::query_as(
        "SELECT phone_number, opted_out, seq FROM consent_state WHERE organization_id = $1",
    )
    .bind(&org)
    .fetch_all(pool)
    .await
    .unwrap();
    let got: HashMap<String, bool> = states.iter().map(|(p, o, _)| (p.clone(), *o)).collect();
    assert_eq!(got, expected_states(events), "{events:?}");
    // Each state names the entry that set it, which carries the same answer.
    for (phone, opted_out, seq) in &states {
        let (entry_phone, entry_out): (String, bool) =
            sqlx::query_as("SELECT phone_number, opted_out FROM ledger WHERE seq = $1")
                .bind(seq)
                .fetch_one(pool)
                .await
                .unwrap();
        assert_eq!((&entry_phone, entry_out), (phone, *opted_out));
    }
    let entries: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM ledger WHERE organization_id = $1")
        .bind(&org)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(entries, events.len() as i64, "one entry per event");
}

#[tokio::test]
async fn workers_applying_at_once_on_postgres_end_in_the_time_order_state_with_gapless_seqs() {
    let Some((database, pool)) = postgres().await else {
        return;
    };
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 12,
        ..ProptestConfig::default()
    });
    // (phone, opted out, minute): few numbers and minutes, so events of the same number
    // and the same instant land in different workers' batches.
    let strategy = proptest::collection::vec((0u8..3, any::<bool>(), 0u8..3), 1..60);
    let mut case = 0;
    let cases: Vec<Vec<(u8, bool, u8)>> = (0..12)
        .map(|_| strategy.new_tree(&mut runner).unwrap().current())
        .collect();
    for events in cases {
        case += 1;
        check_concurrent_apply(&pool, case, &events).await;
    }
    let (count, max, applied): (i64, Option<i64>, i64) = sqlx::query_as(
        "SELECT COUNT(*), MAX(seq), (SELECT COUNT(*) FROM outbox WHERE state = 'applied') FROM ledger",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(Some(count), max, "seqs are 1..n without a gap");
    assert_eq!(count, applied, "one entry per applied delivery");
    database.drop().await;
}

/// A delivery as ingest hands it to the writer.
fn delivery(key: &str) -> outreach_sync::outbox::Delivery {
    outreach_sync::outbox::Delivery {
        account: outreach_sync::model::DEFAULT_ACCOUNT.to_owned(),
        dedup_key: key.to_owned(),
        received_at: chrono::Utc::now(),
        body: bytes::Bytes::from(consent(key, "o1", "+15550000001", true, 1).to_string()),
        headers: r#"[["webhook-id","x"]]"#.to_owned(),
        secret_index: 0,
        verified_header: None,
    }
}

#[tokio::test]
async fn a_delivery_sent_to_two_replicas_at_once_is_one_row_accepted_once() {
    use outreach_sync::outbox::{Committed, OutboxWriter};
    let Some((database, pool)) = postgres().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut settings = common::test_settings(dir.path());
    settings.database.url = database.url.clone();
    let mut writers = Vec::new();
    for _ in 0..2 {
        let state = Arc::new(OutboxState::default());
        writers.push(
            OutboxWriter::start(
                &settings,
                outreach_sync::apply::Policy::of(&settings, outreach_sync::systems::post_reader_of),
                state,
                Arc::default(),
            )
            .await
            .unwrap(),
        );
    }
    // Every key is sent to both replicas at once; half of them twice to each.
    let sends = (0..400).flat_map(|i| {
        let key = format!("event:evt_{}", i % 200);
        writers
            .iter()
            .map(move |(writer, _)| (writer.clone(), key.clone()))
    });
    let answers = futures::future::join_all(sends.map(|(writer, key)| async move {
        let delivery = delivery(&key);
        let event = outreach_sync::events::parse(&delivery.body, delivery.received_at);
        (key.clone(), writer.commit(delivery, event).await.unwrap())
    }))
    .await;

    let mut accepted: HashMap<String, Vec<i64>> = HashMap::new();
    let mut ids: HashMap<String, Vec<i64>> = HashMap::new();
    for (key, committed) in answers {
        let id = match committed {
            Committed::Accepted(id) => {
                accepted.entry(key.clone()).or_default().push(id);
                id
            }
            Committed::Duplicate(id) => id,
        };
        ids.entry(key).or_default().push(id);
    }
    assert_eq!(accepted.len(), 200, "every key accepted");
    assert!(accepted.values().all(|a| a.len() == 1), "and only once");
    assert!(
        ids.values().all(|ids| ids.iter().all(|id| *id == ids[0])),
        "every answer names the one row"
    );
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM outbox")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 200);
    let applied = Worker::new(pool.clone(), Arc::new(OutboxState::default()), false)
        .drain()
        .await
        .unwrap();
    assert_eq!(applied.applied, 200, "each row applied once");
    for (writer, task) in writers {
        drop(writer);
        task.await.unwrap();
    }
    pool.close().await;
    database.drop().await;
}
