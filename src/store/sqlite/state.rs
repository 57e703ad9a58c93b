//! `daemon_state`: small durable facts of the daemon, by key.

use crate::store::StateStore;
use crate::store::codec;
use chrono::{DateTime, Utc};
use sqlx::SqlitePool;

impl StateStore for SqlitePool {
    async fn state_value(&self, key: &str) -> Result<Option<String>, sqlx::Error> {
        sqlx::query_scalar("SELECT value FROM daemon_state WHERE key = ?")
            .bind(key)
            .fetch_optional(self)
            .await
    }

    async fn put_state(
        &self,
        key: &str,
        value: &str,
        now: DateTime<Utc>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO daemon_state (key, value, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (key) DO UPDATE SET value = ?2, updated_at = ?3",
        )
        .bind(key)
        .bind(value)
        .bind(codec::timestamp(now))
        .execute(self)
        .await?;
        Ok(())
    }

    async fn count_token_failure(
        &self,
        key: &str,
        max: i64,
        block_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<String, sqlx::Error> {
        sqlx::query_scalar(
        "INSERT INTO daemon_state (key, value, updated_at)
         VALUES (?1, json_object('consecutive_failures', 1,
                                 'blocked_until', CASE WHEN 1 >= ?2 THEN ?3 END), ?4)
         ON CONFLICT (key) DO UPDATE SET
             value = json_object(
                 'consecutive_failures',
                 COALESCE(json_extract(daemon_state.value, '$.consecutive_failures'), 0) + 1,
                 'blocked_until',
                 CASE WHEN COALESCE(json_extract(daemon_state.value, '$.consecutive_failures'), 0) + 1 >= ?2
                      THEN ?3 ELSE json_extract(daemon_state.value, '$.blocked_until') END),
             updated_at = ?4
         RETURNING value",
    )
    .bind(key)
    .bind(max)
    .bind(codec::timestamp(block_until))
    .bind(codec::timestamp(now))
    .fetch_one(self)
    .await
    }
}
