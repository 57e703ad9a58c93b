//! What the `ingest` and `apply` benches share: the database a run works on, taken from the
//! environment. Without `BENCH_POSTGRES_URL`, a SQLite file in a temporary directory; with
//! it (e.g. `postgres://postgres@127.0.0.1:5432/test`), a database of its own on that
//! PostgreSQL server, created for the run (`CREATE DATABASE`, random name) and dropped
//! after it (`DROP DATABASE … WITH (FORCE)`), even when the run fails.

use std::str::FromStr as _;

use outreach_sync::store::Pool;
use sqlx::postgres::{PgConnectOptions, PgRow};
use sqlx::sqlite::SqliteRow;
use sqlx::{Connection as _, PgConnection};
use tempfile::TempDir;

/// The variable naming the PostgreSQL server to bench on.
pub const POSTGRES_VARIABLE: &str = "BENCH_POSTGRES_URL";

/// The server the benches that run on both backends use when `BENCH_POSTGRES_URL` is unset.
pub const DEFAULT_POSTGRES: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The PostgreSQL server of a bench that runs on both backends: `BENCH_POSTGRES_URL`, else
/// [`DEFAULT_POSTGRES`]; `None`, said on the terminal, when it does not answer in 5 s.
#[allow(dead_code)] // The benches that run both backends in one run.
pub async fn answering_postgres() -> Option<String> {
    let server = std::env::var(POSTGRES_VARIABLE).unwrap_or(DEFAULT_POSTGRES.into());
    let answers = async {
        let options = PgConnectOptions::from_str(&server)?;
        let connect = PgConnection::connect_with(&options);
        let connection = tokio::time::timeout(std::time::Duration::from_secs(5), connect).await??;
        connection.close().await?;
        anyhow::Ok(())
    };
    match answers.await {
        Ok(()) => Some(server),
        Err(error) => {
            println!("PostgreSQL skipped: {server} does not answer ({error})");
            None
        }
    }
}

/// A count from the environment (`_` and `,` allowed between digits), or `default`.
#[allow(dead_code)] // The benches that take counts.
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace(['_', ','], "").parse().ok())
        .unwrap_or(default)
}

/// The database of one run, and a scratch directory (SQLite's files, the fsync probe).
pub struct BenchDatabase {
    pub dir: TempDir,
    /// What the daemon's `database.url` is set to.
    pub url: String,
    /// The PostgreSQL database created for the run, dropped with it.
    postgres: Option<Created>,
}

impl BenchDatabase {
    /// A fresh database: PostgreSQL when `BENCH_POSTGRES_URL` is set, else the SQLite file
    /// `sqlite_file` in a new temporary directory.
    #[allow(dead_code)] // The benches that `open` theirs.
    pub async fn create(sqlite_file: &str) -> anyhow::Result<Self> {
        Self::create_on(sqlite_file, std::env::var(POSTGRES_VARIABLE).ok()).await
    }

    /// A fresh database on the PostgreSQL server at `server_url`, or, without one, the
    /// SQLite file `sqlite_file` in a new temporary directory.
    pub async fn create_on(sqlite_file: &str, server_url: Option<String>) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let Some(server_url) = server_url else {
            let url = format!("sqlite://{}", dir.path().join(sqlite_file).display());
            return Ok(Self {
                dir,
                url,
                postgres: None,
            });
        };
        let server = PgConnectOptions::from_str(&server_url)
            .map_err(|_| anyhow::anyhow!("{POSTGRES_VARIABLE} is not a PostgreSQL URL"))?;
        let name = format!("outreach_sync_bench_{:016x}", rand::random::<u64>());
        let mut admin = PgConnection::connect_with(&server).await?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await?;
        admin.close().await?;
        let created = Created { server, name };
        // The same URL (user, host, parameters) naming the new database.
        let mut url = reqwest::Url::parse(&server_url)?;
        url.set_path(&created.name);
        Ok(Self {
            dir,
            url: url.to_string(),
            postgres: Some(created),
        })
    }

    /// A fresh database ([`BenchDatabase::create`]) opened and migrated as the daemon opens
    /// it, with `synchronous = "full"`.
    #[allow(dead_code)] // `ingest` builds its own settings around the database.
    pub async fn open(sqlite_file: &str) -> (Self, Pool) {
        Self::open_on(sqlite_file, std::env::var(POSTGRES_VARIABLE).ok()).await
    }

    /// [`BenchDatabase::open`] on the server at `server_url` (SQLite without one).
    #[allow(dead_code)] // As `open`.
    pub async fn open_on(sqlite_file: &str, server_url: Option<String>) -> (Self, Pool) {
        let database = Self::create_on(sqlite_file, server_url)
            .await
            .expect("bench database");
        let mut settings = outreach_sync::settings::Settings::default();
        settings.database.url = database.url.clone();
        settings.database.synchronous = outreach_sync::settings::Synchronous::Full;
        settings.webhook.secrets = vec![secrecy::SecretString::from("bench")];
        let pool = outreach_sync::store::open(&settings)
            .await
            .expect("open and migrate");
        (database, pool)
    }

    /// Which backend the run is on, for the header.
    pub fn backend(&self) -> &'static str {
        if self.is_postgres() {
            "PostgreSQL"
        } else {
            "SQLite"
        }
    }

    pub fn is_postgres(&self) -> bool {
        self.postgres.is_some()
    }

    /// Where the data lives and how durable a commit is, for the header after
    /// [`backend`](Self::backend).
    pub async fn describe(&self, pool: &Pool) -> anyhow::Result<String> {
        Ok(match (pool, &self.postgres) {
            (Pool::Postgres(pool), Some(created)) => {
                let (version, synchronous_commit, fsync): (String, String, String) =
                    sqlx::query_as(
                        "SELECT current_setting('server_version'),
                                current_setting('synchronous_commit'), current_setting('fsync')",
                    )
                    .fetch_one(pool)
                    .await?;
                format!(
                    "server {version} at {}:{} (synchronous_commit = {synchronous_commit}, \
                     fsync = {fsync}), database {}",
                    created.server.get_host(),
                    created.server.get_port(),
                    created.name
                )
            }
            _ => format!("synchronous = full, db in {}", self.dir.path().display()),
        })
    }
}

/// A database created on the server, dropped when this goes.
struct Created {
    server: PgConnectOptions,
    name: String,
}

impl Drop for Created {
    /// Drops the database from a thread of its own (drop cannot await, and may run inside
    /// the bench's runtime), ending the sessions still on it.
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || -> anyhow::Result<()> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let mut admin = PgConnection::connect_with(&server).await?;
                sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
                    .execute(&mut admin)
                    .await?;
                admin.close().await?;
                Ok(())
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(error)) => eprintln!("cannot drop the bench database {}: {error}", self.name),
            Err(_) => eprintln!("cannot drop the bench database {}: panicked", self.name),
        }
    }
}

/// The one row of `sql`, a query written to run on either backend.
pub async fn fetch_row<T>(pool: &Pool, sql: &str) -> Result<T, sqlx::Error>
where
    T: Send + Unpin + for<'r> sqlx::FromRow<'r, SqliteRow> + for<'r> sqlx::FromRow<'r, PgRow>,
{
    match pool {
        Pool::Sqlite(pool) => sqlx::query_as(sql).fetch_one(pool).await,
        Pool::Postgres(pool) => sqlx::query_as(sql).fetch_one(pool).await,
    }
}

/// The outbox by state: (rows, applied, quarantined, pending).
pub async fn outbox_states(pool: &Pool) -> Result<(i64, i64, i64, i64), sqlx::Error> {
    fetch_row(
        pool,
        "SELECT COUNT(*), COUNT(*) FILTER (WHERE state = 'applied'),
                COUNT(*) FILTER (WHERE state = 'quarantined'),
                COUNT(*) FILTER (WHERE state = 'pending')
         FROM outbox",
    )
    .await
}

/// Serves `router` on a free loopback port in this process, until the process ends; its
/// base URL (`http://127.0.0.1:PORT`).
#[allow(dead_code)] // The benches that serve a receiver or the admin API in their process.
pub async fn serve_local(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let base = format!("http://{}", listener.local_addr().expect("its address"));
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
    base
}
