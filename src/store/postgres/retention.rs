//! Pruning stored deliveries and finished messages on PostgreSQL (plain deletes: autovacuum
//! reuses the space).

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::model::OutboxHead;

/// Up to `limit` outbox rows after `after`, in id order, with their bodies (what kind of
/// delivery each is).
pub async fn scan(pool: &PgPool, after: i64, limit: i64) -> Result<Vec<OutboxHead>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, received_at, state, body FROM outbox WHERE id > $1 ORDER BY id LIMIT $2",
    )
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// Deletes those of `ids` that are still applied (a row put back to pending by `replay`
/// since it was scanned stays); returns how many went.
pub async fn delete_applied(pool: &PgPool, ids: &[i64]) -> Result<u64, sqlx::Error> {
    if ids.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query("DELETE FROM outbox WHERE state = 'applied' AND id = ANY($1)")
        .bind(ids)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

/// Tracked messages with a terminal status dating from before `before`: what
/// [`delete_finished_messages`] would remove, all batches together (the `messages_done`
/// index).
pub async fn count_finished_messages(
    pool: &PgPool,
    before: DateTime<Utc>,
) -> Result<u64, sqlx::Error> {
    let count: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM messages WHERE terminal AND status_at < $1")
            .bind(before)
            .fetch_one(pool)
            .await?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// Deletes up to `limit` tracked messages with a terminal status dating from before
/// `before` (a non-terminal one is never touched: the reconciler looks it up); returns how
/// many went. The condition is checked again on the row as it is when deleted, so a newer
/// status committed meanwhile by another replica keeps it; a row being written is skipped
/// (the next pass takes it).
pub async fn delete_finished_messages(
    pool: &PgPool,
    before: DateTime<Utc>,
    limit: i64,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "DELETE FROM messages WHERE terminal AND status_at < $1 AND id IN
             (SELECT id FROM messages WHERE terminal AND status_at < $1
              LIMIT $2 FOR UPDATE SKIP LOCKED)",
    )
    .bind(before)
    .bind(limit)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}
