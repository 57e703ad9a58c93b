//! The storage layer's one error: the database's own, or a failure of the application's
//! rules that the database state shows (named, instead of smuggled through the driver's
//! error type).

/// What a storage call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database refused, failed or could not be reached.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// The ingest writer's own SQLite connection refused or failed
    /// ([`super::sqlite::Embedded`]).
    #[error(transparent)]
    Embedded(#[from] rusqlite::Error),
    /// A connection could not be opened.
    #[error(transparent)]
    Open(#[from] super::DbError),
    /// The chain of entries recorded before the hash chain existed is not computed yet.
    #[error(
        "the ledger's last entry (seq {seq}) has no hash yet: `outreach-sync migrate` computes the chain of older entries"
    )]
    ChainNotComputed { seq: i64 },
    /// An append under the write lock inserted fewer entries than it was given.
    #[error("the ledger took {took} of {of} new entries though the write lock was held")]
    LedgerShort { took: u64, of: usize },
    /// A committed delivery whose outbox row the same transaction cannot find.
    #[error("no outbox row for {key}")]
    OutboxRowMissing { key: String },
}

impl Error {
    /// The database's own error, when that is what this is.
    pub fn as_database(&self) -> Option<&sqlx::Error> {
        match self {
            Error::Database(e) => Some(e),
            _ => None,
        }
    }
}

/// A storage call's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
