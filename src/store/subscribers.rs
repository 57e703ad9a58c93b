//! Subscribers' delivery state: one text for both backends (`$N` parameters: SQLite takes
//! them too; times are Unix milliseconds from the caller).
//!
//! Every write but [`replay`](SubscriberStore::replay_subscriber) names the `generation` it
//! was decided under, so an attempt that began before a replay cannot move the rewound
//! cursor.

use super::Error;
use super::backend::on_backend;
use super::{Pool, SubscriberStore};
use crate::model::{AckSpan, SubscriberState};

impl SubscriberStore for Pool {
    async fn ensure_subscribers(&self, starts: &[(&str, i64)]) -> Result<(), Error> {
        on_backend!(self, |pool| {
            for (name, cursor) in starts {
                sqlx::query(
                    "INSERT INTO subscribers (name, cursor) VALUES ($1, $2)
                         ON CONFLICT (name) DO NOTHING",
                )
                .bind(name)
                .bind(cursor)
                .execute(pool)
                .await?;
            }
            Ok(())
        })
    }

    async fn subscriber_state(&self, name: &str) -> Result<Option<SubscriberState>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT name, cursor, generation, disabled, failures, next_attempt_ms,
                        last_error, last_success_ms, refill_until, refill_reason
                 FROM subscribers WHERE name = $1",
            )
            .bind(name)
            .fetch_optional(pool)
            .await?)
        })
    }

    async fn subscriber_delivered(
        &self,
        name: &str,
        generation: i64,
        cursor: i64,
        delivered_ms: Option<i64>,
        acks: &[AckSpan],
    ) -> Result<(), Error> {
        on_backend!(self, |pool| {
            // The acknowledgements and the cursor in one transaction: one commit (on SQLite
            // one turn of the write lock) however many requests it keeps.
            let mut tx = pool.begin().await?;
            for ack in acks {
                sqlx::query(
                    "INSERT INTO subscriber_acks (subscriber, first_seq, last_seq, acked_at)
                     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                )
                .bind(name)
                .bind(ack.first_seq)
                .bind(ack.last_seq)
                .bind(ack.acked_at)
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query(
                "UPDATE subscribers SET cursor = $3, failures = 0, next_attempt_ms = NULL,
                     last_error = NULL, last_success_ms = COALESCE($4, last_success_ms)
                 WHERE name = $1 AND generation = $2 AND cursor < $3",
            )
            .bind(name)
            .bind(generation)
            .bind(cursor)
            .bind(delivered_ms)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    async fn ack_spans(
        &self,
        name: &str,
        first_seq: i64,
        last_seq: i64,
    ) -> Result<Vec<AckSpan>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT first_seq, last_seq, acked_at FROM subscriber_acks
                 WHERE subscriber = $1 AND last_seq >= $2 AND first_seq <= $3
                 ORDER BY first_seq, last_seq",
            )
            .bind(name)
            .bind(first_seq)
            .bind(last_seq)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn subscriber_failed(
        &self,
        name: &str,
        generation: i64,
        error: &str,
        next_attempt_ms: i64,
    ) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query(
                "UPDATE subscribers SET failures = failures + 1, last_error = $3,
                     next_attempt_ms = $4
                 WHERE name = $1 AND generation = $2",
            )
            .bind(name)
            .bind(generation)
            .bind(error)
            .bind(next_attempt_ms)
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn disable_subscriber(
        &self,
        name: &str,
        generation: i64,
        error: &str,
    ) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query(
                "UPDATE subscribers SET disabled = TRUE, last_error = $3, next_attempt_ms = NULL
                 WHERE name = $1 AND generation = $2",
            )
            .bind(name)
            .bind(generation)
            .bind(error)
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn replay_subscriber(&self, name: &str, cursor: i64) -> Result<bool, Error> {
        on_backend!(self, |pool| {
            let replayed = sqlx::query(
                "UPDATE subscribers SET cursor = $2, generation = generation + 1,
                     disabled = FALSE, failures = 0, next_attempt_ms = NULL, last_error = NULL
                 WHERE name = $1",
            )
            .bind(name)
            .bind(cursor)
            .execute(pool)
            .await?;
            Ok(replayed.rows_affected() == 1)
        })
    }

    async fn retry_subscriber(&self, name: &str) -> Result<bool, Error> {
        on_backend!(self, |pool| {
            let due = sqlx::query("UPDATE subscribers SET next_attempt_ms = NULL WHERE name = $1")
                .bind(name)
                .execute(pool)
                .await?;
            Ok(due.rows_affected() == 1)
        })
    }

    async fn ledger_head(&self) -> Result<i64, Error> {
        on_backend!(self, |pool| {
            Ok(
                sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM ledger")
                    .fetch_one(pool)
                    .await?,
            )
        })
    }
}
