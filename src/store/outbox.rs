//! Outbox statements with one text for both backends (`$N` parameters: SQLite takes them
//! too); what differs, claiming rows and counting states, is in each backend's `outbox`.

/// The shared outbox statements for the pool type `$pool`.
macro_rules! statements {
    ($pool:ty) => {
        impl $crate::store::OutboxStore for $pool {
        async fn record_failure(&self, id: i64,
            error: &str,
            max_attempts: i64,
        ) -> Result<Option<i64>, crate::store::Error> {
            Ok(sqlx::query_scalar(
                "UPDATE outbox SET attempts = attempts + 1, last_error = $2,
                     state = CASE WHEN attempts + 1 >= $3 THEN 'quarantined' ELSE state END
                 WHERE id = $1 AND state = 'pending'
                 RETURNING CASE WHEN state = 'quarantined' THEN id END",
            )
            .bind(id)
            .bind(error)
            .bind(max_attempts)
            .fetch_optional(self)
            .await?
            .flatten())
        }

        async fn requeue(&self, selection: crate::model::Requeue,
        ) -> Result<Vec<i64>, crate::store::Error> {
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
            Ok(query.fetch_all(self).await?)
        }
        }

    };
}

pub(crate) use statements;
