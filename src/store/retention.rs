//! Retention statements with one text for both backends (`$N` parameters, times bound as
//! [`Timestamp`](crate::model::Timestamp)); what differs is given by each backend's
//! `retention`, side by side: the statements on finished messages (SQLite's partial indexes
//! are on `terminal = 1`, PostgreSQL's take `FOR UPDATE SKIP LOCKED`), how a list of ids is
//! bound, and what frees the space (SQLite's incremental vacuum).

/// `RetentionStore` for the pool type `$pool`: `applied` deletes the applied rows of the
/// ids bound as `$ids_param`, `count_finished` and `delete_finished` take the time as `$1`
/// (and the limit as `$2`); `$own` are the backend's own methods.
macro_rules! statements {
    (
        $pool:ty,
        applied: $applied:literal, |$ids:ident| $ids_param:expr,
        count_finished: $count_finished:literal,
        delete_finished: $delete_finished:literal,
        $($own:tt)*
    ) => {
        impl $crate::store::RetentionStore for $pool {
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
                let before = crate::model::Timestamp(before);
                let acks = sqlx::query("DELETE FROM subscriber_acks WHERE acked_at < $1")
                    .bind(before)
                    .execute(self)
                    .await?
                    .rows_affected();
                // A destination's finished entries: behind its cursor long since.
                let outcomes = sqlx::query(
                    "DELETE FROM destination_outcomes WHERE at < $1 AND outcome IS NOT NULL",
                )
                .bind(before)
                .execute(self)
                .await?
                .rows_affected();
                Ok(acks + outcomes)
            }

            async fn delete_applied(&self, $ids: &[i64]) -> Result<u64, crate::store::Error> {
                if $ids.is_empty() {
                    return Ok(0);
                }
                let done = sqlx::query($applied)
                    .bind($ids_param)
                    .execute(self)
                    .await?;
                Ok(done.rows_affected())
            }

            async fn count_finished_messages(
                &self,
                before: chrono::DateTime<chrono::Utc>,
            ) -> Result<u64, crate::store::Error> {
                let count: i64 = sqlx::query_scalar($count_finished)
                    .bind(crate::model::Timestamp(before))
                    .fetch_one(self)
                    .await?;
                Ok(u64::try_from(count).unwrap_or(0))
            }

            async fn delete_finished_messages(
                &self,
                before: chrono::DateTime<chrono::Utc>,
                limit: i64,
            ) -> Result<u64, crate::store::Error> {
                let done = sqlx::query($delete_finished)
                    .bind(crate::model::Timestamp(before))
                    .bind(limit)
                    .execute(self)
                    .await?;
                Ok(done.rows_affected())
            }

            $($own)*
        }
    };
}

pub(crate) use statements;
