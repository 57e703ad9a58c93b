//! Retention statements with one text for both backends (`$N` parameters, times bound as
//! [`Timestamp`](crate::model::Timestamp)); what differs is in each backend's `retention`,
//! side by side: deleting finished messages (SQLite's partial indexes are on
//! `terminal = 1`, PostgreSQL's take `FOR UPDATE SKIP LOCKED`), how a list of ids is
//! bound, and what frees the space (SQLite's incremental vacuum).

use super::Error;
use super::backend::on_backend;
use super::{Pool, RetentionStore};
use chrono::{DateTime, Utc};

impl RetentionStore for Pool {
    async fn scan_outbox(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::OutboxHead>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT id, received_at, state, body FROM outbox WHERE id > $1 ORDER BY id
                         LIMIT $2",
            )
            .bind(after)
            .bind(limit)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn delete_acks_before(&self, before: DateTime<Utc>) -> Result<u64, Error> {
        on_backend!(self, |pool| {
            let before = crate::model::Timestamp(before);
            let acks = sqlx::query("DELETE FROM subscriber_acks WHERE acked_at < $1")
                .bind(before)
                .execute(pool)
                .await?
                .rows_affected();
            // A destination's finished entries: behind its cursor long since.
            let outcomes = sqlx::query(
                "DELETE FROM destination_outcomes WHERE at < $1 AND outcome IS NOT NULL",
            )
            .bind(before)
            .execute(pool)
            .await?
            .rows_affected();
            Ok(acks + outcomes)
        })
    }

    async fn delete_source_records_before(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query(
                "DELETE FROM source_records WHERE (source, record) IN
                     (SELECT source, record FROM source_records WHERE at < $1 ORDER BY at
                          LIMIT $2)",
            )
            .bind(crate::model::Timestamp(before))
            .bind(limit)
            .execute(pool)
            .await?
            .rows_affected())
        })
    }

    async fn delete_decided_replies_before(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query(
                "DELETE FROM review_replies WHERE id IN
                     (SELECT id FROM review_replies
                          WHERE decision IS NOT NULL AND decided_at < $1 ORDER BY id LIMIT $2)",
            )
            .bind(crate::model::Timestamp(before))
            .bind(limit)
            .execute(pool)
            .await?
            .rows_affected())
        })
    }

    async fn delete_applied(&self, ids: &[i64]) -> Result<u64, Error> {
        on_backend!(self, |pool, dialect| {
            if ids.is_empty() {
                return Ok(0);
            }
            let done = sqlx::query(dialect::retention::DELETE_APPLIED)
                .bind(dialect::list(ids)?)
                .execute(pool)
                .await?;
            Ok(done.rows_affected())
        })
    }

    async fn count_finished_messages(&self, before: DateTime<Utc>) -> Result<u64, Error> {
        on_backend!(self, |pool, dialect| {
            let count: i64 = sqlx::query_scalar(&format!(
                "SELECT COUNT(*) FROM messages WHERE {} AND status_at < $1",
                dialect::TERMINAL
            ))
            .bind(crate::model::Timestamp(before))
            .fetch_one(pool)
            .await?;
            Ok(u64::try_from(count).unwrap_or(0))
        })
    }

    async fn delete_finished_messages(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64, Error> {
        on_backend!(self, |pool, dialect| {
            let done = sqlx::query(dialect::retention::DELETE_FINISHED)
                .bind(crate::model::Timestamp(before))
                .bind(limit)
                .execute(pool)
                .await?;
            Ok(done.rows_affected())
        })
    }

    async fn free_pages(&self) -> Result<i64, Error> {
        on_backend!(self, |pool, dialect| {
            dialect::retention::free_pages(pool).await
        })
    }

    async fn vacuum_step(&self, pages: i64) -> Result<i64, Error> {
        on_backend!(self, |pool, dialect| {
            dialect::retention::vacuum_step(pool, pages).await
        })
    }
}
