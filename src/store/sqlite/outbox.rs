//! The outbox on SQLite, as the worker and `replay` use it.

use chrono::{DateTime, Utc};
use sqlx::{SqliteConnection, SqlitePool};

use crate::db;
use crate::model::{OutboxStates, Requeue, StoredDelivery};

/// The first `limit` pending rows, in id order, inside the caller's write transaction.
pub async fn pending(
    conn: &mut SqliteConnection,
    limit: i64,
) -> Result<Vec<StoredDelivery>, sqlx::Error> {
    // One row for the whole batch (bodies in hex: any bytes survive), as a row each would
    // cost a hand-over between SQLite's thread and this task.
    let mut rows: Vec<(i64, String, String, String)> = db::json_rows(
        conn,
        "SELECT json_group_array(json_array(id, dedup_key, received_at, hex(body)))
         FROM (SELECT id, dedup_key, received_at, body FROM outbox
               WHERE state = 'pending' ORDER BY id LIMIT ?)",
        limit,
    )
    .await?;
    rows.sort_unstable_by_key(|(id, ..)| *id);
    rows.into_iter()
        .map(|(id, dedup_key, received_at, body)| {
            let received_at = DateTime::parse_from_rfc3339(&received_at)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            let body = hex::decode(&body).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            Ok(StoredDelivery {
                id,
                dedup_key,
                received_at,
                body,
            })
        })
        .collect()
}

/// Counts a failed attempt against the pending row `id`, quarantining it after
/// `max_attempts`; returns its id if it was quarantined.
pub async fn record_failure(
    pool: &SqlitePool,
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
pub async fn requeue(pool: &SqlitePool, selection: Requeue) -> Result<Vec<i64>, sqlx::Error> {
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
                "UPDATE outbox SET state = 'pending', attempts = 0 WHERE id = ? RETURNING id",
            )
            .bind(id)
            .fetch_all(pool)
            .await
        }
    }
}

/// The states of the outbox rows `ids`, by state: how many are pending, applied and
/// quarantined.
pub async fn states(pool: &SqlitePool, ids: &[i64]) -> Result<OutboxStates, sqlx::Error> {
    sqlx::query_as(
        "SELECT COALESCE(SUM(state = 'pending'), 0) AS pending,
                COALESCE(SUM(state = 'applied'), 0) AS applied,
                COALESCE(SUM(state = 'quarantined'), 0) AS quarantined
         FROM outbox WHERE id IN (SELECT value FROM json_each(?))",
    )
    .bind(db::json_param(ids)?)
    .fetch_one(pool)
    .await
}
