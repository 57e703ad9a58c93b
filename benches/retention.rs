//! `cargo bench --bench retention`: does the database stop growing once retention runs?
//!
//! A simulated year of traffic at 100,000 message-status deliveries and 2,000 consent
//! deliveries a day, compressed: every simulated day carries a hundredth of that volume
//! (1,000 status deliveries, each message getting three statuses, and 20 consent
//! deliveries), so the days, and the retention in days (`message_status_days = 90`,
//! `consent_delivery_days = 1830`, `messages_days = 90`), stay as configured while a year
//! runs in a minute or two. Each day's deliveries are committed to the outbox with that day's receipt time
//! (untimed), applied by the worker (`Worker::drain`, which writes the ledger), then one
//! retention pass runs as of the end of that day (timed). The size is printed after the
//! first 90 days (when status retention starts to remove) and at the end, with rows per
//! table: the target is that it stops growing but for the ledger and the consent
//! evidence (both kept on purpose): the messages mirror (one row per message, each
//! finished the day it starts) holds 90 days of messages from day 90 on.
//!
//! The backend comes from the environment, as for the other benches (`BENCH_POSTGRES_URL`
//! for PostgreSQL, else a SQLite file with `synchronous = "full"`). SQLite's size is the
//! file's (after a WAL checkpoint); PostgreSQL's `pg_database_size`. On PostgreSQL a
//! simulated day lasts well under a second, far less than autovacuum waits between runs, so
//! the bench runs a plain `VACUUM` after each day (what autovacuum does within minutes of
//! real time): it makes the space of deleted rows reusable, without returning it to the
//! disk. `BENCH_QUICK=1` runs a tenth of the volume.

mod common;

use outreach_sync::store::codec;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeZone, Utc};
use common::{BenchDatabase, fetch_row, outbox_states};
use outreach_sync::outbox::OutboxState;
use outreach_sync::retention::Pruner;
use outreach_sync::settings::Settings;
use outreach_sync::store::Pool;
use outreach_sync::worker::Worker;
use serde_json::json;

/// The real volume a day, and the factor it is divided by.
const STATUS_PER_DAY: usize = 100_000;
const CONSENT_PER_DAY: usize = 2_000;
const SCALE: usize = 100;
const DAYS: i64 = 365;
/// When message-status and messages retention start to remove (`message_status_days`,
/// `messages_days`).
const FIRST_CHECKPOINT: i64 = 90;
/// Deliveries per INSERT.
const INSERT_ROWS: usize = 500;
/// Numbers the consent deliveries are about.
const NUMBERS: usize = 5_000;

fn quick() -> bool {
    std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1")
}

/// The deliveries of simulated day `day`, as (dedup key, body).
fn day_of_traffic(day: i64, at: DateTime<Utc>, scale: usize) -> Vec<(String, Vec<u8>)> {
    let statuses = STATUS_PER_DAY / scale;
    let consents = CONSENT_PER_DAY / scale;
    let when = at.to_rfc3339();
    let mut rows = Vec::with_capacity(statuses + consents);
    for i in 0..statuses {
        // Three statuses per message: a third as many messages as deliveries.
        let message = format!("msg_{day}_{}", i / 3);
        let status = ["queued", "sent", "delivered"][i % 3];
        let id = format!("st_{day}_{i}");
        let body = json!({"type": "messageStatus-v1", "id": id, "createdAt": when,
            "data": {"id": message, "threadId": "th_1", "status": status, "type": "SMS",
                     "createdAt": when}});
        rows.push((format!("event:{id}"), body.to_string().into_bytes()));
    }
    for i in 0..consents {
        let n = (day as usize * consents + i) % NUMBERS;
        let id = format!("co_{day}_{i}");
        let body = json!({"type": "consentUpdate-v1", "id": id, "createdAt": when,
            "data": {"organizationId": "org_1", "phoneNumber": format!("+1555{n:07}"),
                     "globalOptedOut": (day as usize + i).is_multiple_of(2)}});
        rows.push((format!("event:{id}"), body.to_string().into_bytes()));
    }
    rows
}

/// Commits `rows` to the outbox, received at `at`.
async fn commit(pool: &Pool, rows: Vec<(String, Vec<u8>)>, at: DateTime<Utc>) {
    for chunk in rows.chunks(INSERT_ROWS) {
        match pool {
            Pool::Sqlite(pool) => {
                let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                    "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index) ",
                );
                let received_at = codec::timestamp(at);
                insert.push_values(chunk, |mut row, (key, body)| {
                    row.push_bind(key)
                        .push_bind(received_at.clone())
                        .push_bind(body)
                        .push_bind("{}")
                        .push_bind(0_i64);
                });
                insert.build().execute(pool).await.expect("insert");
            }
            Pool::Postgres(pool) => {
                let (keys, bodies): (Vec<&str>, Vec<&[u8]>) = chunk
                    .iter()
                    .map(|(k, b)| (k.as_str(), b.as_slice()))
                    .unzip();
                sqlx::query(
                    "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index)
                     SELECT k, $3, b, '{}'::jsonb, 0 FROM unnest($1::text[], $2::bytea[]) AS d (k, b)",
                )
                .bind(keys)
                .bind(bodies)
                .bind(at)
                .execute(pool)
                .await
                .expect("insert");
            }
        }
    }
}

/// The database's size in bytes, as the disk sees it.
async fn size(pool: &Pool) -> i64 {
    match pool {
        Pool::Sqlite(pool) => {
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .execute(pool)
                .await
                .expect("checkpoint");
            let (pages, page_size): (i64, i64) = sqlx::query_as(
                "SELECT (SELECT page_count FROM pragma_page_count()),
                        (SELECT page_size FROM pragma_page_size())",
            )
            .fetch_one(pool)
            .await
            .expect("size");
            pages * page_size
        }
        Pool::Postgres(pool) => sqlx::query_scalar("SELECT pg_database_size(current_database())")
            .fetch_one(pool)
            .await
            .expect("size"),
    }
}

/// Rows per table: (outbox, ledger, messages).
async fn rows(pool: &Pool) -> (i64, i64, i64) {
    fetch_row(
        pool,
        "SELECT (SELECT COUNT(*) FROM outbox), (SELECT COUNT(*) FROM ledger),
                (SELECT COUNT(*) FROM messages)",
    )
    .await
    .expect("counts")
}

/// Bytes per table with its indexes, largest first (SQLite: the `dbstat` table, empty where
/// it is not compiled in).
async fn bytes_per_table(pool: &Pool) -> Vec<(String, i64)> {
    let pool = match pool {
        Pool::Sqlite(pool) => pool,
        Pool::Postgres(pool) => {
            return sqlx::query_as(
                "SELECT c.relname::text, pg_total_relation_size(c.oid) FROM pg_class AS c
                 JOIN pg_namespace AS n ON n.oid = c.relnamespace
                 WHERE c.relkind = 'r' AND n.nspname = 'public' ORDER BY 2 DESC LIMIT 6",
            )
            .fetch_all(pool)
            .await
            .unwrap_or_default();
        }
    };
    sqlx::query_as(
        "SELECT COALESCE(m.tbl_name, d.name), SUM(d.pgsize) FROM dbstat AS d
         LEFT JOIN sqlite_master AS m ON m.name = d.name
         GROUP BY 1 ORDER BY 2 DESC LIMIT 6",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default()
}

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn report(
    label: &str,
    bytes: i64,
    (outbox, ledger, messages): (i64, i64, i64),
    tables: &[(String, i64)],
) {
    println!(
        "{label:<14} {:>9.1} MiB   outbox {outbox:>8}   ledger {ledger:>7}   messages {messages:>8}",
        mib(bytes)
    );
    if !tables.is_empty() {
        let shown: Vec<String> = tables
            .iter()
            .map(|(table, bytes)| format!("{table} {:.1}", mib(*bytes)))
            .collect();
        println!("{:<14} MiB by table: {}", "", shown.join(", "));
    }
}

#[tokio::main]
async fn main() {
    let scale = if quick() { SCALE * 10 } else { SCALE };
    let (database, pool) = BenchDatabase::open("retention.db").await;
    // The retention the daemon has by default.
    let settings = Settings::default();
    println!(
        "retention: a simulated year on {} ({}; scratch in {}): {} status + {} consent deliveries a day (the real \
         {STATUS_PER_DAY} + {CONSENT_PER_DAY} divided by {scale}); retention {} / {} / {} days \
         (statuses / consent / messages), as configured by default",
        database.backend(),
        database.describe(&pool).await.expect("describe"),
        database.dir.path().display(),
        STATUS_PER_DAY / scale,
        CONSENT_PER_DAY / scale,
        settings.retention.message_status_days,
        settings.retention.consent_delivery_days,
        settings.retention.messages_days,
    );
    let worker = Worker::new(
        pool.clone(),
        std::sync::Arc::new(OutboxState::default()),
        false,
    );
    let pruner = Pruner::new(&pool, &settings.retention);
    let start = Utc
        .with_ymd_and_hms(2026, 1, 1, 12, 0, 0)
        .single()
        .expect("a date");
    let mut pruning = Duration::ZERO;
    let mut slowest_pass = Duration::ZERO;
    let mut longest_write_ms: f64 = 0.0;
    let mut removed = 0u64;
    let mut messages_removed = 0u64;
    let mut at_checkpoint = None;
    let run = Instant::now();
    for day in 0..DAYS {
        let at = start + chrono::Duration::days(day);
        commit(&pool, day_of_traffic(day, at, scale), at).await;
        worker.drain().await.expect("apply the day");
        let timed = Instant::now();
        let pass = pruner
            .prune(at + chrono::Duration::hours(12), false)
            .await
            .expect("prune");
        let took = timed.elapsed();
        pruning += took;
        slowest_pass = slowest_pass.max(took);
        removed += pass.message_status_deliveries + pass.consent_deliveries;
        messages_removed += pass.messages;
        longest_write_ms = longest_write_ms.max(pass.longest_write_ms);
        if let Pool::Postgres(pool) = &pool {
            sqlx::query("VACUUM").execute(pool).await.expect("vacuum");
        }
        if day + 1 == FIRST_CHECKPOINT {
            let checkpoint = (size(&pool).await, rows(&pool).await);
            report(
                "after 90 days",
                checkpoint.0,
                checkpoint.1,
                &bytes_per_table(&pool).await,
            );
            at_checkpoint = Some(checkpoint);
        }
    }
    let end = (size(&pool).await, rows(&pool).await);
    report(
        "after 365 days",
        end.0,
        end.1,
        &bytes_per_table(&pool).await,
    );
    let (_, applied, quarantined, pending) = outbox_states(&pool).await.expect("states");
    println!("outbox at the end: {applied} applied, {quarantined} quarantined, {pending} pending");
    let (first, first_rows) = at_checkpoint.expect("a checkpoint at day 90");
    println!(
        "size ratio end / day 90: {:.2} (outbox rows {:.2}, ledger rows {:.2}, message rows {:.2})",
        end.0 as f64 / first as f64,
        end.1.0 as f64 / first_rows.0 as f64,
        end.1.1 as f64 / first_rows.1 as f64,
        end.1.2 as f64 / first_rows.2 as f64,
    );
    println!(
        "pruning: {removed} deliveries and {messages_removed} messages removed in {:.2} s over {DAYS} passes (slowest pass {:.1} ms, \
         in batches of {}; longest single write {longest_write_ms:.1} ms); whole run {:.1} s",
        pruning.as_secs_f64(),
        slowest_pass.as_secs_f64() * 1000.0,
        outreach_sync::retention::PRUNE_BATCH,
        run.elapsed().as_secs_f64()
    );
    // Per day after day 90 the outbox should hold about 90 days of statuses plus every
    // consent delivery so far: growth by the consent evidence only.
    let statuses_kept = (STATUS_PER_DAY / scale) as i64 * FIRST_CHECKPOINT;
    let consents_kept = (CONSENT_PER_DAY / scale) as i64 * DAYS;
    let expected = statuses_kept + consents_kept;
    let verdict = if (end.1.0 - expected).abs() <= (STATUS_PER_DAY / scale) as i64 * 2 {
        "MET"
    } else {
        "NOT MET"
    };
    println!(
        "target (the outbox holds 90 days of statuses plus the consent evidence: ~{expected} \
         rows): {verdict} ({} rows)",
        end.1.0
    );
    // The mirror holds 90 days of messages (a third as many as status deliveries), at the
    // end as at day 90.
    let messages_per_day = (STATUS_PER_DAY / scale / 3) as i64;
    let messages_expected = messages_per_day * FIRST_CHECKPOINT;
    let verdict = if (end.1.2 - messages_expected).abs() <= messages_per_day * 2 {
        "MET"
    } else {
        "NOT MET"
    };
    println!(
        "target (the messages mirror holds 90 days of messages: ~{messages_expected} rows): \
         {verdict} ({} rows)",
        end.1.2
    );
    pool.close().await;
    drop(database);
}
