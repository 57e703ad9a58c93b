//! `cargo bench --bench apply`: how fast the worker empties a prefilled outbox.
//!
//! 100,000 mixed deliveries (half consent updates carrying a whole Lead resource over
//! 20,000 leads, half message status changes over 40,000 messages), committed to the outbox
//! beforehand (multi-row inserts, untimed), then applied by the worker (`Worker::drain`)
//! until the backlog is empty. Beside it, in the same run, the floor: the same rows read and
//! marked applied in the same batches and transactions, which is what any worker must at
//! least do (on PostgreSQL it claims its rows `FOR UPDATE SKIP LOCKED`, as the daemon's
//! workers must to share the outbox between replicas). Each of the two runs on a fresh
//! database. After the run every row must be applied or quarantined.
//!
//! The backend comes from the environment: by default a SQLite file in a temporary
//! directory with `synchronous = "full"`; with `BENCH_POSTGRES_URL` set (e.g.
//! `postgres://postgres@127.0.0.1:5432/test`), a database of its own created on that
//! PostgreSQL server for each of the two runs and dropped after it (the URL's database is
//! only used to create and drop them). The target, on either: the worker applies >= 20,000
//! events/s (the verdict is printed, never turned into a failure).
//! `BENCH_QUICK=1` runs a tenth of the size.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{BenchDatabase, fetch_row, outbox_states};
use outreach_sync::outbox::OutboxState;

use outreach_sync::store::Pool;
use outreach_sync::worker::{BATCH, Worker};
use serde_json::json;
use sqlx::{PgPool, SqlitePool};

const TARGET_EVENTS_PER_SEC: f64 = 20_000.0;
/// Deliveries per INSERT while prefilling.
const PREFILL_ROWS: usize = 500;

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

/// A fresh database whose outbox holds `events` deliveries, committed in one transaction.
async fn prefilled(events: usize, leads: usize) -> (BenchDatabase, Pool) {
    let (database, pool) = BenchDatabase::open("apply.db").await;
    // Many rows per statement: one statement a row would cost a round trip (on SQLite a
    // hand-over to its thread) each, and make the set-up dwarf what is measured.
    let all: Vec<usize> = (0..events).collect();
    let chunks = all.chunks(PREFILL_ROWS).map(|chunk| {
        chunk
            .iter()
            .map(|&i| (format!("event:evt_{i}"), body(i, leads).into_bytes()))
            .collect::<Vec<_>>()
    });
    match &pool {
        Pool::Sqlite(pool) => {
            let mut tx = pool.begin().await.expect("begin");
            for rows in chunks {
                let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                    "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index) ",
                );
                insert.push_values(rows, |mut row, (key, body)| {
                    row.push_bind(key)
                        .push_bind("2026-11-21T12:00:00.000Z")
                        .push_bind(body)
                        .push_bind("{}")
                        .push_bind(0_i64);
                });
                insert.build().execute(&mut *tx).await.expect("insert");
            }
            tx.commit().await.expect("commit");
        }
        Pool::Postgres(pool) => {
            let mut tx = pool.begin().await.expect("begin");
            for rows in chunks {
                let (keys, bodies): (Vec<String>, Vec<Vec<u8>>) = rows.into_iter().unzip();
                sqlx::query(
                    "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index)
                     SELECT k, '2026-11-21T12:00:00.000Z'::timestamptz, b, '{}'::jsonb, 0
                     FROM unnest($1::text[], $2::bytea[]) AS d (k, b)",
                )
                .bind(keys)
                .bind(bodies)
                .execute(&mut *tx)
                .await
                .expect("insert");
            }
            tx.commit().await.expect("commit");
        }
    }
    (database, pool)
}

/// The floor: read every row and mark it applied in the worker's batch size, one
/// transaction a batch, doing nothing else (what any worker must at least do).
async fn mark_only(pool: &Pool) -> usize {
    let mut n = 0;
    loop {
        let marked = match pool {
            Pool::Sqlite(pool) => mark_batch_sqlite(pool).await,
            Pool::Postgres(pool) => mark_batch_postgres(pool).await,
        };
        if marked == 0 {
            return n;
        }
        n += marked;
    }
}

/// One batch of the floor on SQLite; how many rows it marked.
async fn mark_batch_sqlite(pool: &SqlitePool) -> usize {
    let mut conn = pool.acquire().await.expect("conn");
    let mut tx = sqlx::Connection::begin(&mut *conn).await.expect("begin");
    let ids: Vec<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT id, body FROM outbox WHERE state = 'pending' ORDER BY id LIMIT ?")
            .bind(BATCH)
            .fetch_all(&mut *tx)
            .await
            .expect("select");
    if ids.is_empty() {
        return 0;
    }
    let list: Vec<i64> = ids.iter().map(|(id, _)| *id).collect();
    sqlx::query("UPDATE outbox SET state = 'applied' WHERE id IN (SELECT value FROM json_each(?))")
        .bind(serde_json::to_string(&list).expect("json"))
        .execute(&mut *tx)
        .await
        .expect("update");
    tx.commit().await.expect("commit");
    ids.len()
}

/// One batch of the floor on PostgreSQL, its rows claimed and marked as the daemon's worker
/// does (one `UPDATE ... RETURNING` over rows taken `FOR UPDATE SKIP LOCKED`); how many
/// rows it marked.
async fn mark_batch_postgres(pool: &PgPool) -> usize {
    let mut tx = pool.begin().await.expect("begin");
    let rows: Vec<(i64, Vec<u8>)> = sqlx::query_as(
        "UPDATE outbox SET state = 'applied'
         WHERE id IN (SELECT id FROM outbox WHERE state = 'pending' ORDER BY id LIMIT $1
                      FOR UPDATE SKIP LOCKED)
         RETURNING id, body",
    )
    .bind(BATCH)
    .fetch_all(&mut *tx)
    .await
    .expect("claim");
    tx.commit().await.expect("commit");
    rows.len()
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

    let (database, pool) = prefilled(events, leads).await;
    println!(
        "apply on {}: {events} prefilled deliveries over {leads} leads, {}",
        database.backend(),
        database.describe(&pool).await.expect("describe")
    );
    let started = Instant::now();
    let floor_n = mark_only(&pool).await;
    let floor = started.elapsed();
    pool.close().await;
    drop(database);

    let (database, pool) = prefilled(events, leads).await;
    let worker = Worker::new(pool.clone(), Arc::new(OutboxState::default()), false);
    let started = Instant::now();
    let outcome = worker.drain().await.expect("drain");
    let applied = started.elapsed();
    let (ledger, messages, lead_rows): (i64, i64, i64) = fetch_row(
        &pool,
        "SELECT (SELECT COUNT(*) FROM ledger), (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM leads)",
    )
    .await
    .expect("counts");
    let (rows, applied_rows, quarantined_rows, pending_rows) =
        outbox_states(&pool).await.expect("outbox states");
    pool.close().await;
    drop(database);

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
    let settled = usize::try_from(rows).is_ok_and(|n| n == events)
        && pending_rows == 0
        && applied_rows + quarantined_rows == rows
        && (applied_rows, quarantined_rows) == (outcome.applied as i64, outcome.quarantined as i64);
    println!(
        "outbox check: {rows} rows, {applied_rows} applied, {quarantined_rows} quarantined, {pending_rows} pending; the worker said {} applied, {} quarantined: {}",
        outcome.applied,
        outcome.quarantined,
        if settled { "OK" } else { "MISMATCH" }
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
