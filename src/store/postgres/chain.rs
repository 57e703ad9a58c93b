//! The ledger's hash chain on PostgreSQL: reading it in seq order. (The chain of entries
//! recorded before it existed is computed by its migration.)

use sqlx::PgPool;

use crate::model::chain::{ChainHead, ChainRow};
use crate::store::ChainStore;

impl ChainStore for PgPool {
    async fn chain_page(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<ChainRow>, crate::store::Error> {
        Ok(sqlx::query_as(
            "SELECT seq, organization_id, lead_id, phone_number, opted_out, occurred_at,
                recorded_at, source, event_ref, superseded, tag_id, reason, hash
         FROM ledger WHERE seq > $1 ORDER BY seq LIMIT $2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(self)
        .await?)
    }

    async fn chain_head(&self) -> Result<ChainHead, crate::store::Error> {
        let last: Option<(i64, String)> =
            sqlx::query_as("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1")
                .fetch_optional(self)
                .await?;
        Ok(last.map_or_else(ChainHead::empty, |(seq, hash)| ChainHead { seq, hash }))
    }
}
