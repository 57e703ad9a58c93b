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
    };
}

pub(crate) use shared;
