//! `daemon_state` statements with one text for both backends; counting token failures,
//! which builds JSON, is each backend's `state::TOKEN_FAILURE`.

use super::Error;
use super::backend::on_backend;
use super::{Pool, StateStore};
use chrono::{DateTime, Utc};

impl StateStore for Pool {
    async fn state_value(&self, key: &str) -> Result<Option<String>, Error> {
        on_backend!(self, |pool| {
            Ok(
                sqlx::query_scalar("SELECT value FROM daemon_state WHERE key = $1")
                    .bind(key)
                    .fetch_optional(pool)
                    .await?,
            )
        })
    }

    async fn put_state(&self, key: &str, value: &str, now: DateTime<Utc>) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query(
                "INSERT INTO daemon_state (key, value, updated_at) VALUES ($1, $2, $3)
                 ON CONFLICT (key) DO UPDATE SET value = $2, updated_at = $3",
            )
            .bind(key)
            .bind(value)
            .bind(crate::model::Timestamp(now))
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn count_token_failure(
        &self,
        key: &str,
        max: i64,
        block_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<String, Error> {
        on_backend!(self, |pool, dialect| {
            Ok(sqlx::query_scalar(dialect::state::TOKEN_FAILURE)
                .bind(key)
                .bind(max)
                // As text on both backends: it is kept inside the JSON value.
                .bind(crate::model::Timestamp(block_until).to_string())
                .bind(crate::model::Timestamp(now))
                .fetch_one(pool)
                .await?)
        })
    }
}
