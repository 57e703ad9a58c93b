//! The outbox write path: one writer task owns one connection and commits the deliveries of
//! many concurrent requests per transaction (group commit), answering each only after the
//! commit, so every acknowledgement is durable without one fsync per delivery.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use sqlx::{Connection, SqliteConnection};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::db;
use crate::settings::Settings;

/// Most deliveries committed in one transaction.
const MAX_BATCH: usize = 512;
/// Requests waiting for the writer before new ones are refused with 503.
const QUEUE_DEPTH: usize = 4096;
/// Pause after a failed commit, so a broken disk is not hammered in a tight loop.
const FAILURE_PAUSE: Duration = Duration::from_millis(200);
/// Deliveries per INSERT statement (5 parameters each).
const ROWS_PER_INSERT: usize = 256;
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
    ) -> Result<(Self, tokio::task::JoinHandle<()>), db::DbError> {
        let conn = db::connection(settings).await?;
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        let task = Writer {
            settings: settings.clone(),
            conn: Some(conn),
            state: state.clone(),
        };
        let handle = tokio::spawn(task.run(rx));
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
        let outcome = match self.connection().await {
            Ok(conn) => write_batch(conn, batch).await,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(results) => {
                let accepted = results
                    .iter()
                    .filter(|r| matches!(r, Some(Committed::Accepted(_))))
                    .count();
                if accepted > 0 {
                    self.state
                        .pending
                        .fetch_add(accepted as u64, Ordering::Relaxed);
                    self.state.committed.notify_one();
                }
                for (command, result) in batch.drain(..).zip(results) {
                    match (command, result) {
                        (Command::Commit(_, reply), Some(committed)) => {
                            let _ = reply.send(Ok(committed));
                        }
                        (Command::Probe(reply), _) => {
                            let _ = reply.send(true);
                        }
                        _ => {}
                    }
                }
                true
            }
            Err(error) => {
                tracing::error!(error = %error, deliveries = batch.len(), "outbox commit failed; answering 503");
                // The connection may be wedged (file replaced, disk gone): open a new one next time.
                self.conn = None;
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
                false
            }
        }
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

/// Writes a batch in one immediate transaction; one result per command, in order.
/// Deliveries go in with one multi-row INSERT per chunk (each statement is a round trip to
/// the database thread); the ones already present are then looked up together.
async fn write_batch(
    conn: &mut SqliteConnection,
    batch: &[Command],
) -> Result<Vec<Option<Committed>>, sqlx::Error> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    // First occurrence of each key in the batch: later ones are duplicates of it.
    let mut first: HashMap<&str, usize> = HashMap::new();
    let mut fresh: Vec<&Delivery> = Vec::new();
    for command in batch {
        if let Command::Commit(d, _) = command
            && !first.contains_key(d.dedup_key.as_str())
        {
            first.insert(d.dedup_key.as_str(), fresh.len());
            fresh.push(d);
        }
    }
    // The ids of new rows follow from the statement's outcome (AUTOINCREMENT gives the rows
    // of one statement consecutive ids in VALUES order), so the common case reads nothing
    // back; a chunk with rows already present is looked up in one row, and its rows above
    // the largest id before this transaction are the new ones.
    let before: i64 = sqlx::query_scalar("SELECT COALESCE(MAX(id), 0) FROM outbox")
        .fetch_one(&mut *tx)
        .await?;
    let mut ids: HashMap<&str, (i64, bool)> = HashMap::with_capacity(fresh.len());
    for chunk in fresh.chunks(ROWS_PER_INSERT) {
        let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index) ",
        );
        insert.push_values(chunk, |mut row, d| {
            row.push_bind(&d.dedup_key)
                .push_bind(db::timestamp(d.received_at))
                .push_bind(d.body.as_ref())
                .push_bind(&d.headers)
                .push_bind(i64::try_from(d.secret_index).unwrap_or(i64::MAX));
        });
        insert.push(" ON CONFLICT (dedup_key) DO NOTHING");
        let done = insert.build().execute(&mut *tx).await?;
        let added = done.rows_affected();
        if added == chunk.len() as u64 {
            let first = done.last_insert_rowid() - added as i64 + 1;
            ids.extend(
                (first..)
                    .zip(chunk)
                    .map(|(id, d)| (d.dedup_key.as_str(), (id, true))),
            );
            continue;
        }
        let keys: Vec<&str> = chunk.iter().map(|d| d.dedup_key.as_str()).collect();
        let rows: Vec<(i64, String)> = db::json_rows(
            &mut tx,
            "SELECT json_group_array(json_array(id, dedup_key)) FROM outbox
             WHERE dedup_key IN (SELECT value FROM json_each(?))",
            serde_json::to_string(&keys).unwrap_or_else(|_| "[]".into()),
        )
        .await?;
        let found: HashMap<String, i64> = rows.into_iter().map(|(id, k)| (k, id)).collect();
        for key in keys {
            if let Some(&id) = found.get(key) {
                ids.insert(key, (id, id > before));
            }
        }
    }
    let mut results = Vec::with_capacity(batch.len());
    let mut seen: HashMap<&str, ()> = HashMap::new();
    let mut rejected_any = false;
    for command in batch {
        let result = match command {
            Command::Commit(d, _) => {
                let key = d.dedup_key.as_str();
                let (id, new) = ids
                    .get(key)
                    .copied()
                    .ok_or_else(|| sqlx::Error::Protocol(format!("no outbox row for {key}")))?;
                let first_here = seen.insert(key, ()).is_none();
                Some(if new && first_here {
                    Committed::Accepted(id)
                } else {
                    Committed::Duplicate(id)
                })
            }
            Command::Reject(r) => {
                sqlx::query(
                    "INSERT INTO rejected_deliveries (received_at, reason, headers, body) VALUES (?, ?, ?, ?)",
                )
                .bind(db::timestamp(r.received_at))
                .bind(&r.reason)
                .bind(&r.headers)
                .bind(r.body.as_ref())
                .execute(&mut *tx)
                .await?;
                rejected_any = true;
                None
            }
            Command::Probe(_) => {
                sqlx::query(
                    "INSERT INTO daemon_state (key, value, updated_at) VALUES ('ready_probe', 'ok', ?1)
                     ON CONFLICT (key) DO UPDATE SET updated_at = ?1",
                )
                .bind(db::timestamp(Utc::now()))
                .execute(&mut *tx)
                .await?;
                None
            }
        };
        results.push(result);
    }
    if rejected_any {
        sqlx::query(
            "DELETE FROM rejected_deliveries WHERE id <= (SELECT MAX(id) FROM rejected_deliveries) - ?",
        )
        .bind(REJECTED_KEPT)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(results)
}

/// Unapplied rows in the outbox.
pub async fn count_pending(pool: &sqlx::SqlitePool) -> Result<u64, sqlx::Error> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM outbox WHERE state = 'pending'")
        .fetch_one(pool)
        .await?;
    Ok(u64::try_from(n).unwrap_or(0))
}
