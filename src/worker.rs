//! The worker: applies outbox rows in receipt order, each batch in one transaction that also
//! marks its rows applied (or quarantined), so a crash at any instant neither loses nor
//! repeats an effect.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Connection, SqlitePool};
use tokio_util::sync::CancellationToken;

use crate::apply::{self, Pending};
use crate::db;
use crate::events;
use crate::outbox::OutboxState;

/// Rows applied per transaction under load.
pub const BATCH: i64 = 1000;
/// Attempts before a row that keeps failing is quarantined.
pub const MAX_ATTEMPTS: i64 = 5;
/// Longest wait between looks at the outbox when nobody wakes the worker (rows written
/// by another process, e.g. `replay`).
const IDLE_POLL: Duration = Duration::from_secs(5);
/// How long the worker lets new deliveries gather after being woken.
const APPLY_COALESCE: Duration = Duration::from_millis(20);
/// First pause after a failed batch; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub use crate::apply::Outcome;

/// Applies the outbox.
#[derive(Clone)]
pub struct Worker {
    pool: SqlitePool,
    state: Arc<OutboxState>,
    account_sync: bool,
}

impl Worker {
    pub fn new(pool: SqlitePool, state: Arc<OutboxState>, account_sync: bool) -> Self {
        Self {
            pool,
            state,
            account_sync,
        }
    }

    /// Applies at most `limit` pending rows in one transaction.
    pub async fn try_execute_task(&self, limit: i64) -> Result<Outcome, sqlx::Error> {
        let _gate = self.state.write_gate.lock().await;
        let mut conn = self.pool.acquire().await?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        // One row for the whole batch (bodies in hex: any bytes survive), as a row each
        // would cost a hand-over between SQLite's thread and this task.
        let mut rows: Vec<(i64, String, String, String)> = db::json_rows(
            &mut tx,
            "SELECT json_group_array(json_array(id, dedup_key, received_at, hex(body)))
             FROM (SELECT id, dedup_key, received_at, body FROM outbox
                   WHERE state = 'pending' ORDER BY id LIMIT ?)",
            limit,
        )
        .await?;
        rows.sort_unstable_by_key(|(id, ..)| *id);
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(Outcome::default());
        }
        let now = Utc::now();
        let pending: Vec<Pending> = rows
            .into_iter()
            .map(|(id, dedup_key, received_at, body)| {
                let received_at = DateTime::parse_from_rfc3339(&received_at)
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or(now);
                let event = match hex::decode(&body) {
                    Ok(body) => events::parse(&body, received_at),
                    Err(e) => Err(events::ParseError::Stored(e.to_string())),
                };
                Pending {
                    id,
                    dedup_key,
                    event,
                }
            })
            .collect();
        let outcome = apply::deliveries(&mut *tx, &pending, now, self.account_sync).await?;
        tx.commit().await?;
        self.state.settled(outcome.applied + outcome.quarantined);
        crate::metrics::global().applied(outcome.applied, outcome.quarantined);
        tracing::debug!(
            applied = outcome.applied,
            quarantined = outcome.quarantined,
            "batch applied"
        );
        Ok(outcome)
    }

    /// Applies until the outbox is empty; for tests, `replay` and benchmarks.
    pub async fn drain(&self) -> Result<Outcome, sqlx::Error> {
        let mut total = Outcome::default();
        loop {
            let outcome = self.try_execute_task(BATCH).await?;
            if outcome.is_idle() {
                return Ok(total);
            }
            total.applied += outcome.applied;
            total.quarantined += outcome.quarantined;
        }
    }

    /// Runs until `shutdown`, woken by every commit of the ingest writer. A failing batch is
    /// retried alone row by row, and a row failing [`MAX_ATTEMPTS`] times is quarantined.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut backoff = FIRST_BACKOFF;
        let mut limit = BATCH;
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            match self.try_execute_task(limit).await {
                Ok(outcome) if outcome.is_idle() => {
                    backoff = FIRST_BACKOFF;
                    limit = BATCH;
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = self.state.committed.notified() => {
                            // Let a burst gather: one transaction (and one fsync) for many
                            // deliveries instead of one per ingest commit.
                            tokio::time::sleep(APPLY_COALESCE).await;
                        }
                        _ = tokio::time::sleep(IDLE_POLL) => {}
                    }
                }
                Ok(outcome) => {
                    backoff = FIRST_BACKOFF;
                    limit = BATCH;
                    if outcome.applied + outcome.quarantined < BATCH as u64 {
                        // Caught up: let the next deliveries gather rather than take the
                        // write lock (and an fsync) for each ingest commit.
                        tokio::select! {
                            _ = shutdown.cancelled() => break,
                            _ = tokio::time::sleep(APPLY_COALESCE) => {}
                        }
                    }
                }
                Err(error) => {
                    tracing::error!(error = %error, batch = limit, "applying the outbox failed; backing off");
                    crate::ledger::note_error(&self.pool, &format!("worker: {error}")).await;
                    if limit == 1
                        && let Err(e) = self.record_failure(&error.to_string()).await
                    {
                        tracing::error!(error = %e, "cannot record the failed attempt");
                    }
                    // Isolate the row at fault before the next attempt.
                    limit = 1;
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        tracing::info!("worker stopped");
    }

    async fn record_failure(&self, error: &str) -> Result<(), sqlx::Error> {
        let quarantined: Option<i64> = sqlx::query_scalar(
            "UPDATE outbox SET attempts = attempts + 1, last_error = ?1,
                 state = CASE WHEN attempts + 1 >= ?2 THEN 'quarantined' ELSE state END
             WHERE id = (SELECT MIN(id) FROM outbox WHERE state = 'pending')
             RETURNING CASE WHEN state = 'quarantined' THEN id END",
        )
        .bind(error)
        .bind(MAX_ATTEMPTS)
        .fetch_optional(&self.pool)
        .await?
        .flatten();
        if let Some(id) = quarantined {
            tracing::warn!(
                outbox_id = id,
                "delivery quarantined after {MAX_ATTEMPTS} failed attempts"
            );
            self.state.settled(1);
        }
        Ok(())
    }
}

/// Puts rows back in the pending state so the worker applies them again.
pub async fn requeue(pool: &SqlitePool, selection: Requeue) -> Result<u64, sqlx::Error> {
    let done = match selection {
        Requeue::Quarantined => {
            sqlx::query(
                "UPDATE outbox SET state = 'pending', attempts = 0 WHERE state = 'quarantined'",
            )
            .execute(pool)
            .await?
        }
        Requeue::Id(id) => {
            sqlx::query("UPDATE outbox SET state = 'pending', attempts = 0 WHERE id = ?")
                .bind(id)
                .execute(pool)
                .await?
        }
    };
    Ok(done.rows_affected())
}

/// Which rows `replay` re-runs.
#[derive(Debug, Clone, Copy)]
pub enum Requeue {
    Quarantined,
    Id(i64),
}
