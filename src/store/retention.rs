//! Retention statements with one text for both backends; what frees the space (SQLite's
//! incremental vacuum) is in each backend's `retention`.

/// The shared methods of `RetentionStore`, expanded inside each backend's `impl` block.
macro_rules! shared {
    () => {
        async fn scan_outbox(
            &self,
            after: i64,
            limit: i64,
        ) -> Result<Vec<crate::model::OutboxHead>, crate::store::Error> {
            Ok(sqlx::query_as(
                "SELECT id, received_at, state, body FROM outbox WHERE id > $1 ORDER BY id LIMIT $2",
            )
            .bind(after)
            .bind(limit)
            .fetch_all(self)
            .await?)
        }

        async fn delete_acks_before(
            &self,
            before: chrono::DateTime<chrono::Utc>,
        ) -> Result<u64, crate::store::Error> {
            Ok(sqlx::query("DELETE FROM subscriber_acks WHERE acked_at < $1")
                .bind(crate::model::Timestamp(before))
                .execute(self)
                .await?
                .rows_affected())
        }
    };
}

pub(crate) use shared;
