//! Opening the configured database (SQLite with the right pragmas, or PostgreSQL), and
//! the embedded migrations of each.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, PgConnection, SqlitePool};

use super::{Connection, Pool};
use crate::settings::{Backend, Settings, Synchronous};

/// How long a statement waits for another writer before failing.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// Page cache per connection, in KiB: SQLite's default, so memory stays the same however
/// large the database grows.
pub(super) const CACHE_KIB: u32 = 2 * 1024;
/// Read connections in a SQLite pool.
const POOL_SIZE: u32 = 8;
/// Connections of a PostgreSQL pool, per replica: the worker, the leader's reconciler,
/// pusher and subscriber senders, admin requests and the heartbeat each hold one at a time;
/// the ledger's listener (`store/listen.rs`) keeps one for itself.
const POSTGRES_POOL_SIZE: u32 = 11;
/// Longest wait for a PostgreSQL connection from the pool: while the server is down every
/// read fails after it (readiness and the admin API answer 503) instead of after sqlx's
/// default 30 s, and the tasks that write retry on their own schedule.
pub const POSTGRES_ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1_500);

/// SQLite's migrations, compiled into the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// PostgreSQL's migrations, compiled into the binary: the same schema written for
/// PostgreSQL, for the replicated backend (`migrations/postgres`).
pub static POSTGRES_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Why the database could not be opened or migrated.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("cannot create the database directory {path}: {source}")]
    Directory {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot open the database: {0}")]
    Open(#[from] sqlx::Error),
    #[error("cannot apply migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// Connection options for the configured database: WAL, the configured `synchronous`,
/// a busy timeout, foreign keys on, created if missing.
pub fn connect_options(settings: &Settings) -> Result<SqliteConnectOptions, DbError> {
    let (path, full_sync) = sqlite_file(settings)?;
    let synchronous = if full_sync {
        SqliteSynchronous::Full
    } else {
        SqliteSynchronous::Normal
    };
    Ok(SqliteConnectOptions::from_str("sqlite://")?
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(synchronous)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true)
        .pragma("cache_size", format!("-{CACHE_KIB}"))
        .disable_statement_logging())
}

/// The configured SQLite file (its directory made when missing) and whether its commits
/// are flushed in full (`synchronous = FULL`).
pub(super) fn sqlite_file(settings: &Settings) -> Result<(std::path::PathBuf, bool), DbError> {
    let path = settings
        .database_path()
        .map_err(|e| DbError::Open(sqlx::Error::Configuration(e.to_string().into())))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| DbError::Directory {
            path: dir.display().to_string(),
            source,
        })?;
    }
    Ok((
        path,
        matches!(settings.database.synchronous, Synchronous::Full),
    ))
}

/// Connection options for the configured PostgreSQL database. The server's durability
/// settings are left as they are: a commit returns once the server says it is durable.
pub fn postgres_options(settings: &Settings) -> Result<PgConnectOptions, DbError> {
    // The parser's own error may quote the URL, password and all.
    let options: PgConnectOptions = settings.database.url.parse().map_err(|_| {
        DbError::Open(sqlx::Error::Configuration(
            "database.url is not a PostgreSQL URL".into(),
        ))
    })?;
    // JIT compiles a statement whose estimated cost crosses a threshold: for the daemon's
    // reads that costs more than it saves (a compliance report's opt-outs: 1.8-2.8 s of
    // compilation for 0.6 s of execution).
    Ok(options
        .application_name("outreach-sync")
        .options([("jit", "off")])
        .disable_statement_logging())
}

/// The configured database, whichever the backend, opened and migrated: what every command
/// and the daemon work on.
pub async fn open(settings: &Settings) -> Result<Pool, DbError> {
    Ok(match settings.backend() {
        Ok(Backend::Postgres) => {
            migrate_postgres(settings).await?;
            Pool::Postgres(
                PgPoolOptions::new()
                    .max_connections(POSTGRES_POOL_SIZE)
                    .acquire_timeout(POSTGRES_ACQUIRE_TIMEOUT)
                    .connect_with(postgres_options(settings)?)
                    .await?,
            )
        }
        _ => {
            let pool = pool(settings).await?;
            migrate(&pool).await?;
            Pool::Sqlite(pool)
        }
    })
}

/// A pool of its own for long reads ([`super::LongReads`]): as many connections as long
/// reads may run at once, not migrated (the daemon's pool was).
pub async fn open_long_reads(settings: &Settings) -> Result<Pool, DbError> {
    let size = super::long_reads::AT_ONCE as u32;
    Ok(match settings.backend() {
        Ok(Backend::Postgres) => Pool::Postgres(
            PgPoolOptions::new()
                .max_connections(size)
                .acquire_timeout(POSTGRES_ACQUIRE_TIMEOUT)
                .connect_with(postgres_options(settings)?)
                .await?,
        ),
        _ => Pool::Sqlite(
            SqlitePoolOptions::new()
                .max_connections(size)
                .connect_with(connect_options(settings)?.read_only(true))
                .await?,
        ),
    })
}

/// A dedicated connection to the configured database, for a task that owns a write path.
pub async fn connection(settings: &Settings) -> Result<Connection, DbError> {
    Ok(match settings.backend() {
        Ok(Backend::Postgres) => Connection::Postgres(postgres_connection(settings).await?),
        _ => {
            let options = connect_options(settings)?;
            let path = options.get_filename().to_owned();
            Connection::Sqlite(super::tx::SqliteWriter::new(
                options.connect().await?,
                &path,
            ))
        }
    })
}

/// A dedicated PostgreSQL connection, for a task that owns a write path.
pub async fn postgres_connection(settings: &Settings) -> Result<PgConnection, DbError> {
    Ok(postgres_options(settings)?.connect().await?)
}

/// Applies PostgreSQL's migrations to the configured database; replicas doing so at once
/// apply each migration once (the migrator holds an advisory lock).
pub async fn migrate_postgres(settings: &Settings) -> Result<(), DbError> {
    use sqlx::Connection as _;
    let mut conn = postgres_connection(settings).await?;
    POSTGRES_MIGRATOR.run(&mut conn).await?;
    conn.close().await?;
    Ok(())
}

/// A SQLite pool for readers and short writes (not migrated: see [`open`]).
pub async fn pool(settings: &Settings) -> Result<SqlitePool, DbError> {
    let options = connect_options(settings)?;
    Ok(SqlitePoolOptions::new()
        .max_connections(POOL_SIZE)
        // A task cancelled just as its transaction began can hand its connection back still
        // inside it (a rollback queued by a dropped transaction is flushed by the ping).
        // Such a connection is closed, which rolls the transaction back, never reused.
        .after_release(|conn, _| {
            Box::pin(async move {
                use sqlx::Connection as _;
                if conn.is_in_transaction() {
                    conn.ping().await?;
                }
                Ok(!conn.is_in_transaction())
            })
        })
        .connect_with(options)
        .await?)
}

/// Applies every pending SQLite migration.
pub async fn migrate(pool: &SqlitePool) -> Result<(), DbError> {
    MIGRATOR.run(pool).await?;
    // SQLite has no SHA-256 of its own: the chain of entries recorded before it existed
    // is computed here (PostgreSQL's migration does it in SQL).
    let filled = crate::store::sqlite::chain::fill_missing_hashes(pool).await?;
    if filled > 0 {
        tracing::info!(
            entries = filled,
            "computed the hash chain of the ledger's older entries"
        );
    }
    // A file from before retention is rewritten once so that pruning frees space. Another
    // process using the file (an older daemon) can keep that from happening now: the next
    // start tries again, and nothing else depends on it.
    if let Err(error) = super::sqlite::retention::prepare(pool).await {
        tracing::warn!(%error, "cannot switch the database to incremental auto-vacuum yet; pruned space is reused but not given back");
    }
    Ok(())
}

/// Whether every embedded migration of the pool's backend has been applied.
pub async fn migrations_applied(pool: &Pool) -> Result<bool, sqlx::Error> {
    const APPLIED: &str = "SELECT COUNT(*) FROM _sqlx_migrations WHERE success";
    let (applied, embedded): (i64, _) = match pool {
        Pool::Sqlite(pool) => (
            sqlx::query_scalar(APPLIED).fetch_one(pool).await?,
            MIGRATOR.iter().count(),
        ),
        Pool::Postgres(pool) => (
            sqlx::query_scalar(APPLIED).fetch_one(pool).await?,
            POSTGRES_MIGRATOR.iter().count(),
        ),
    };
    Ok(usize::try_from(applied).unwrap_or(0) >= embedded)
}
