//! The outbox on PostgreSQL, shared by the workers of every replica.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};

use crate::model::{OutboxStates, Requeue, StoredDelivery};

/// Claims the first `limit` pending rows no other worker holds, in id order, and marks them
/// applied at `now` in the same statement (the caller's transaction settles the rows it
/// must quarantine instead, and a rollback leaves them all pending): one pass over the rows
/// instead of a lock now and an update later. Workers of all replicas take disjoint batches
/// at once, nobody waiting on anybody.
pub async fn claim_pending(
    conn: &mut PgConnection,
    limit: i64,
    now: DateTime<Utc>,
) -> Result<Vec<StoredDelivery>, sqlx::Error> {
    let mut rows: Vec<StoredDelivery> = sqlx::query_as(
        "UPDATE outbox SET state = 'applied', applied_at = $2
         WHERE id IN (SELECT id FROM outbox WHERE state = 'pending' ORDER BY id LIMIT $1
                      FOR UPDATE SKIP LOCKED)
         RETURNING id, dedup_key, received_at, body",
    )
    .bind(limit)
    .bind(now)
    .fetch_all(conn)
    .await?;
    rows.sort_unstable_by_key(|row| row.id);
    Ok(rows)
}

/// Counts a failed attempt against the pending row `id`, quarantining it after
/// `max_attempts`; returns its id if it was quarantined.
pub async fn record_failure(
    pool: &PgPool,
    id: i64,
    error: &str,
    max_attempts: i64,
) -> Result<Option<i64>, sqlx::Error> {
    Ok(sqlx::query_scalar(
        "UPDATE outbox SET attempts = attempts + 1, last_error = $2,
             state = CASE WHEN attempts + 1 >= $3 THEN 'quarantined' ELSE state END
         WHERE id = $1 AND state = 'pending'
         RETURNING CASE WHEN state = 'quarantined' THEN id END",
    )
    .bind(id)
    .bind(error)
    .bind(max_attempts)
    .fetch_optional(pool)
    .await?
    .flatten())
}

/// Puts rows back in the pending state; returns their ids.
pub async fn requeue(pool: &PgPool, selection: Requeue) -> Result<Vec<i64>, sqlx::Error> {
    match selection {
        Requeue::Quarantined => {
            sqlx::query_scalar(
                "UPDATE outbox SET state = 'pending', attempts = 0 WHERE state = 'quarantined'
                 RETURNING id",
            )
            .fetch_all(pool)
            .await
        }
        Requeue::Id(id) => {
            sqlx::query_scalar(
                "UPDATE outbox SET state = 'pending', attempts = 0 WHERE id = $1 RETURNING id",
            )
            .bind(id)
            .fetch_all(pool)
            .await
        }
    }
}

/// The states of the outbox rows `ids`, by state: how many are pending, applied and
/// quarantined.
pub async fn states(pool: &PgPool, ids: &[i64]) -> Result<OutboxStates, sqlx::Error> {
    sqlx::query_as(
        "SELECT COUNT(*) FILTER (WHERE state = 'pending') AS pending,
                COUNT(*) FILTER (WHERE state = 'applied') AS applied,
                COUNT(*) FILTER (WHERE state = 'quarantined') AS quarantined
         FROM outbox WHERE id = ANY($1)",
    )
    .bind(ids)
    .fetch_one(pool)
    .await
}
