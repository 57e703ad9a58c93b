//! Pruning stored deliveries and finished messages on SQLite, and giving the space back
//! (incremental vacuum).

use crate::store::RetentionStore;
use crate::store::codec;
use chrono::{DateTime, Utc};
use sqlx::SqlitePool;

impl RetentionStore for SqlitePool {
    async fn free_pages(&self) -> Result<i64, crate::store::Error> {
        Ok(sqlx::query_scalar("PRAGMA freelist_count")
            .fetch_one(self)
            .await?)
    }

    async fn vacuum_step(&self, pages: i64) -> Result<i64, crate::store::Error> {
        let mut conn = self.acquire().await?;
        // A pragma's argument cannot be bound; `pages` is a number.
        sqlx::query(&format!("PRAGMA incremental_vacuum({pages})"))
            .execute(&mut *conn)
            .await?;
        Ok(sqlx::query_scalar("PRAGMA freelist_count")
            .fetch_one(&mut *conn)
            .await?)
    }

    crate::store::retention::shared!();

    async fn delete_applied(&self, ids: &[i64]) -> Result<u64, crate::store::Error> {
        if ids.is_empty() {
            return Ok(0);
        }
        let done = sqlx::query(
            "DELETE FROM outbox WHERE state = 'applied' AND id IN (SELECT value FROM json_each(?))",
        )
        .bind(codec::json_param(ids)?)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }

    async fn count_finished_messages(
        &self,
        before: DateTime<Utc>,
    ) -> Result<u64, crate::store::Error> {
        let count: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM messages WHERE terminal = 1 AND status_at < ?",
        )
        .bind(codec::timestamp(before))
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
            "DELETE FROM messages WHERE id IN
             (SELECT id FROM messages WHERE terminal = 1 AND status_at < ?1 LIMIT ?2)",
        )
        .bind(codec::timestamp(before))
        .bind(limit)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }
}

/// Switches the file to incremental auto-vacuum if it is not yet: that takes one VACUUM
/// (a rewrite of the file: instant on a new one, long on a large one). Returns whether it
/// rewrote. Not a connection option: setting the pragma writes the file's header, which
/// would make every connection of every command queue for the write lock.
pub async fn ensure_incremental_vacuum(pool: &SqlitePool) -> Result<bool, crate::store::Error> {
    /// `PRAGMA auto_vacuum`'s value for INCREMENTAL.
    const INCREMENTAL: i64 = 2;
    let mut conn = pool.acquire().await?;
    let mode: i64 = sqlx::query_scalar("PRAGMA auto_vacuum")
        .fetch_one(&mut *conn)
        .await?;
    if mode == INCREMENTAL {
        return Ok(false);
    }
    sqlx::query("PRAGMA auto_vacuum = INCREMENTAL")
        .execute(&mut *conn)
        .await?;
    sqlx::query("VACUUM").execute(&mut *conn).await?;
    Ok(true)
}

/// Switches a SQLite file to incremental auto-vacuum once (see
/// [`ensure_incremental_vacuum`]); logs when that takes a rewrite.
pub async fn prepare(pool: &SqlitePool) -> Result<(), crate::store::Error> {
    if ensure_incremental_vacuum(pool).await? {
        tracing::info!(
            "the database file now gives pruned space back (incremental auto-vacuum; rewritten once)"
        );
    }
    Ok(())
}
