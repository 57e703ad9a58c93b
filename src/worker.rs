//! The worker: applies outbox rows in receipt order, each batch in one transaction that also
//! marks its rows applied (or quarantined), so a crash at any instant neither loses nor
//! repeats an effect.

use crate::model::AccountId;
use crate::store::{OutboxCounts, OutboxStore};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::apply::{self, Pending};
use crate::events;
use crate::metrics::Metrics;
use crate::model::StoredDelivery;
pub use crate::model::{OutboxStates, Requeue};
use crate::outbox::OutboxState;
use crate::store::{ApplyTx, Pool};

/// Rows applied per transaction under load.
pub const BATCH: i64 = 1000;
/// Attempts before a row that keeps failing is quarantined.
pub const MAX_ATTEMPTS: i64 = 5;
/// Longest wait between looks at the outbox when nobody wakes the worker (rows written
/// by another process, e.g. `replay`).
const IDLE_POLL: Duration = Duration::from_secs(5);
/// How long the worker lets new deliveries gather after being woken.
const APPLY_COALESCE: Duration = Duration::from_millis(20);
/// Apply loops a process runs on PostgreSQL: while one waits on the server, another parses
/// its batch (`cargo bench --bench apply`: 1 loop 15,100 events/s, 2 19,100, 3 20,200).
/// Their batches are disjoint (`FOR UPDATE SKIP LOCKED`), as those of several replicas are.
/// SQLite lets one writer in at a time: one loop.
const POSTGRES_LOOPS: usize = 3;
/// First pause after a failed batch; doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub use crate::apply::Outcome;

/// Applies the outbox.
#[derive(Clone)]
pub struct Worker {
    pool: Pool,
    state: Arc<OutboxState>,
    policy: apply::Policy,
    /// Where each committed batch is counted.
    metrics: Arc<Metrics>,
}

impl Worker {
    pub fn new(pool: impl Into<Pool>, state: Arc<OutboxState>, account_sync: bool) -> Self {
        Self {
            pool: pool.into(),
            state,
            policy: apply::Policy {
                account_sync,
                ..apply::Policy::default()
            },
            metrics: Arc::default(),
        }
    }

    /// Counts the batches it applies in `metrics` (the daemon's; by default a registry of
    /// the worker's own, which no scrape shows).
    pub fn counted_in(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Applies with `policy` (account sync, the confirmation window).
    pub fn with_policy(mut self, policy: apply::Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Applies at most `limit` pending rows in one transaction.
    pub async fn try_execute_task(&self, limit: i64) -> Result<Outcome, crate::store::Error> {
        self.attempt(limit, &mut Vec::new()).await
    }

    /// [`Worker::try_execute_task`], telling in `claimed` which rows the batch took (none
    /// when it failed before taking any), so that a failure is counted against its row.
    #[tracing::instrument(name = "apply_batch", skip_all, fields(limit = limit, rows = tracing::field::Empty))]
    async fn attempt(
        &self,
        limit: i64,
        claimed: &mut Vec<i64>,
    ) -> Result<Outcome, crate::store::Error> {
        claimed.clear();
        let now = Utc::now();
        let outcome = {
            // The connection first, then the turn at the write gate (`store::WriteGate`).
            let mut tx = self.pool.begin_write().await?;
            let rows = tx.claim_pending(limit, now).await?;
            claimed.extend(rows.iter().map(|row| row.id));
            tracing::Span::current().record("rows", rows.len());
            let outcome = self.apply(&mut tx, rows, now).await?;
            tx.commit().await?;
            outcome
        };
        if outcome.is_idle() {
            return Ok(outcome);
        }
        crate::signal::ledger_grew();
        self.state.settled(outcome.settled());
        outcome.count_in(&self.metrics);
        tracing::debug!(
            applied = outcome.applied,
            quarantined = outcome.quarantined,
            "batch applied"
        );
        Ok(outcome)
    }

    /// Parses and applies `rows` in the caller's transaction.
    async fn apply<T: ApplyTx + crate::store::SourceTx + ?Sized>(
        &self,
        tx: &mut T,
        rows: Vec<StoredDelivery>,
        now: DateTime<Utc>,
    ) -> Result<Outcome, crate::store::Error> {
        let pending: Vec<Pending> = rows
            .into_iter()
            .map(|row| Pending {
                event: events::parse_stored(
                    &row.dedup_key,
                    &row.body,
                    row.received_at,
                    (self.policy.sources.region, &|name| {
                        self.policy.sources.reader(name)
                    }),
                ),
                id: row.id,
                account: AccountId::stored(&row.account_id),
                dedup_key: row.dedup_key,
                received_at: row.received_at,
            })
            .collect();
        apply::deliveries(tx, &pending, now, &self.policy, apply::Settle::All).await
    }

    /// Apply loops run at once (see [`POSTGRES_LOOPS`]).
    fn loops(&self) -> usize {
        match self.pool.single_writer() {
            true => 1,
            false => POSTGRES_LOOPS,
        }
    }

    /// Applies until the outbox is empty, with as many loops as [`Worker::run`]; for tests,
    /// `replay` and benchmarks.
    pub async fn drain(&self) -> Result<Outcome, crate::store::Error> {
        let loops = (0..self.loops()).map(|_| self.drain_in_order());
        let mut total = Outcome::default();
        for outcome in futures::future::try_join_all(loops).await? {
            total.applied += outcome.applied;
            total.quarantined += outcome.quarantined;
        }
        Ok(total)
    }

    /// Applies until the outbox is empty with one loop, batch after batch in id order, as
    /// on SQLite. The loops of [`Worker::drain`] on PostgreSQL may split a batch, and commit
    /// order then decides the seqs: this is for comparisons that need the same seqs.
    pub async fn drain_in_order(&self) -> Result<Outcome, crate::store::Error> {
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
        futures::future::join_all((0..self.loops()).map(|_| self.run_loop(&shutdown))).await;
        tracing::info!("worker stopped");
    }

    async fn run_loop(&self, shutdown: &CancellationToken) {
        let mut backoff = FIRST_BACKOFF;
        let mut limit = BATCH;
        let mut claimed = Vec::new();
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            match self.attempt(limit, &mut claimed).await {
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
                    self.pool.note_error(&format!("worker: {error}")).await;
                    // Alone, the row failed by itself: the attempt counts against it (another
                    // loop or replica may be failing on another row at the same time).
                    if let (1, &[id]) = (limit, claimed.as_slice())
                        && let Err(e) = self.record_failure(id, &error.to_string()).await
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
    }

    async fn record_failure(&self, id: i64, error: &str) -> Result<(), crate::store::Error> {
        let quarantined = self.pool.record_failure(id, error, MAX_ATTEMPTS).await?;
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

/// Puts rows back in the pending state so a worker applies them again; returns their ids.
pub async fn requeue(
    pool: impl Into<Pool>,
    selection: Requeue,
) -> Result<Vec<i64>, crate::store::Error> {
    (pool.into()).requeue(selection).await
}

/// How the outbox rows `ids` stand now.
pub async fn states(
    pool: impl Into<Pool>,
    ids: &[i64],
) -> Result<OutboxStates, crate::store::Error> {
    (pool.into()).outbox_states(ids).await
}

/// How the outbox rows `ids` stand once no worker holds them pending (any replica's worker
/// may be applying them), or after `within` at the latest.
pub async fn settled(
    pool: impl Into<Pool>,
    ids: &[i64],
    within: Duration,
) -> Result<OutboxStates, crate::store::Error> {
    let pool = pool.into();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let states = states(&pool, ids).await?;
        if states.pending == 0 || tokio::time::Instant::now() >= deadline {
            return Ok(states);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
