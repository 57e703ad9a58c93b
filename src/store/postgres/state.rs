//! `daemon_state`: small durable facts of the daemon, by key, shared by every replica.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

pub async fn get(pool: &PgPool, key: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar("SELECT value FROM daemon_state WHERE key = $1")
        .bind(key)
        .fetch_optional(pool)
        .await
}

pub async fn set(
    pool: &PgPool,
    key: &str,
    value: &str,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO daemon_state (key, value, updated_at) VALUES ($1, $2, $3)
         ON CONFLICT (key) DO UPDATE SET value = $2, updated_at = $3",
    )
    .bind(key)
    .bind(value)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(())
}
