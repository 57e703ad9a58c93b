//! The push queue on SQLite: local changes on their way to the service.

use crate::store::codec;
use chrono::{DateTime, Utc};
use sqlx::SqlitePool;

use crate::model::DuePush;

/// Takes the oldest push due at `now` whose number has no older change pending, counting
/// the attempt before it is made.
pub async fn take_due(
    pool: &SqlitePool,
    now: DateTime<Utc>,
) -> Result<Option<DuePush>, sqlx::Error> {
    sqlx::query_as(
        "UPDATE pushes SET attempts = attempts + 1, last_attempt_at = ?1,
                first_attempt_at = COALESCE(first_attempt_at, ?1)
         WHERE seq = (SELECT p.seq FROM pushes AS p
                      WHERE p.state = 'pending' AND p.next_attempt_at <= ?1
                        AND NOT EXISTS (SELECT 1 FROM pushes AS o WHERE o.state = 'pending'
                            AND o.organization_id = p.organization_id
                            AND o.phone_number = p.phone_number AND o.seq < p.seq)
                      ORDER BY p.seq LIMIT 1)
         RETURNING seq, organization_id, phone_number, opted_out, tag_id, lead_id, attempts",
    )
    .bind(codec::timestamp(now))
    .fetch_optional(pool)
    .await
}

/// The push `seq` reached the service as lead `lead_id`.
pub async fn sent(
    pool: &SqlitePool,
    seq: i64,
    lead_id: &str,
    at: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE pushes SET state = 'sent', lead_id = ?2, finished_at = ?3, last_error = NULL
         WHERE seq = ?1 AND state = 'pending'",
    )
    .bind(seq)
    .bind(lead_id)
    .bind(codec::timestamp(at))
    .execute(pool)
    .await?;
    Ok(())
}

/// The service refused the push `seq` for good.
pub async fn failed(
    pool: &SqlitePool,
    seq: i64,
    error: &str,
    at: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE pushes SET state = 'failed', last_error = ?2, finished_at = ?3
         WHERE seq = ?1 AND state = 'pending'",
    )
    .bind(seq)
    .bind(error)
    .bind(codec::timestamp(at))
    .execute(pool)
    .await?;
    Ok(())
}

/// The push `seq` failed for now; it is due again at `next`.
pub async fn retry_at(
    pool: &SqlitePool,
    seq: i64,
    error: &str,
    next: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE pushes SET last_error = ?2, next_attempt_at = ?3 WHERE seq = ?1")
        .bind(seq)
        .bind(error)
        .bind(codec::timestamp(next))
        .execute(pool)
        .await?;
    Ok(())
}

/// The earliest time a pending push is due, if any.
pub async fn next_due(pool: &SqlitePool) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    let next: Option<String> =
        sqlx::query_scalar("SELECT MIN(next_attempt_at) FROM pushes WHERE state = 'pending'")
            .fetch_one(pool)
            .await?;
    Ok(next
        .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
        .map(|t| t.with_timezone(&Utc)))
}
