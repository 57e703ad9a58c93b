//! What the evidence bundle reads on PostgreSQL: a number's ledger entries with their
//! hashes and kept evidence, and the stored deliveries they came from.

use crate::store::EvidenceStore;
use crate::store::codec;
use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::read::LedgerRow;
use super::read::ledger_columns;
use crate::model::{KeptDelivery, StoredEntry};

#[derive(sqlx::FromRow)]
struct Row {
    #[sqlx(flatten)]
    entry: LedgerRow,
    tag_id: Option<String>,
    reason: Option<String>,
    hash: Option<String>,
    prev_hash: Option<String>,
    evidence: Option<String>,
}

impl EvidenceStore for PgPool {
    async fn evidence_entries(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<StoredEntry>, sqlx::Error> {
        let rows: Vec<Row> = sqlx::query_as(concat!(
            "SELECT ",
            ledger_columns!(),
            ", tag_id, reason, hash, evidence::text AS evidence,
                (SELECT b.hash FROM ledger AS b WHERE b.seq < ledger.seq
                 ORDER BY b.seq DESC LIMIT 1) AS prev_hash
         FROM ledger
         WHERE phone_number = $1 AND ($2::text IS NULL OR organization_id = $2) ORDER BY seq"
        ))
        .bind(phone)
        .bind(organization)
        .fetch_all(self)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| StoredEntry {
                entry: r.entry.into(),
                tag_id: r.tag_id,
                reason: r.reason,
                hash: r.hash,
                prev_hash: r.prev_hash,
                evidence: r.evidence,
            })
            .collect())
    }

    async fn evidence_deliveries(
        &self,
        dedup_keys: &[&str],
    ) -> Result<Vec<KeptDelivery>, sqlx::Error> {
        let rows: Vec<DeliveryRow> = sqlx::query_as(
            "SELECT id, dedup_key, received_at, headers::text AS headers, body, secret_index
         FROM outbox WHERE dedup_key = ANY($1)",
        )
        .bind(dedup_keys)
        .fetch_all(self)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| KeptDelivery {
                id: r.id,
                dedup_key: r.dedup_key,
                received_at: codec::timestamp(r.received_at),
                headers: r.headers,
                body: r.body,
                secret_index: i64::from(r.secret_index),
            })
            .collect())
    }
}

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: i64,
    dedup_key: String,
    received_at: DateTime<Utc>,
    headers: String,
    body: Vec<u8>,
    secret_index: i32,
}
