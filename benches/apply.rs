//! `cargo bench --bench apply`: how fast the worker empties a prefilled outbox.
//!
//! 100,000 mixed deliveries (half consent updates carrying a whole Lead resource over
//! 20,000 leads, half message status changes over 40,000 messages), committed to the outbox
//! beforehand, then applied by the worker with `synchronous = "full"` until the backlog is
//! empty. Beside it, in the same run, the floor: the same rows read and marked applied in
//! the same batches and transactions, which is what any worker must at least do.
//! `BENCH_QUICK=1` runs a tenth of the size.

use std::sync::Arc;
use std::time::{Duration, Instant};

use outreach_sync::db;
use outreach_sync::outbox::OutboxState;
use outreach_sync::settings::{Settings, Synchronous};
use outreach_sync::worker::Worker;
use secrecy::SecretString;
use serde_json::json;
use sqlx::SqlitePool;

const TARGET_EVENTS_PER_SEC: f64 = 20_000.0;

fn body(i: usize, leads: usize) -> String {
    let minute = (i / 1000) % 60;
    let at = format!(
        "2026-11-21T{:02}:{minute:02}:{:02}Z",
        10 + i / 60_000,
        i % 60
    );
    if i.is_multiple_of(2) {
        let l = (i / 2) % leads;
        json!({"type": "consentUpdate-v1", "id": format!("evt_{i}"), "createdAt": at,
               "data": {"id": format!("lead_{l}"), "type": "lead", "organizationId": format!("org_{}", l % 3),
                        "phoneNumber": format!("+1555{l:07}"), "activeGroupIds": ["grp_1"], "inactiveGroupIds": [],
                        "customFields": {"district": "7"}, "tagIds": [], "firstName": "Ada", "lastName": "Lovelace",
                        "globalOptedOut": i.is_multiple_of(3), "createdAt": "2026-01-01T00:00:00Z"}})
        .to_string()
    } else {
        let m = (i / 2) % (leads * 2);
        let status = ["queued", "sent", "delivered", "failed"][(i / 2 / (leads * 2)) % 4];
        json!({"type": "messageStatus-v1", "id": format!("evt_{i}"), "createdAt": at,
               "data": {"id": format!("msg_{m}"), "threadId": format!("th_{m}"), "status": status, "type": "SMS",
                        "createdAt": "2026-11-21T09:00:00Z", "leadId": format!("lead_{}", m % leads)}})
        .to_string()
    }
}

async fn prefilled(dir: &std::path::Path, events: usize, leads: usize) -> (Settings, SqlitePool) {
    let mut settings = Settings::default();
    settings.database.url = format!("sqlite://{}/apply.db", dir.display());
    settings.database.synchronous = Synchronous::Full;
    settings.webhook.secrets = vec![SecretString::from("bench")];
    let pool = db::pool(&settings).await.expect("pool");
    db::migrate(&pool).await.expect("migrate");
    let mut tx = pool.begin().await.expect("begin");
    // Many rows per statement: one statement a row would cost a hand-over to SQLite's
    // thread each, and make the set-up dwarf what is measured.
    let all: Vec<usize> = (0..events).collect();
    for chunk in all.chunks(500) {
        let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index) ",
        );
        insert.push_values(chunk, |mut row, &i| {
            row.push_bind(format!("event:evt_{i}"))
                .push_bind("2026-11-21T12:00:00.000Z")
                .push_bind(body(i, leads).into_bytes())
                .push_bind("{}")
                .push_bind(0_i64);
        });
        insert.build().execute(&mut *tx).await.expect("insert");
    }
    tx.commit().await.expect("commit");
    (settings, pool)
}

/// The floor: read every row and mark it applied in the worker's batch size, doing nothing
/// else (what any worker must at least do).
async fn mark_only(pool: &SqlitePool) -> usize {
    let mut n = 0;
    loop {
        let mut conn = pool.acquire().await.expect("conn");
        let mut tx = sqlx::Connection::begin(&mut *conn).await.expect("begin");
        let ids: Vec<(i64, Vec<u8>)> = sqlx::query_as(
            "SELECT id, body FROM outbox WHERE state = 'pending' ORDER BY id LIMIT ?",
        )
        .bind(outreach_sync::worker::BATCH)
        .fetch_all(&mut *tx)
        .await
        .expect("select");
        if ids.is_empty() {
            return n;
        }
        let list: Vec<i64> = ids.iter().map(|(id, _)| *id).collect();
        sqlx::query(
            "UPDATE outbox SET state = 'applied' WHERE id IN (SELECT value FROM json_each(?))",
        )
        .bind(serde_json::to_string(&list).expect("json"))
        .execute(&mut *tx)
        .await
        .expect("update");
        tx.commit().await.expect("commit");
        n += ids.len();
    }
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

#[tokio::main]
async fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let (events, leads) = if quick {
        (10_000, 2_000)
    } else {
        (100_000, 20_000)
    };
    println!("apply: {events} prefilled deliveries over {leads} leads, synchronous=full");

    let dir = tempfile::tempdir().expect("tempdir");
    let (_, pool) = prefilled(dir.path(), events, leads).await;
    let started = Instant::now();
    let floor_n = mark_only(&pool).await;
    let floor = started.elapsed();
    pool.close().await;

    let dir = tempfile::tempdir().expect("tempdir");
    let (_, pool) = prefilled(dir.path(), events, leads).await;
    let worker = Worker::new(pool.clone(), Arc::new(OutboxState::default()), false);
    let started = Instant::now();
    let outcome = worker.drain().await.expect("drain");
    let applied = started.elapsed();
    let (ledger, messages, lead_rows): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM ledger), (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM leads)",
    )
    .fetch_one(&pool)
    .await
    .expect("counts");

    println!();
    println!(
        "{:<34} {:>10} {:>12} {:>14}",
        "run", "events", "seconds", "events/s"
    );
    println!(
        "{:<34} {:>10} {:>12.2} {:>14.0}",
        "floor: mark applied only",
        floor_n,
        floor.as_secs_f64(),
        rate(floor_n, floor)
    );
    println!(
        "{:<34} {:>10} {:>12.2} {:>14.0}",
        "worker: parse + mirror + ledger",
        outcome.applied,
        applied.as_secs_f64(),
        rate(outcome.applied as usize, applied)
    );
    println!();
    println!(
        "backlog empty after {:.2} s; ledger {ledger}, leads {lead_rows}, messages {messages}, quarantined {}",
        applied.as_secs_f64(),
        outcome.quarantined
    );
    println!(
        "worker / floor throughput: {:.2}",
        rate(outcome.applied as usize, applied) / rate(floor_n, floor)
    );
    let met = rate(outcome.applied as usize, applied) >= TARGET_EVENTS_PER_SEC;
    println!(
        "target >= {TARGET_EVENTS_PER_SEC:.0} events/s: {}",
        if met { "met" } else { "NOT met" }
    );
}
