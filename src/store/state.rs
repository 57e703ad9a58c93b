//! `daemon_state` statements with one text for both backends; counting token failures,
//! which builds JSON, is in each backend's `state`.

/// The shared methods of `StateStore`, expanded inside each backend's `impl` block.
macro_rules! shared {
    () => {
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
    };
}

pub(crate) use shared;
