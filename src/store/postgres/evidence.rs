//! What the evidence bundle reads on PostgreSQL: a number's ledger entries with their
//! hashes and kept evidence, and the stored deliveries they came from.

use crate::store::EvidenceStore;
use sqlx::PgPool;

use crate::model::KeptDelivery;

impl EvidenceStore for PgPool {
    crate::store::read::evidence_entries!();

    async fn evidence_deliveries(
        &self,
        dedup_keys: &[&str],
    ) -> Result<Vec<KeptDelivery>, crate::store::Error> {
        Ok(sqlx::query_as(
            "SELECT id, dedup_key, received_at, headers::text AS headers, body,
                secret_index::BIGINT AS secret_index,
                verified_header::BIGINT AS verified_header
         FROM outbox WHERE dedup_key = ANY($1)",
        )
        .bind(dedup_keys)
        .fetch_all(self)
        .await?)
    }
}
