//! Pruning stored deliveries on PostgreSQL (plain deletes: autovacuum reuses the space).

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
