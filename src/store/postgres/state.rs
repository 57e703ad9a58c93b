//! `daemon_state`: small durable facts of the daemon, by key, shared by every replica.

use crate::store::StateStore;
use crate::store::codec;
use chrono::{DateTime, Utc};
use sqlx::PgPool;

impl StateStore for PgPool {
    crate::store::state::shared!();

    async fn count_token_failure(
        &self,
        key: &str,
        max: i64,
        block_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<String, crate::store::Error> {
        Ok(sqlx::query_scalar(
        "INSERT INTO daemon_state (key, value, updated_at)
         VALUES ($1, jsonb_build_object('consecutive_failures', 1,
                                        'blocked_until', CASE WHEN 1 >= $2 THEN $3 END)::TEXT, $4)
         ON CONFLICT (key) DO UPDATE SET
             value = jsonb_build_object(
                 'consecutive_failures',
                 COALESCE((daemon_state.value::JSONB ->> 'consecutive_failures')::BIGINT, 0) + 1,
                 'blocked_until',
                 CASE WHEN COALESCE((daemon_state.value::JSONB ->> 'consecutive_failures')::BIGINT, 0) + 1 >= $2
                      THEN $3 ELSE daemon_state.value::JSONB ->> 'blocked_until' END)::TEXT,
             updated_at = $4
         RETURNING value",
    )
    .bind(key)
    .bind(max)
    .bind(codec::timestamp(block_until))
    .bind(now)
    .fetch_one(self)
    .await?)
    }
}
