//! The outbox as the worker and `replay` use it, one text for both backends (`$N`
//! parameters: SQLite takes them too); what differs, counting states and how a list of ids
//! is bound, is in each backend's `outbox`, and claiming rows in its `apply`.

use super::Error;
use super::backend::on_backend;
use super::{OutboxCounts, OutboxStore, Pool};
impl OutboxStore for Pool {
    async fn record_failure(
        &self,
        id: i64,
        error: &str,
        max_attempts: i64,
    ) -> Result<Option<i64>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_scalar(
                "UPDATE outbox SET attempts = attempts + 1, last_error = $2,
                     state = CASE WHEN attempts + 1 >= $3 THEN 'quarantined' ELSE state END
                 WHERE id = $1 AND state = 'pending'
                 RETURNING CASE WHEN state = 'quarantined' THEN id END",
            )
            .bind(id)
            .bind(error)
            .bind(max_attempts)
            .fetch_optional(pool)
            .await?
            .flatten())
        })
    }

    async fn requeue(&self, selection: crate::model::Requeue) -> Result<Vec<i64>, Error> {
        on_backend!(self, |pool| {
            let (sql, id) = match selection {
                crate::model::Requeue::Quarantined => (
                    "UPDATE outbox SET state = 'pending', attempts = 0
                     WHERE state = 'quarantined' RETURNING id",
                    None,
                ),
                crate::model::Requeue::Id(id) => (
                    "UPDATE outbox SET state = 'pending', attempts = 0 WHERE id = $1 RETURNING id",
                    Some(id),
                ),
            };
            let mut query = sqlx::query_scalar(sql);
            if let Some(id) = id {
                query = query.bind(id);
            }
            Ok(query.fetch_all(pool).await?)
        })
    }
}

impl OutboxCounts for Pool {
    async fn outbox_states(&self, ids: &[i64]) -> Result<crate::model::OutboxStates, Error> {
        on_backend!(self, |pool, dialect| {
            Ok(sqlx::query_as(dialect::outbox::STATES)
                .bind(dialect::list(ids)?)
                .fetch_one(pool)
                .await?)
        })
    }
}
