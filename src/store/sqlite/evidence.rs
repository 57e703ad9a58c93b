//! What the evidence bundle reads on SQLite: a number's ledger entries with their hashes
//! and kept evidence, and the stored deliveries they came from.

use sqlx::SqlitePool;

use super::read::ledger_columns;
use crate::db;
use crate::model::{KeptDelivery, LedgerEntry, StoredEntry};

#[derive(sqlx::FromRow)]
struct Row {
    #[sqlx(flatten)]
    entry: LedgerEntry,
    tag_id: Option<String>,
    reason: Option<String>,
    hash: Option<String>,
    prev_hash: Option<String>,
    evidence: Option<String>,
}

/// Every ledger entry of `phone` (in one organization or all), oldest first.
pub async fn entries(
    pool: &SqlitePool,
    phone: &str,
    organization: Option<&str>,
) -> Result<Vec<StoredEntry>, sqlx::Error> {
    let rows: Vec<Row> = sqlx::query_as(concat!(
        "SELECT ",
        ledger_columns!(),
        ", tag_id, reason, hash, evidence,
                (SELECT b.hash FROM ledger AS b WHERE b.seq < ledger.seq
                 ORDER BY b.seq DESC LIMIT 1) AS prev_hash
         FROM ledger
         WHERE phone_number = ?1 AND (?2 IS NULL OR organization_id = ?2) ORDER BY seq"
    ))
    .bind(phone)
    .bind(organization)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| StoredEntry {
            entry: r.entry,
            tag_id: r.tag_id,
            reason: r.reason,
            hash: r.hash,
            prev_hash: r.prev_hash,
            evidence: r.evidence,
        })
        .collect())
}

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: i64,
    dedup_key: String,
    received_at: String,
    headers: String,
    body: Vec<u8>,
    secret_index: i64,
}

/// The stored deliveries of these dedup keys (those still kept).
pub async fn deliveries(
    pool: &SqlitePool,
    dedup_keys: &[&str],
) -> Result<Vec<KeptDelivery>, sqlx::Error> {
    let rows: Vec<DeliveryRow> = sqlx::query_as(
        "SELECT o.id, o.dedup_key, o.received_at, o.headers, o.body, o.secret_index
         FROM (SELECT DISTINCT value FROM json_each(?)) AS k
         JOIN outbox AS o ON o.dedup_key = k.value",
    )
    .bind(db::json_param(dedup_keys)?)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| KeptDelivery {
            id: r.id,
            dedup_key: r.dedup_key,
            received_at: r.received_at,
            headers: r.headers,
            body: r.body,
            secret_index: r.secret_index,
        })
        .collect())
}
