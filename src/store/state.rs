//! `daemon_state` statements with one text for both backends; counting token failures,
//! which builds JSON, is given by each backend's `state`.

/// `StateStore` for the pool type `$pool`; `token_failure` counts a failure of the token
/// `$1` (blocked from `$2` failures on until `$3`, at `$4`) and returns the new value.
macro_rules! statements {
    ($pool:ty, token_failure: $token_failure:literal) => {
        impl $crate::store::StateStore for $pool {
            async fn state_value(&self, key: &str) -> Result<Option<String>, crate::store::Error> {
                Ok(
                    sqlx::query_scalar("SELECT value FROM daemon_state WHERE key = $1")
                        .bind(key)
                        .fetch_optional(self)
                        .await?,
                )
            }

            async fn put_state(
                &self,
                key: &str,
                value: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), crate::store::Error> {
                sqlx::query(
                    "INSERT INTO daemon_state (key, value, updated_at) VALUES ($1, $2, $3)
                 ON CONFLICT (key) DO UPDATE SET value = $2, updated_at = $3",
                )
                .bind(key)
                .bind(value)
                .bind(crate::model::Timestamp(now))
                .execute(self)
                .await?;
                Ok(())
            }

            async fn count_token_failure(
                &self,
                key: &str,
                max: i64,
                block_until: chrono::DateTime<chrono::Utc>,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<String, crate::store::Error> {
                Ok(sqlx::query_scalar($token_failure)
                    .bind(key)
                    .bind(max)
                    // As text on both backends: it is kept inside the JSON value.
                    .bind(crate::model::Timestamp(block_until).to_string())
                    .bind(crate::model::Timestamp(now))
                    .fetch_one(self)
                    .await?)
            }
        }
    };
}

pub(crate) use statements;
