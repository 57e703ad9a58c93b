//! The outbox write path: one writer task owns one connection and commits the deliveries of
//! many concurrent requests per transaction (group commit), answering each only after the
//! commit, so every acknowledgement is durable without one fsync per delivery. When the
//! worker has nothing waiting, the writer applies the new deliveries in that same
//! transaction (the worker's own apply path), so an acknowledged opt-out is already in the
//! ledger; the worker keeps whatever could not be applied at once.
//!
//! One file over 400 lines on purpose: the writer's batch, its commit and the answers it
//! owes each request are one protocol, read in order.

use crate::model::AccountId;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::Utc;
use tokio::sync::{Notify, mpsc, oneshot};

use crate::apply::{self, Outcome, Pending, Settle};
use crate::events::{Event, ParseError};
use crate::model::Timestamp;
use crate::settings::Settings;
use crate::store::{IngestStore, Pool, WriterConnection};

/// Most deliveries committed in one transaction (one INSERT of 5 parameters a row, far under
/// SQLite's 32,766).
const MAX_BATCH: usize = 512;
/// Requests waiting for the writer before new ones are refused with 503.
const QUEUE_DEPTH: usize = 4096;
/// Pause after a failed commit, so a broken disk is not hammered in a tight loop.
const FAILURE_PAUSE: Duration = Duration::from_millis(200);
/// Refused deliveries the database keeps (the newest); the sample of refusals (`rejections`,
/// which hands them to the writer) keeps as many in memory.
pub const REJECTED_KEPT: usize = 20;

pub use crate::model::{Delivery, RejectedDelivery};

/// The outcome of a committed delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    /// A new outbox row.
    Accepted(i64),
    /// The same delivery was committed before, as this row.
    Duplicate(i64),
}

/// Why a delivery was not committed; the client may retry later.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    #[error("the database cannot commit")]
    Unavailable,
    #[error("the writer is saturated")]
    Saturated,
    #[error("the daemon is stopping")]
    Stopping,
}

/// Counters and signals shared by the writer, the ingest handler and the worker.
#[derive(Debug, Default)]
pub struct OutboxState {
    pending: AtomicU64,
    /// Woken after every commit that added rows, so the worker does not poll.
    pub committed: Notify,
}

impl OutboxState {
    /// Unapplied rows.
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// Called by whoever takes rows out of the pending state.
    pub fn settled(&self, rows: u64) {
        let _ = self
            .pending
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| {
                Some(p.saturating_sub(rows))
            });
    }

    /// Resets the count from the database (at start, and after a replay).
    pub fn set_pending(&self, rows: u64) {
        self.pending.store(rows, Ordering::Relaxed);
    }
}

/// One result per command of a batch (`None` for those that are not commits), and what
/// applying its new deliveries did.
type Written = (Vec<Option<Committed>>, Outcome);

enum Command {
    /// A delivery, its event as the request read it, and where to answer.
    Commit(
        Delivery,
        Box<Result<Event, ParseError>>,
        oneshot::Sender<Result<Committed, CommitError>>,
    ),
    /// A sample of refused deliveries to keep ([`crate::rejections`]).
    Reject(Vec<RejectedDelivery>),
    Probe(oneshot::Sender<bool>),
}

/// The handle requests use to reach the writer task.
#[derive(Clone)]
pub struct OutboxWriter {
    tx: mpsc::Sender<Command>,
    state: Arc<OutboxState>,
}

impl OutboxWriter {
    /// Starts the writer task on its own connection. It ends when every handle is dropped,
    /// after answering every request it took. What it applies at once it applies with
    /// `policy` and counts in `metrics`.
    pub async fn start(
        settings: &Settings,
        policy: apply::Policy,
        state: Arc<OutboxState>,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> anyhow::Result<(Self, tokio::task::JoinHandle<()>)> {
        let conn = WriterConnection::open(settings).await?;
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let task = Writer {
            settings: settings.clone(),
            policy,
            conn: Some(conn),
            state: state.clone(),
            metrics,
            last_id: None,
        };
        // Its own thread: on SQLite the batch's statements and its commit's flush run on it
        // (`store::sqlite::Embedded`), which no async worker may wait for; on PostgreSQL
        // its turns would otherwise queue behind request handling, lengthening every
        // commit cycle (which all acknowledgements wait for).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = tokio::task::spawn_blocking(move || runtime.block_on(task.run(rx)));
        Ok((Self { tx, state }, handle))
    }

    pub fn state(&self) -> &Arc<OutboxState> {
        &self.state
    }

    /// Commits `delivery`, whose body reads as `event` (applied with it when the worker
    /// has nothing waiting); returns only once it is durable (or refused).
    pub async fn commit(
        &self,
        delivery: Delivery,
        event: Result<Event, ParseError>,
    ) -> Result<Committed, CommitError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .try_send(Command::Commit(delivery, Box::new(event), reply))
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => CommitError::Saturated,
                mpsc::error::TrySendError::Closed(_) => CommitError::Stopping,
            })?;
        answer.await.map_err(|_| CommitError::Stopping)?
    }

    /// Keeps a sample of refused deliveries for diagnosis, if the writer has room; never
    /// waits.
    pub fn keep_rejected(&self, sample: Vec<RejectedDelivery>) {
        let _ = self.tx.try_send(Command::Reject(sample));
    }

    /// Whether the database takes a write now.
    pub async fn probe(&self) -> bool {
        let (reply, answer) = oneshot::channel();
        if self.tx.send(Command::Probe(reply)).await.is_err() {
            return false;
        }
        answer.await.unwrap_or(false)
    }
}

struct Writer {
    settings: Settings,
    policy: apply::Policy,
    conn: Option<WriterConnection>,
    state: Arc<OutboxState>,
    metrics: Arc<crate::metrics::Metrics>,
    /// The largest outbox id, once read (SQLite: this writer is the only one to add rows).
    last_id: Option<i64>,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
            let ok = self.commit_batch(&mut batch).await;
            batch.clear();
            if !ok {
                tokio::time::sleep(FAILURE_PAUSE).await;
            }
        }
        if let Some(conn) = self.conn.take() {
            conn.close().await;
        }
    }

    /// Commits one batch and answers every request in it; false if the commit failed.
    async fn commit_batch(&mut self, batch: &mut Vec<Command>) -> bool {
        let outcome = self.write(batch.as_mut_slice()).await;
        let ((results, applied), others) = match outcome {
            Ok(done) => done,
            Err(error) => {
                tracing::error!(error = %error, deliveries = batch.len(), "outbox commit failed; answering 503");
                self.fail();
                for command in batch.drain(..) {
                    match command {
                        Command::Commit(_, _, reply) => {
                            let _ = reply.send(Err(CommitError::Unavailable));
                        }
                        Command::Probe(reply) => {
                            let _ = reply.send(false);
                        }
                        Command::Reject(_) => {}
                    }
                }
                return false;
            }
        };
        let accepted = results
            .iter()
            .filter(|r| matches!(r, Some(Committed::Accepted(_))))
            .count();
        let left = (accepted as u64).saturating_sub(applied.settled());
        if left > 0 {
            self.state.pending.fetch_add(left, Ordering::Relaxed);
            self.state.committed.notify_one();
        }
        if !applied.is_idle() {
            applied.count_in(&self.metrics);
        }
        if let Err(error) = &others {
            tracing::error!(error = %error, "cannot record a refused delivery or the write probe");
            self.fail();
        }
        for (command, result) in batch.drain(..).zip(results) {
            match (command, result) {
                (Command::Commit(_, _, reply), Some(committed)) => {
                    let _ = reply.send(Ok(committed));
                }
                (Command::Probe(reply), _) => {
                    let _ = reply.send(others.is_ok());
                }
                _ => {}
            }
        }
        others.is_ok()
    }

    /// Writes the batch: its deliveries (on SQLite with their effects, when the worker has
    /// nothing waiting), then its refused deliveries and write probe. The outer error means
    /// the deliveries were not committed; the inner one, only the rest was not.
    async fn write(
        &mut self,
        batch: &mut [Command],
    ) -> Result<(Written, Result<(), crate::store::Error>), crate::store::Error> {
        let state = self.state.clone();
        let policy = self.policy.clone();
        let mut last_id = self.last_id;
        let conn = self.connection().await?;
        let single_writer = conn.single_writer();
        // Ingest's turn at the write gate: after the writer holding it, before the others
        // (`store::WriteGate`).
        let _turn = conn.first_turn().await;
        // With one writer and nothing left for the worker (it settles its rows before
        // letting go of the gate), applying the batch now keeps receipt order: one
        // transaction and one fsync for the deliveries and their effects, instead of the
        // worker reading them back. Replicas' workers apply: an ingest commit never waits
        // on their locks.
        let written = if single_writer && state.pending() == 0 {
            write_and_apply(conn, batch, &mut last_id, &policy).await?
        } else {
            (
                write_deliveries(conn, batch, &mut last_id, None).await?,
                Outcome::default(),
            )
        };
        let others = others(batch);
        let recorded = if others.rejected.is_empty() && !others.probe {
            Ok(())
        } else {
            conn.record_others(&others.rejected, REJECTED_KEPT as i64, others.probe)
                .await
        };
        self.last_id = last_id;
        Ok((written, recorded))
    }

    /// After a failure: the connection may be wedged (file replaced, disk gone, server
    /// restarted), so a new one is opened next time, and the largest id is read again.
    fn fail(&mut self) {
        self.conn = None;
        self.last_id = None;
    }

    async fn connection(&mut self) -> Result<&mut WriterConnection, crate::store::Error> {
        let conn = match self.conn.take() {
            Some(conn) => conn,
            None => WriterConnection::open(&self.settings).await?,
        };
        Ok(self.conn.insert(conn))
    }
}

/// Commits the batch's deliveries and applies the new ones in the same transaction, so they
/// are in the mirror and the ledger when they are acknowledged. Should applying fail (an
/// error of the database, not a bad event: those are quarantined as the worker would), the
/// deliveries are committed alone and left to the worker, which retries them. A database
/// that cannot take the deliveries at all (locked, full) fails the batch at once: trying
/// again without the apply would only wait for the same lock twice.
async fn write_and_apply(
    conn: &mut WriterConnection,
    batch: &mut [Command],
    last_id: &mut Option<i64>,
    policy: &apply::Policy,
) -> Result<(Vec<Option<Committed>>, Outcome), crate::store::Error> {
    let mut tentative = *last_id;
    let now = Utc::now();
    let mut tx = conn.begin_write().await?;
    // Inserted as applied: should applying fail, the transaction goes whole.
    let results = write_deliveries(&mut tx, batch, &mut tentative, Some(Timestamp(now))).await?;
    // The events are taken, not copied: nothing reads them after this transaction (should
    // applying fail, the worker reads the stored bytes again).
    let pending: Vec<Pending> = batch
        .iter_mut()
        .zip(&results)
        .filter_map(|(command, result)| match (command, result) {
            (Command::Commit(d, event, _), Some(Committed::Accepted(id))) => Some(Pending {
                id: *id,
                account: AccountId::stored(&d.account),
                dedup_key: d.dedup_key.clone(),
                received_at: d.received_at,
                event: std::mem::replace(&mut **event, Err(ParseError::Stored(String::new()))),
            }),
            _ => None,
        })
        .collect();
    match apply::deliveries(&mut tx, &pending, now, policy, Settle::Quarantined).await {
        Ok(applied) => {
            tx.commit().await?;
            if !applied.is_idle() {
                crate::signal::ledger_grew();
            }
            *last_id = tentative;
            Ok((results, applied))
        }
        Err(error) => {
            tracing::warn!(%error, "cannot apply deliveries as they are committed; the worker will");
            tx.rollback().await?;
            let results = write_deliveries(conn, batch, last_id, None).await?;
            Ok((results, Outcome::default()))
        }
    }
}

/// Writes the batch's deliveries (as applied at `applied_at`, when they are applied in the
/// same transaction); one result per command, in order.
async fn write_deliveries<C: IngestStore>(
    conn: &mut C,
    batch: &[Command],
    last_id: &mut Option<i64>,
    applied_at: Option<Timestamp>,
) -> Result<Vec<Option<Committed>>, crate::store::Error> {
    let ids = conn
        .insert_deliveries(&fresh(batch), last_id, applied_at)
        .await?;
    results(batch, &ids)
}

/// The first delivery of each key in the batch: later ones are duplicates of it.
fn fresh(batch: &[Command]) -> Vec<&Delivery> {
    let mut first: HashSet<(&str, &str)> = HashSet::new();
    batch
        .iter()
        .filter_map(|command| match command {
            Command::Commit(d, _, _) if first.insert((&d.account, &d.dedup_key)) => Some(d),
            _ => None,
        })
        .collect()
}

/// One result per command, in order (`None` for the commands that are not commits), from
/// each key's row and whether the INSERT added it.
fn results(
    batch: &[Command],
    ids: &HashMap<crate::store::OutboxKey, (i64, bool)>,
) -> Result<Vec<Option<Committed>>, crate::store::Error> {
    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    // Looked up by reference: no key copied per delivery.
    let ids: HashMap<(&str, &str), (i64, bool)> = ids
        .iter()
        .map(|((account, key), row)| ((account.as_str(), key.as_str()), *row))
        .collect();
    batch
        .iter()
        .map(|command| match command {
            Command::Commit(d, _, _) => {
                let key = (d.account.as_str(), d.dedup_key.as_str());
                let (id, new) = ids.get(&key).copied().ok_or_else(|| {
                    crate::store::Error::OutboxRowMissing {
                        key: d.dedup_key.clone(),
                    }
                })?;
                let first_here = seen.insert((&d.account, &d.dedup_key));
                Ok(Some(if new && first_here {
                    Committed::Accepted(id)
                } else {
                    Committed::Duplicate(id)
                }))
            }
            _ => Ok(None),
        })
        .collect()
}

/// The batch's refused deliveries and whether it probes the database.
struct Others<'a> {
    rejected: Vec<&'a RejectedDelivery>,
    probe: bool,
}

fn others(batch: &[Command]) -> Others<'_> {
    Others {
        rejected: batch
            .iter()
            .filter_map(|c| match c {
                Command::Reject(sample) => Some(sample),
                _ => None,
            })
            .flatten()
            .collect(),
        probe: batch.iter().any(|c| matches!(c, Command::Probe(_))),
    }
}

/// Unapplied rows in the outbox.
pub async fn count_pending(pool: &Pool) -> Result<u64, crate::store::Error> {
    let backlog = crate::store::ReadStore::backlog(pool).await?;
    Ok(u64::try_from(backlog.pending).unwrap_or(0))
}
