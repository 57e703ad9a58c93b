//! The storage layer: every statement the daemon runs, one trait per concern. Each
//! statement is written once, in the concern's file, and runs on whichever backend the
//! database is (`on_backend!`, `backend.rs`); a folder per backend holds the parts its
//! engine writes its own way (SQLite: multi-row VALUES and `json_each`, one hand-over to
//! its thread per statement; PostgreSQL: arrays, `unnest`, `ON CONFLICT`, row and advisory
//! locks).

use chrono::Utc;

/// What a write transaction of the apply path is given, and [`ApplyTx`].
mod apply;
pub use apply::{
    ApplyTx, LAST_ERROR, NewEntry, NewMessage, PageCheckpoint, PassRecord, StateWrite, Suppressing,
};
pub(crate) use apply::{
    Chained, LEADS_ON_CONFLICT, LeadJson, StateRow, chain_after, entry_key, pushed_changes,
    sent_after_opt_out, status_rank, unrecorded,
};
/// The storage layer's one error type.
mod error;
pub use error::{Error, Result};
/// Opening the configured database, and the embedded migrations of each backend.
mod open;
pub use open::{
    DbError, MIGRATOR, POSTGRES_MIGRATOR, connection, migrate, migrate_postgres,
    migrations_applied, open, open_long_reads, pool, postgres_connection,
};

/// How values cross the storage boundary as text (JSON, times, rowids).
pub mod codec;

/// `migrate --from`: a SQLite database copied into PostgreSQL.
pub mod copy;

/// The SQLite backend.
pub mod sqlite;

/// The PostgreSQL backend.
pub mod postgres;

/// The hash chain's reads written once for both backends.
mod chain;
/// The column lists several statements select.
mod columns;
/// Ingest's statements written once for both backends.
mod ingest;
pub use ingest::IngestStore;
/// Lease and heartbeat statements, one text for both backends.
mod leases;

/// Outbox statements with one text for both backends.
mod outbox;
/// The push queue's statements written once for both backends.
mod pushes;
/// Read statements written once for both backends.
mod read;
/// The reconciler's bookkeeping written once for both backends.
mod reconcile;
/// Retention statements written once for both backends.
mod retention;
/// `daemon_state`'s statements written once for both backends.
mod state;

/// The compliance report's reads, one text for both backends.
mod compliance;
/// Console sessions, one text for both backends.
mod console;
/// Destinations' outcomes per entry, one text for both backends.
mod destinations;
/// Subscribers' delivery state, one text for both backends.
mod subscribers;

/// How a statement written once runs on either backend (`on_backend!`).
mod backend;
/// Statements run the same way on sqlx's connections and the ingest writer's own.
pub(crate) mod exec;

/// PostgreSQL's planner kept up with a long run of writes.
mod statistics;
pub use statistics::Growth;

/// The other replicas' ledger commits turned into wake-ups of [`crate::signal`].
mod listen;
/// Write transactions and the dedicated write connection, whichever the backend.
mod tx;
/// The ingest writer's connection: on SQLite, of the writer's own thread.
mod writer;
pub use tx::{Gated, OutboxKey, SqliteWriter, Tx};
pub use writer::{WriterConnection, WriterTx};
/// Long reads: a few at a time, on connections of their own.
mod long_reads;
pub use long_reads::{AT_ONCE as LONG_READS_AT_ONCE, LongRead, LongReads};
/// The turns SQLite's writers take, ingest first.
mod gate;
pub use gate::{Turn, WriteGate};

/// One trait per concern, implemented once for [`Pool`] in the concern's file.
mod concerns;
pub use concerns::{
    ChainStore, ComplianceStore, DestinationStore, EvidenceStore, ExportStore, LeaseStore,
    OutboxCounts, OutboxStore, PassStore, PushStore, ReadStore, RetentionStore, SessionStore,
    StateStore, SubscriberStore,
};

/// What the demo's live view reads, beside `status`.
mod demo;
pub use demo::DemoStore;

/// What sharing opt-outs across accounts reads.
mod share;
pub use share::ShareStore;

mod sources;
pub use sources::{SourceCounts, SourceRow, SourceStore, SourceTx};

/// Replies kept for a person to decide.
mod review;
pub use review::ReviewStore;

/// A pool of connections to the configured database, whichever the backend: chosen once,
/// when the database is opened ([`open`]); every concern's trait is implemented for it
/// once, each statement run on the backend's pool.
#[derive(Debug, Clone)]
pub enum Pool {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl From<sqlx::SqlitePool> for Pool {
    fn from(pool: sqlx::SqlitePool) -> Self {
        Pool::Sqlite(pool)
    }
}

impl From<sqlx::PgPool> for Pool {
    fn from(pool: sqlx::PgPool) -> Self {
        Pool::Postgres(pool)
    }
}

impl From<&sqlx::SqlitePool> for Pool {
    fn from(pool: &sqlx::SqlitePool) -> Self {
        Pool::Sqlite(pool.clone())
    }
}

impl From<&sqlx::PgPool> for Pool {
    fn from(pool: &sqlx::PgPool) -> Self {
        Pool::Postgres(pool.clone())
    }
}

/// So that functions taking `impl Into<Pool>` take a borrowed `Pool` too.
impl From<&Pool> for Pool {
    fn from(pool: &Pool) -> Self {
        pool.clone()
    }
}

impl Pool {
    /// The `daemon_state` value of `key`.
    pub async fn state(&self, key: &str) -> Result<Option<String>, crate::store::Error> {
        self.state_value(key).await
    }

    /// Sets the `daemon_state` value of `key`.
    pub async fn set_state(&self, key: &str, value: &str) -> Result<(), crate::store::Error> {
        let now = Utc::now();
        self.put_state(key, value, now).await
    }

    /// Closes every connection of the pool, waiting for those in use.
    pub async fn close(&self) {
        match self {
            Pool::Sqlite(pool) => pool.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }

    /// Records the latest failure for `status`, from a loop that is already handling it:
    /// when even the record cannot be written (often the same broken database), that is
    /// logged with its cause and the loop goes on.
    pub async fn note_error(&self, message: &str) {
        if let Err(error) = self.set_state(LAST_ERROR, message).await {
            tracing::error!(%error, last_error = message, "cannot record the last error for `status`");
        }
    }
}

/// A connection of its own, for a task that runs many write transactions in a row (the
/// outbox writer, a leads pass).
pub enum Connection {
    Sqlite(tx::SqliteWriter),
    Postgres(sqlx::PgConnection),
}

impl Connection {
    /// Closes the connection, logging (not raising) a failure: the work on it is done.
    pub async fn close(self) {
        use sqlx::Connection as _;
        let closed = match self {
            Self::Sqlite(writer) => writer.into_inner().close().await,
            Self::Postgres(conn) => conn.close().await,
        };
        if let Err(error) = closed {
            tracing::debug!(%error, "closing a dedicated connection");
        }
    }
}
