//! What the evidence bundle reads on PostgreSQL: a number's ledger entries with their
//! hashes and kept evidence, and the stored deliveries they came from.

use crate::store::EvidenceStore;
use sqlx::PgPool;

use super::read::ledger_columns;
use crate::model::{KeptDelivery, StoredEntry};

impl EvidenceStore for PgPool {
    async fn evidence_entries(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<StoredEntry>, crate::store::Error> {
        Ok(sqlx::query_as(concat!(
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
        .await?)
    }

    async fn evidence_deliveries(
        &self,
        dedup_keys: &[&str],
    ) -> Result<Vec<KeptDelivery>, crate::store::Error> {
        Ok(sqlx::query_as(
            "SELECT id, dedup_key, received_at, headers::text AS headers, body,
                secret_index::BIGINT AS secret_index
         FROM outbox WHERE dedup_key = ANY($1)",
        )
        .bind(dedup_keys)
        .fetch_all(self)
        .await?)
    }
}
