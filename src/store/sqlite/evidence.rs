//! What the evidence bundle reads on SQLite: a number's ledger entries with their hashes
//! and kept evidence, and the stored deliveries they came from.

use crate::store::EvidenceStore;
use crate::store::codec;
use sqlx::SqlitePool;

use crate::model::KeptDelivery;

impl EvidenceStore for SqlitePool {
    crate::store::read::evidence_entries!();

    async fn evidence_deliveries(
        &self,
        dedup_keys: &[&str],
    ) -> Result<Vec<KeptDelivery>, crate::store::Error> {
        Ok(sqlx::query_as(
            "SELECT o.id, o.dedup_key, o.received_at, o.headers, o.body, o.secret_index,
                o.verified_header
         FROM (SELECT DISTINCT value FROM json_each(?)) AS k
         JOIN outbox AS o ON o.dedup_key = k.value",
        )
        .bind(codec::json_param(dedup_keys)?)
        .fetch_all(self)
        .await?)
    }
}
