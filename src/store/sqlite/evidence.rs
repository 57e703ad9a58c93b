//! What the evidence bundle reads on SQLite: a number's ledger entries with their hashes
//! and kept evidence, and the stored deliveries they came from.

use crate::store::EvidenceStore;
use crate::store::codec;
use sqlx::SqlitePool;

use super::read::ledger_columns;
use crate::model::{KeptDelivery, StoredEntry};

impl EvidenceStore for SqlitePool {
    async fn evidence_entries(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<StoredEntry>, crate::store::Error> {
        Ok(sqlx::query_as(concat!(
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
        .fetch_all(self)
        .await?)
    }

    async fn evidence_deliveries(
        &self,
        dedup_keys: &[&str],
    ) -> Result<Vec<KeptDelivery>, crate::store::Error> {
        Ok(sqlx::query_as(
            "SELECT o.id, o.dedup_key, o.received_at, o.headers, o.body, o.secret_index
         FROM (SELECT DISTINCT value FROM json_each(?)) AS k
         JOIN outbox AS o ON o.dedup_key = k.value",
        )
        .bind(codec::json_param(dedup_keys)?)
        .fetch_all(self)
        .await?)
    }
}
