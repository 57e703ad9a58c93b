//! The outbox write path: one writer task owns one connection and commits the deliveries of
//! many concurrent requests per transaction (group commit), answering each only after the
//! commit, so every acknowledgement is durable without one fsync per delivery. When the
//! worker has nothing waiting, the writer applies the new deliveries in that same
//! transaction (the worker's own apply path), so an acknowledged opt-out is already in the
//! ledger; the worker keeps whatever could not be applied at once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use sqlx::{Connection, SqliteConnection};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::apply::{self, Outcome, Pending};
use crate::db;
use crate::events;
use crate::settings::Settings;

/// Most deliveries committed in one transaction (one INSERT of 5 parameters a row, far under
/// SQLite's 32,766).
const MAX_BATCH: usize = 512;
/// Requests waiting for the writer before new ones are refused with 503.
const QUEUE_DEPTH: usize = 4096;
/// Pause after a failed commit, so a broken disk is not hammered in a tight loop.
const FAILURE_PAUSE: Duration = Duration::from_millis(200);
/// Rejected deliveries kept for `webhooks diagnose`.
pub const REJECTED_KEPT: i64 = 100;

/// A verified delivery, ready to be committed.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub dedup_key: String,
    pub received_at: DateTime<Utc>,
    pub body: Bytes,
    /// JSON object of the headers kept with the delivery.
    pub headers: String,
    pub secret_index: usize,
}

/// A delivery that failed verification, kept for diagnosis.
#[derive(Debug, Clone)]
pub struct RejectedDelivery {
    pub received_at: DateTime<Utc>,
    pub reason: String,
    /// JSON array of `[name, value]`.
    pub headers: String,
    pub body: Bytes,
}

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
    /// Taken by the writer and the worker around their transactions. SQLite lets one
    /// writer in at a time and makes the others poll with growing sleeps; queueing here
    /// instead hands the lock over the moment it is free.
    pub write_gate: tokio::sync::Mutex<()>,
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

enum Command {
    Commit(Delivery, oneshot::Sender<Result<Committed, CommitError>>),
    Reject(RejectedDelivery),
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
    /// after answering every request it took.
    pub async fn start(
        settings: &Settings,
        state: Arc<OutboxState>,
    ) -> anyhow::Result<(Self, tokio::task::JoinHandle<()>)> {
        let conn = db::connection(settings).await?;
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let task = Writer {
            settings: settings.clone(),
            conn: Some(conn),
            state: state.clone(),
            last_id: None,
        };
        // Its own thread: between its statements the writer waits on SQLite's thread, and
        // each of its turns would otherwise queue behind request handling, lengthening
        // every commit cycle (which all acknowledgements wait for).
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = tokio::task::spawn_blocking(move || runtime.block_on(task.run(rx)));
        Ok((Self { tx, state }, handle))
    }

    pub fn state(&self) -> &Arc<OutboxState> {
        &self.state
    }

    /// Commits `delivery`; returns only once it is durable (or refused).
    pub async fn commit(&self, delivery: Delivery) -> Result<Committed, CommitError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .try_send(Command::Commit(delivery, reply))
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => CommitError::Saturated,
                mpsc::error::TrySendError::Closed(_) => CommitError::Stopping,
            })?;
        answer.await.map_err(|_| CommitError::Stopping)?
    }

    /// Keeps a rejected delivery for diagnosis, if the writer has room; never waits.
    pub fn record_rejected(&self, rejected: RejectedDelivery) {
        let _ = self.tx.try_send(Command::Reject(rejected));
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
    conn: Option<SqliteConnection>,
    state: Arc<OutboxState>,
    /// The largest outbox id, once read: this writer is the only one to add rows.
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
            let _ = conn.close().await;
        }
    }

    /// Commits one batch and answers every request in it; false if the commit failed.
    async fn commit_batch(&mut self, batch: &mut Vec<Command>) -> bool {
        let state = self.state.clone();
        let _gate = state.write_gate.lock().await;
        // With nothing left for the worker (it settles its rows before letting go of the
        // gate), applying the batch now keeps receipt order: one transaction and one fsync
        // for the deliveries and their effects, instead of the worker reading them back.
        let apply_now = state.pending() == 0;
        let account_sync = self.settings.consent.account_sync;
        let mut last_id = self.last_id;
        let outcome = match self.connection().await {
            Ok(conn) => {
                let written = match apply_now {
                    true => write_and_apply(conn, batch, &mut last_id, account_sync).await,
                    false => write_deliveries(conn, batch, &mut last_id)
                        .await
                        .map(|results| (results, Outcome::default())),
                };
                match written {
                    Ok(written) => Ok((written, write_others(conn, batch).await)),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        self.last_id = last_id;
        let ((results, applied), others) = match outcome {
            Ok(done) => done,
            Err(error) => {
                tracing::error!(error = %error, deliveries = batch.len(), "outbox commit failed; answering 503");
                self.fail();
                for command in batch.drain(..) {
                    match command {
                        Command::Commit(_, reply) => {
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
        let left = (accepted as u64).saturating_sub(applied.applied + applied.quarantined);
        if left > 0 {
            self.state.pending.fetch_add(left, Ordering::Relaxed);
            self.state.committed.notify_one();
        }
        if !applied.is_idle() {
            crate::metrics::global().applied(applied.applied, applied.quarantined);
        }
        if let Err(error) = &others {
            tracing::error!(error = %error, "cannot record a refused delivery or the write probe");
            self.fail();
        }
        for (command, result) in batch.drain(..).zip(results) {
            match (command, result) {
                (Command::Commit(_, reply), Some(committed)) => {
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

    /// After a failure: the connection may be wedged (file replaced, disk gone), so a new
    /// one is opened next time, and the largest id is read again.
    fn fail(&mut self) {
        self.conn = None;
        self.last_id = None;
    }

    async fn connection(&mut self) -> Result<&mut SqliteConnection, sqlx::Error> {
        if self.conn.is_none() {
            let conn = db::connection(&self.settings)
                .await
                .map_err(|e| sqlx::Error::Protocol(e.to_string()))?;
            self.conn = Some(conn);
        }
        self.conn
            .as_mut()
            .ok_or_else(|| sqlx::Error::Protocol("no connection".into()))
    }
}

/// Commits the batch's deliveries and applies the new ones in the same transaction, so they
/// are in the mirror and the ledger when they are acknowledged. Should applying fail (an
/// error of the database, not a bad event: those are quarantined as the worker would), the
/// deliveries are committed alone and left to the worker, which retries them.
async fn write_and_apply(
    conn: &mut SqliteConnection,
    batch: &[Command],
    last_id: &mut Option<i64>,
    account_sync: bool,
) -> Result<(Vec<Option<Committed>>, Outcome), sqlx::Error> {
    let mut tentative = *last_id;
    let attempt = async {
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        let results = write_deliveries(&mut tx, batch, &mut tentative).await?;
        let pending: Vec<Pending> = batch
            .iter()
            .zip(&results)
            .filter_map(|(command, result)| match (command, result) {
                (Command::Commit(d, _), Some(Committed::Accepted(id))) => Some(Pending {
                    id: *id,
                    dedup_key: d.dedup_key.clone(),
                    event: events::parse(&d.body, d.received_at),
                }),
                _ => None,
            })
            .collect();
        let applied = apply::deliveries(&mut *tx, &pending, Utc::now(), account_sync).await?;
        tx.commit().await?;
        Ok::<_, sqlx::Error>((results, applied))
    }
    .await;
    match attempt {
        Ok(done) => {
            *last_id = tentative;
            Ok(done)
        }
        Err(error) => {
            tracing::warn!(%error, "cannot apply deliveries as they are committed; the worker will");
            let results = write_deliveries(conn, batch, last_id).await?;
            Ok((results, Outcome::default()))
        }
    }
}

/// Writes the batch's deliveries with one multi-row INSERT: inside the caller's
/// transaction, or alone in autocommit, where one statement is one transaction (one
/// hand-over to the database thread instead of the four of an explicit one). One result
/// per command, in order (`None` for the others).
///
/// The ids of new rows follow from the statement's outcome ([`db::consecutive_rowids`]).
/// When some keys were already present, the batch's keys are looked up in one row, and
/// those above `last_id` (the largest id before the statement) are the new ones.
async fn write_deliveries(
    conn: &mut SqliteConnection,
    batch: &[Command],
    last_id: &mut Option<i64>,
) -> Result<Vec<Option<Committed>>, sqlx::Error> {
    // First occurrence of each key in the batch: later ones are duplicates of it.
    let mut first: HashSet<&str> = HashSet::new();
    let fresh: Vec<&Delivery> = batch
        .iter()
        .filter_map(|command| match command {
            Command::Commit(d, _) if first.insert(d.dedup_key.as_str()) => Some(d),
            _ => None,
        })
        .collect();
    let mut ids: HashMap<&str, (i64, bool)> = HashMap::with_capacity(fresh.len());
    if !fresh.is_empty() {
        let before = match *last_id {
            Some(id) => id,
            None => {
                sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM outbox")
                    .fetch_one(&mut *conn)
                    .await?
            }
        };
        let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index) ",
        );
        insert.push_values(&fresh, |mut row, d| {
            row.push_bind(&d.dedup_key)
                .push_bind(db::timestamp(d.received_at))
                .push_bind(d.body.as_ref())
                .push_bind(&d.headers)
                .push_bind(i64::try_from(d.secret_index).unwrap_or(i64::MAX));
        });
        insert.push(" ON CONFLICT (dedup_key) DO NOTHING");
        let done = insert.build().execute(&mut *conn).await?;
        let added = done.rows_affected();
        *last_id = Some(if added > 0 {
            done.last_insert_rowid()
        } else {
            before
        });
        if let Some(range) = db::consecutive_rowids(&done, fresh.len()) {
            ids.extend(
                range
                    .zip(&fresh)
                    .map(|(id, d)| (d.dedup_key.as_str(), (id, true))),
            );
        } else {
            let keys: Vec<&str> = fresh.iter().map(|d| d.dedup_key.as_str()).collect();
            let rows: Vec<(i64, String)> = db::json_rows(
                conn,
                "SELECT json_group_array(json_array(id, dedup_key)) FROM outbox
                 WHERE dedup_key IN (SELECT value FROM json_each(?))",
                db::json_param(&keys)?,
            )
            .await?;
            let found: HashMap<String, i64> = rows.into_iter().map(|(id, k)| (k, id)).collect();
            for key in keys {
                if let Some(&id) = found.get(key) {
                    ids.insert(key, (id, id > before));
                }
            }
        }
    }
    let mut seen: HashSet<&str> = HashSet::new();
    batch
        .iter()
        .map(|command| match command {
            Command::Commit(d, _) => {
                let key = d.dedup_key.as_str();
                let (id, new) = ids
                    .get(key)
                    .copied()
                    .ok_or_else(|| sqlx::Error::Protocol(format!("no outbox row for {key}")))?;
                let first_here = seen.insert(key);
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

/// Records the batch's refused deliveries (keeping the last [`REJECTED_KEPT`]) and runs its
/// write probes.
async fn write_others(conn: &mut SqliteConnection, batch: &[Command]) -> Result<(), sqlx::Error> {
    let rejected: Vec<&RejectedDelivery> = batch
        .iter()
        .filter_map(|c| match c {
            Command::Reject(r) => Some(r),
            _ => None,
        })
        .collect();
    let probe = batch.iter().any(|c| matches!(c, Command::Probe(_)));
    if rejected.is_empty() && !probe {
        return Ok(());
    }
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    for r in &rejected {
        sqlx::query(
            "INSERT INTO rejected_deliveries (received_at, reason, headers, body) VALUES (?, ?, ?, ?)",
        )
        .bind(db::timestamp(r.received_at))
        .bind(&r.reason)
        .bind(&r.headers)
        .bind(r.body.as_ref())
        .execute(&mut *tx)
        .await?;
    }
    if !rejected.is_empty() {
        sqlx::query(
            "DELETE FROM rejected_deliveries WHERE id <= (SELECT MAX(id) FROM rejected_deliveries) - ?",
        )
        .bind(REJECTED_KEPT)
        .execute(&mut *tx)
        .await?;
    }
    if probe {
        sqlx::query(
            "INSERT INTO daemon_state (key, value, updated_at) VALUES ('ready_probe', 'ok', ?1)
             ON CONFLICT (key) DO UPDATE SET updated_at = ?1",
        )
        .bind(db::timestamp(Utc::now()))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// Unapplied rows in the outbox.
pub async fn count_pending(pool: &sqlx::SqlitePool) -> Result<u64, sqlx::Error> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM outbox WHERE state = 'pending'")
        .fetch_one(pool)
        .await?;
    Ok(u64::try_from(n).unwrap_or(0))
}
