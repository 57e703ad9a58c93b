//! The ingest writer's connection and its transactions. On SQLite it is a connection of the
//! writer's own thread ([`Embedded`]): a batch's statements run where the writer runs, with
//! no hand-over to a driver's thread. On PostgreSQL it is a plain connection. Either lends
//! itself to ingest's statements ([`IngestStore`](super::IngestStore)) and the apply path's
//! ([`ApplyTx`](super::ApplyTx), [`SourceTx`](super::SourceTx)), written once for every
//! connection.

use std::sync::Arc;

use super::backend::{Backend, Lend};
use super::gate::{Turn, WriteGate};
use super::sqlite::{Embedded, EmbeddedTx};
use crate::settings::Settings;

/// The ingest writer's connection.
pub enum WriterConnection {
    Sqlite {
        conn: Embedded,
        /// The gate of the file, shared with the pool's writers.
        gate: Arc<WriteGate>,
    },
    Postgres(sqlx::PgConnection),
}

impl std::fmt::Debug for WriterConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WriterConnection::Sqlite { .. } => "WriterConnection::Sqlite",
            WriterConnection::Postgres(_) => "WriterConnection::Postgres",
        })
    }
}

/// A write transaction of the ingest writer; rolled back when dropped uncommitted.
pub enum WriterTx<'c> {
    Sqlite(EmbeddedTx<'c>),
    Postgres(sqlx::Transaction<'c, sqlx::Postgres>),
}

impl WriterConnection {
    /// Opens the writer's connection to the configured database (made and migrated by the
    /// pool before).
    pub async fn open(settings: &Settings) -> Result<Self, super::Error> {
        Ok(match settings.backend() {
            Ok(crate::settings::Backend::Postgres) => {
                WriterConnection::Postgres(super::postgres_connection(settings).await?)
            }
            _ => {
                let (path, full_sync) = super::open::sqlite_file(settings)?;
                WriterConnection::Sqlite {
                    conn: Embedded::open(&super::sqlite::EmbeddedOptions {
                        path: &path,
                        full_sync,
                        busy_timeout: super::open::BUSY_TIMEOUT,
                        cache_kib: super::open::CACHE_KIB,
                    })?,
                    gate: WriteGate::of(&path),
                }
            }
        })
    }

    /// See [`super::Pool::single_writer`].
    pub fn single_writer(&self) -> bool {
        matches!(self, WriterConnection::Sqlite { .. })
    }

    /// Ingest's turn at the write gate ([`WriteGate::first`]); `None` where there is none.
    pub async fn first_turn(&self) -> Option<Turn> {
        match self {
            WriterConnection::Sqlite { gate, .. } => Some(gate.first().await),
            WriterConnection::Postgres(_) => None,
        }
    }

    /// A write transaction, for a caller that holds its turn already
    /// ([`WriterConnection::first_turn`]).
    pub async fn begin_write(&mut self) -> Result<WriterTx<'_>, super::Error> {
        use sqlx::Connection as _;
        Ok(match self {
            WriterConnection::Sqlite { conn, .. } => WriterTx::Sqlite(conn.begin_write()?),
            WriterConnection::Postgres(conn) => WriterTx::Postgres(conn.begin().await?),
        })
    }

    pub async fn close(self) {
        use sqlx::Connection as _;
        if let WriterConnection::Postgres(conn) = self {
            let _ = conn.close().await;
        }
    }
}

impl WriterTx<'_> {
    pub async fn commit(self) -> Result<(), super::Error> {
        match self {
            WriterTx::Sqlite(tx) => tx.commit(),
            WriterTx::Postgres(tx) => Ok(tx.commit().await?),
        }
    }

    pub async fn rollback(self) -> Result<(), super::Error> {
        match self {
            WriterTx::Sqlite(tx) => tx.rollback(),
            WriterTx::Postgres(tx) => Ok(tx.rollback().await?),
        }
    }
}

impl Lend for WriterConnection {
    type Sqlite = Embedded;
    fn backend(&mut self) -> Backend<&mut Embedded, &mut sqlx::PgConnection> {
        match self {
            WriterConnection::Sqlite { conn, .. } => Backend::Sqlite(conn),
            WriterConnection::Postgres(conn) => Backend::Postgres(conn),
        }
    }
}

impl Lend for WriterTx<'_> {
    type Sqlite = Embedded;
    fn backend(&mut self) -> Backend<&mut Embedded, &mut sqlx::PgConnection> {
        match self {
            WriterTx::Sqlite(tx) => Backend::Sqlite(tx.connection()),
            WriterTx::Postgres(tx) => Backend::Postgres(&mut **tx),
        }
    }
}
