//! Write transactions and the dedicated write connection, whichever the backend: a [`Tx`]
//! begins as its backend needs (SQLite takes its one write lock at once, `BEGIN
//! IMMEDIATE`, so that a transaction never fails half-way for want of it) and lends its
//! backend's connection to the apply path's statements ([`ApplyTx`](super::ApplyTx)) and
//! ingest's ([`IngestStore`](super::IngestStore)).

use super::gate::{Turn, WriteGate};
use super::{Connection, Pool};

/// How long a bulk writer (an import) waits for the file's write lock before failing: a
/// list imported by the CLI beside a busy daemon (its deliveries, reports and imports)
/// waits its turn rather than aborting after the pool's five seconds.
const BULK_BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// What makes a delivery a duplicate: its account and its dedup key.
pub type OutboxKey = (String, String);

/// How SQLite begins a write transaction: with the database's write lock.
const SQLITE_BEGIN: &str = "BEGIN IMMEDIATE";

/// A write transaction on the configured database. Dropped without [`Tx::commit`], it rolls
/// back.
pub enum Tx<'c> {
    Sqlite(Gated<sqlx::Transaction<'c, sqlx::Sqlite>>),
    Postgres(sqlx::Transaction<'c, sqlx::Postgres>),
}

/// A SQLite transaction with the writer's turn at the gate ([`WriteGate`]), given back when
/// the transaction ends (none for a read, or when the caller holds the turn itself).
pub struct Gated<T> {
    // Declared first so that it ends before the turn is handed on.
    inner: T,
    turn: Option<Turn>,
}

impl<T> std::ops::Deref for Gated<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T> std::ops::DerefMut for Gated<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl Tx<'_> {
    /// Whether ingest is waiting for this transaction's turn at the write gate
    /// ([`Turn::wanted_by_ingest`]); never where there is no gate.
    pub fn wanted_by_ingest(&self) -> bool {
        match self {
            Tx::Sqlite(gated) => gated.turn.as_ref().is_some_and(Turn::wanted_by_ingest),
            Tx::Postgres(_) => false,
        }
    }

    pub async fn commit(self) -> Result<(), crate::store::Error> {
        match self {
            Tx::Sqlite(Gated { inner, turn }) => {
                inner.commit().await?;
                drop(turn);
                Ok(())
            }
            Tx::Postgres(tx) => Ok(tx.commit().await?),
        }
    }

    pub async fn rollback(self) -> Result<(), crate::store::Error> {
        match self {
            Tx::Sqlite(Gated { inner, turn }) => {
                inner.rollback().await?;
                drop(turn);
                Ok(())
            }
            Tx::Postgres(tx) => Ok(tx.rollback().await?),
        }
    }
}

impl Pool {
    /// A write transaction on a connection of the pool, begun once the connection is had
    /// and the writer's turn has come ([`WriteGate::queued`]).
    pub async fn begin_write(&self) -> Result<Tx<'static>, crate::store::Error> {
        Ok(match self {
            Pool::Sqlite(pool) => {
                let conn = pool.acquire().await?;
                let turn = gate_of(pool).queued().await;
                let tx = sqlx::Transaction::begin(conn, Some(SQLITE_BEGIN.into())).await?;
                Tx::Sqlite(Gated {
                    inner: tx,
                    turn: Some(turn),
                })
            }
            Pool::Postgres(pool) => Tx::Postgres(pool.begin().await?),
        })
    }

    /// The turn of a writer that writes outside [`Pool::begin_write`] (one statement in
    /// autocommit): hold it over the statement. `None` where there is no gate.
    pub async fn write_turn(&self) -> Option<Turn> {
        match self {
            Pool::Sqlite(pool) => Some(gate_of(pool).queued().await),
            Pool::Postgres(_) => None,
        }
    }

    /// Whether the database takes one writer at a time (SQLite): its writers then take
    /// turns in the process ([`crate::outbox::OutboxState`]'s gate) instead of waiting on
    /// the file's lock, and the worker runs one apply loop.
    pub fn single_writer(&self) -> bool {
        matches!(self, Pool::Sqlite(_))
    }
}

impl Pool {
    /// A connection of its own for a long run of write transactions (a leads pass). On
    /// SQLite it has a page cache of `cache_kib` and a WAL checkpoint every
    /// `checkpoint_pages`, its cache going with it at the end; on PostgreSQL it is a plain
    /// connection.
    pub async fn bulk_connection(
        &self,
        cache_kib: u32,
        checkpoint_pages: u32,
    ) -> Result<Connection, crate::store::Error> {
        use sqlx::ConnectOptions as _;
        Ok(match self {
            Pool::Sqlite(pool) => Connection::Sqlite(SqliteWriter {
                conn: pool
                    .connect_options()
                    .as_ref()
                    .clone()
                    .pragma("cache_size", format!("-{cache_kib}"))
                    .pragma("wal_autocheckpoint", checkpoint_pages.to_string())
                    .busy_timeout(BULK_BUSY_TIMEOUT)
                    .connect()
                    .await?,
                gate: gate_of(pool),
            }),
            Pool::Postgres(pool) => {
                Connection::Postgres(pool.connect_options().as_ref().clone().connect().await?)
            }
        })
    }

    /// A pool of one connection to the same database whose commits return before they are
    /// flushed to disk (SQLite `synchronous = NORMAL` in WAL mode, PostgreSQL
    /// `synchronous_commit = off`), opened when first used. Such a commit survives a crash
    /// of the process at once and one of the machine once any later commit is flushed:
    /// the write-ahead log keeps commits in order, so nothing committed after it can
    /// outlive it. For records that are cheap to repeat and costly to flush one by one (a
    /// destination's answered actions).
    pub fn unflushed(&self) -> Pool {
        match self {
            Pool::Sqlite(pool) => Pool::Sqlite(
                sqlx::sqlite::SqlitePoolOptions::new()
                    .max_connections(1)
                    .connect_lazy_with(
                        pool.connect_options()
                            .as_ref()
                            .clone()
                            .synchronous(sqlx::sqlite::SqliteSynchronous::Normal),
                    ),
            ),
            Pool::Postgres(pool) => Pool::Postgres(
                sqlx::postgres::PgPoolOptions::new()
                    .max_connections(1)
                    .connect_lazy_with(
                        pool.connect_options()
                            .as_ref()
                            .clone()
                            .options([("synchronous_commit", "off")]),
                    ),
            ),
        }
    }

    /// Whether other processes (replicas) write to the same database, so that their
    /// ledger commits are announced by `NOTIFY` and must be listened to
    /// ([`Pool::listen_to_replicas`]).
    pub fn shared_by_replicas(&self) -> bool {
        matches!(self, Pool::Postgres(_))
    }

    /// Turns the other replicas' ledger commits into wake-ups here until `shutdown` (see
    /// `store/listen.rs`); returns at once where there are no replicas.
    pub async fn listen_to_replicas(&self, shutdown: tokio_util::sync::CancellationToken) {
        if let Pool::Postgres(pool) = self {
            super::listen::listen(pool.clone(), shutdown).await;
        }
    }
}

/// The gate of the pool's database file.
fn gate_of(pool: &sqlx::SqlitePool) -> std::sync::Arc<WriteGate> {
    WriteGate::of(pool.connect_options().get_filename())
}

/// A dedicated SQLite connection and the gate of its file.
pub struct SqliteWriter {
    conn: sqlx::SqliteConnection,
    gate: std::sync::Arc<WriteGate>,
}

impl SqliteWriter {
    pub(super) fn new(conn: sqlx::SqliteConnection, path: &std::path::Path) -> Self {
        Self {
            conn,
            gate: WriteGate::of(path),
        }
    }

    pub(super) fn into_inner(self) -> sqlx::SqliteConnection {
        self.conn
    }
}

impl std::ops::Deref for SqliteWriter {
    type Target = sqlx::SqliteConnection;
    fn deref(&self) -> &sqlx::SqliteConnection {
        &self.conn
    }
}

impl std::ops::DerefMut for SqliteWriter {
    fn deref_mut(&mut self) -> &mut sqlx::SqliteConnection {
        &mut self.conn
    }
}

impl Connection {
    /// A write transaction on this connection, begun once the writer's turn has come
    /// ([`WriteGate::queued`]).
    pub async fn begin_write(&mut self) -> Result<Tx<'_>, crate::store::Error> {
        use sqlx::Connection as _;
        Ok(match self {
            Connection::Sqlite(writer) => {
                let turn = writer.gate.queued().await;
                Tx::Sqlite(Gated {
                    inner: writer.conn.begin_with(SQLITE_BEGIN).await?,
                    turn: Some(turn),
                })
            }
            Connection::Postgres(conn) => Tx::Postgres(conn.begin().await?),
        })
    }

    /// Ingest's turn at the gate ([`WriteGate::first`]), for the outbox writer to hold over
    /// its batch; `None` where there is no gate.
    pub async fn first_turn(&self) -> Option<Turn> {
        match self {
            Connection::Sqlite(writer) => Some(writer.gate.first().await),
            Connection::Postgres(_) => None,
        }
    }

    /// A write transaction for a caller that holds its turn already
    /// ([`Connection::first_turn`]).
    pub async fn begin_write_in_turn(&mut self) -> Result<Tx<'_>, crate::store::Error> {
        use sqlx::Connection as _;
        Ok(match self {
            Connection::Sqlite(writer) => Tx::Sqlite(Gated {
                inner: writer.conn.begin_with(SQLITE_BEGIN).await?,
                turn: None,
            }),
            Connection::Postgres(conn) => Tx::Postgres(conn.begin().await?),
        })
    }

    /// A transaction that only reads (a dry run): it takes no write lock and no turn at
    /// the write gate, so it never holds up a writer. Whatever it might write is rolled
    /// back with it.
    pub async fn begin_read(&mut self) -> Result<Tx<'_>, crate::store::Error> {
        use sqlx::Connection as _;
        Ok(match self {
            Connection::Sqlite(writer) => Tx::Sqlite(Gated {
                inner: writer.conn.begin_with("BEGIN DEFERRED").await?,
                turn: None,
            }),
            Connection::Postgres(conn) => Tx::Postgres(conn.begin_with("BEGIN READ ONLY").await?),
        })
    }

    /// See [`Pool::single_writer`].
    pub fn single_writer(&self) -> bool {
        matches!(self, Connection::Sqlite(_))
    }
}
