//! Pruning stored deliveries and finished messages on PostgreSQL (plain deletes: autovacuum
//! reuses the space).

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::store::RetentionStore;

impl RetentionStore for PgPool {
    async fn free_pages(&self) -> Result<i64, crate::store::Error> {
        Ok(0)
    }

    async fn vacuum_step(&self, _pages: i64) -> Result<i64, crate::store::Error> {
        Ok(0)
    }

    crate::store::retention::shared!();

    async fn delete_applied(&self, ids: &[i64]) -> Result<u64, crate::store::Error> {
        if ids.is_empty() {
            return Ok(0);
        }
        let done = sqlx::query("DELETE FROM outbox WHERE state = 'applied' AND id = ANY($1)")
            .bind(ids)
            .execute(self)
            .await?;
        Ok(done.rows_affected())
    }

    async fn count_finished_messages(
        &self,
        before: DateTime<Utc>,
    ) -> Result<u64, crate::store::Error> {
        let count: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE terminal AND status_at < $1")
                .bind(before)
                .fetch_one(self)
                .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn delete_finished_messages(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64, crate::store::Error> {
        let done = sqlx::query(
            "DELETE FROM messages WHERE terminal AND status_at < $1 AND id IN
             (SELECT id FROM messages WHERE terminal AND status_at < $1
              LIMIT $2 FOR UPDATE SKIP LOCKED)",
        )
        .bind(before)
        .bind(limit)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }
}
