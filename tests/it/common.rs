//! The daemon started in-process on loopback with a fresh database (a SQLite file, or a
//! PostgreSQL database of its own on the test server), for integration tests.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use outreach_sync::app::Application;
use outreach_sync::metrics::Metrics;
use outreach_sync::outbox::OutboxState;
use outreach_sync::sender::{Attempt, Running};
use outreach_sync::settings::Settings;
use outreach_sync::signal::{FALLBACK_POLL, Follower};
use outreach_sync::signature::{Key, SignatureFormat, sign};
use outreach_sync::store::Pool;
use outreach_sync::worker::{Outcome, Worker};
use secrecy::SecretString;
use sqlx::SqlitePool;
use tokio_util::sync::CancellationToken;

use crate::postgres::TestDatabase;

mod reading;
mod scenario;
mod wait;
pub use reading::{as_client, client_config, metrics_text, series_value};
pub use scenario::{Moments, pace, trickle};
pub use wait::{eventually, within};

pub const SECRET: &str = "test-secret-0123";

/// Longest [`TestApp::drain`] waits for rows the daemon's own worker holds.
const DRAIN_WITHIN: Duration = Duration::from_secs(10);
/// Longest [`TestApp::settle`] waits for one subscriber's sender.
const SETTLE_WITHIN: Duration = Duration::from_secs(20);

pub struct TestApp {
    pub addr: SocketAddr,
    /// The admin listener.
    pub admin_addr: SocketAddr,
    pub settings: Settings,
    pub pool: Pool,
    pub http: reqwest::Client,
    pub dir: tempfile::TempDir,
    /// PostgreSQL: the test's own database, dropped with the app.
    database: DroppedWithApp,
    /// The subscribers' senders, to ask them to try at once ([`TestApp::settle`]).
    pub senders: Running,
    /// This daemon's metrics (what its `/metrics` shows): counted by this test alone.
    pub metrics: Arc<Metrics>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// Settings for a test: a fresh database in `dir`, port 0, one known secret.
pub fn test_settings(dir: &std::path::Path) -> Settings {
    let mut settings = Settings::default();
    settings.database.url = format!("sqlite://{}", dir.join("outreach-sync.db").display());
    settings.ingest.bind = "127.0.0.1:0".into();
    settings.admin.bind = "127.0.0.1:0".into();
    settings.webhook.secrets = vec![SecretString::from(SECRET)];
    settings
}

/// The backends a test can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Declares the tests of `async fn $name(backend: Backend)` on both backends: `$name::sqlite`
/// and `$name::postgres` (a module and a function may share a name); `tokio::test`'s
/// arguments may follow the name, after `alone` for a test that measures time (ignored in
/// the suite's run, which shares two cores among many tests; `.ci/run` runs it alone, as
/// it does `hold::`). On PostgreSQL without
/// a test server (see [`crate::postgres::SERVER_VARIABLE`]) the function returns at once
/// (`spawn_app_on` gives `None`) and the test passes, as said on the terminal.
macro_rules! on_both_backends {
    ($name:ident) => {
        $crate::common::on_both_backends!($name, flavor = "current_thread");
    };
    ($name:ident, alone, $($runtime:tt)*) => {
        mod $name {
            #[tokio::test($($runtime)*)]
            #[ignore = "measures time: run alone, as .ci/run does"]
            async fn sqlite() {
                super::$name($crate::common::Backend::Sqlite).await
            }

            #[tokio::test($($runtime)*)]
            #[ignore = "measures time: run alone, as .ci/run does"]
            async fn postgres() {
                super::$name($crate::common::Backend::Postgres).await
            }
        }
    };
    ($name:ident, $($runtime:tt)*) => {
        mod $name {
            #[tokio::test($($runtime)*)]
            async fn sqlite() {
                super::$name($crate::common::Backend::Sqlite).await
            }

            #[tokio::test($($runtime)*)]
            async fn postgres() {
                super::$name($crate::common::Backend::Postgres).await
            }
        }
    };
}
pub(crate) use on_both_backends;

/// The daemon on a fresh SQLite file.
pub async fn spawn_app(configure: impl FnOnce(&mut Settings)) -> TestApp {
    spawn_app_on(Backend::Sqlite, configure)
        .await
        .expect("SQLite is always there")
}

/// Test settings on a fresh database of `backend` (a file in `dir`, or a PostgreSQL database
/// of its own, dropped with the returned handle); `None` on PostgreSQL when no test server
/// is given.
pub async fn settings_on(
    backend: Backend,
    dir: &std::path::Path,
) -> Option<(Settings, Option<TestDatabase>)> {
    let mut settings = test_settings(dir);
    let database = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => {
            let database = TestDatabase::create().await?;
            settings.database.url = database.url.clone();
            Some(database)
        }
    };
    Some((settings, database))
}

/// The daemon on a fresh database of `backend`; `None` on PostgreSQL when no test server is
/// given (said once on the terminal): the caller returns, the test passes without running.
pub async fn spawn_app_on(
    backend: Backend,
    configure: impl FnOnce(&mut Settings),
) -> Option<TestApp> {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mut settings, database) = settings_on(backend, dir.path()).await?;
    configure(&mut settings);
    settings.validate().expect("valid test settings");
    let application = Application::build(settings.clone()).await.expect("build");
    let addr = application.ingest_addr();
    let admin_addr = application.admin_addr();
    let senders = application.senders();
    let metrics = application.metrics();
    let pool = match &database {
        None => Pool::Sqlite(
            SqlitePool::connect(&settings.database.url)
                .await
                .expect("pool"),
        ),
        Some(database) => Pool::Postgres(database.pool().await),
    };
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(application.run_until_stopped(shutdown.clone()));
    Some(TestApp {
        addr,
        admin_addr,
        settings,
        pool,
        http: reqwest::Client::new(),
        dir,
        database: DroppedWithApp(database),
        senders,
        metrics,
        shutdown,
        task,
    })
}

/// The rows `sql` selects from `pool`, whichever the backend (columns of types both decode
/// alike: text, BIGINT, booleans, bytes); a failing query fails the test, naming it.
pub async fn rows<T>(pool: &Pool, sql: &str) -> Vec<T>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
        + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
        + Send
        + Unpin,
{
    let rows = match pool {
        Pool::Sqlite(pool) => sqlx::query_as(sql).fetch_all(pool).await,
        Pool::Postgres(pool) => sqlx::query_as(sql).fetch_all(pool).await,
    };
    rows.unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// A test's PostgreSQL database, dropped when its app is (however the test ended).
struct DroppedWithApp(Option<TestDatabase>);

impl Drop for DroppedWithApp {
    fn drop(&mut self) {
        if let Some(database) = self.0.take() {
            // Drop runs inside the test's runtime, which cannot be blocked on: the database
            // is dropped from a thread of its own, and waited for.
            let dropped = std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime")
                    .block_on(database.drop())
            });
            let _ = dropped.join();
        }
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The headers the configured scheme expects for `body`, signed with `secret` now.
    pub fn sign_with(&self, secret: &str, body: &[u8]) -> Vec<(String, String)> {
        let format = SignatureFormat::from(&self.settings.webhook);
        let key = Key::for_scheme(format.scheme, secret).expect("key");
        sign(&format, &key, body, chrono::Utc::now().timestamp(), None)
    }

    /// POSTs `body` to the ingest path with `headers`.
    pub async fn post_with(
        &self,
        body: impl Into<Vec<u8>>,
        headers: &[(String, String)],
    ) -> reqwest::Response {
        let mut request = self
            .http
            .post(self.url(&self.settings.ingest.path))
            .body(body.into());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send().await.expect("request")
    }

    /// POSTs `body` signed with the first configured secret.
    /// What `GET /readyz` on the ingest listener answers. The readiness probe goes through
    /// the writer, behind everything queued before it: a barrier for what the writer does.
    pub async fn readyz(&self) -> reqwest::StatusCode {
        self.http
            .get(self.url("/readyz"))
            .send()
            .await
            .expect("GET /readyz")
            .status()
    }

    pub async fn post_signed(&self, body: &str) -> reqwest::Response {
        let headers = self.sign_with(SECRET, body.as_bytes());
        self.post_with(body, &headers).await
    }

    pub async fn outbox_rows(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM outbox").await
    }

    /// The SQLite pool of an app on SQLite, for tests of what only SQLite has.
    pub fn sqlite(&self) -> &SqlitePool {
        match &self.pool {
            Pool::Sqlite(pool) => pool,
            Pool::Postgres(_) => panic!("this test runs on SQLite only"),
        }
    }

    /// The one BIGINT (a `COUNT(*)`) that `sql` selects, on either backend.
    pub async fn count(&self, sql: &str) -> i64 {
        let rows: Vec<(i64,)> = self.rows(sql).await;
        rows.first().unwrap_or_else(|| panic!("{sql}: no row")).0
    }

    /// The rows `sql` selects, on either backend (see [`rows`]).
    pub async fn rows<T>(&self, sql: &str) -> Vec<T>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow>
            + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>
            + Send
            + Unpin,
    {
        rows(&self.pool, sql).await
    }

    /// Runs `sql` (one statement or several) on either backend.
    pub async fn execute(&self, sql: &str) {
        let done = match &self.pool {
            Pool::Sqlite(pool) => sqlx::raw_sql(sql).execute(pool).await.map(drop),
            Pool::Postgres(pool) => sqlx::raw_sql(sql).execute(pool).await.map(drop),
        };
        done.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// The one byte column that `sql` selects, row by row, on either backend.
    pub async fn blobs(&self, sql: &str) -> Vec<Vec<u8>> {
        let rows: Vec<(Vec<u8>,)> = self.rows(sql).await;
        rows.into_iter().map(|(blob,)| blob).collect()
    }

    /// The one text column that `sql` selects, row by row, on either backend.
    pub async fn texts(&self, sql: &str) -> Vec<String> {
        let rows: Vec<(String,)> = self.rows(sql).await;
        rows.into_iter().map(|(text,)| text).collect()
    }

    /// Applies everything committed to the outbox so far, as the daemon's worker would, and
    /// returns what it did: a test waits for background work by doing it. On PostgreSQL
    /// the daemon's own worker may hold rows (claimed, skipped by this one): their commit,
    /// which wakes the ledger's followers, is waited for too. What it applies is counted in
    /// the daemon's metrics, as its own worker's is.
    pub async fn drain(&self) -> Outcome {
        let state = std::sync::Arc::new(OutboxState::default());
        let worker = Worker::new(self.pool.clone(), state, self.settings.consent.account_sync)
            .counted_in(self.metrics.clone());
        let deadline = tokio::time::Instant::now() + DRAIN_WITHIN;
        let mut total = Outcome::default();
        loop {
            // Taken before looking, so that a commit after the look ends the wait at once.
            let mut follower = Follower::new();
            let outcome = worker.drain().await.expect("drain the outbox");
            total.applied += outcome.applied;
            total.quarantined += outcome.quarantined;
            let pending = self
                .count("SELECT COUNT(*) FROM outbox WHERE state = 'pending'")
                .await;
            if pending == 0 {
                return total;
            }
            let now = tokio::time::Instant::now();
            assert!(
                now < deadline,
                "{pending} deliveries still pending after {DRAIN_WITHIN:?}"
            );
            // A batch that failed and rolled back signals nothing: looked at again after a
            // poll, as the daemon's followers do.
            follower.wait(FALLBACK_POLL.min(deadline - now)).await;
        }
    }

    /// Settles the daemon: drains the worker ([`TestApp::drain`]), then asks every
    /// configured subscriber's sender to attempt its next delivery at once, past any backoff,
    /// again after each delivery until it has nothing more to send now, and to keep its
    /// cursor. Afterwards a test asserts instead of waiting: what could be delivered was
    /// delivered, and the subscribers' views are current. Returns each subscriber's last
    /// attempt, in configuration order, then each destination's. A sender whose subscriber hangs answers when its
    /// request times out, so a test with one does not settle.
    pub async fn settle(&self) -> Vec<(String, Attempt)> {
        self.drain().await;
        let names: Vec<&str> = (self.settings.subscriber.iter().map(|s| s.name.as_str()))
            .chain(self.settings.destination.iter().map(|d| d.name.as_str()))
            .collect();
        let mut settled = Vec::with_capacity(names.len());
        for name in names {
            let attempt = tokio::time::timeout(SETTLE_WITHIN, async {
                // Until this daemon leads, no sender runs.
                self.senders.started(name).await;
                loop {
                    match self.senders.try_now(name).await {
                        Ok(Attempt::Delivered { .. }) => {}
                        Ok(attempt) => return attempt,
                        Err(error) => panic!("subscriber {name}: {error}"),
                    }
                }
            })
            .await
            .unwrap_or_else(|_| {
                panic!("subscriber {name} did not settle within {SETTLE_WITHIN:?}")
            });
            settled.push((name.to_owned(), attempt));
        }
        settled
    }

    /// Stops the daemon cleanly and starts it again on the same database and settings (new
    /// ports).
    pub async fn restart(mut self) -> TestApp {
        self.shutdown.cancel();
        (&mut self.task).await.expect("join").expect("clean stop");
        let application = Application::build(self.settings.clone())
            .await
            .expect("build");
        self.addr = application.ingest_addr();
        self.admin_addr = application.admin_addr();
        self.senders = application.senders();
        self.metrics = application.metrics();
        self.shutdown = CancellationToken::new();
        self.task = tokio::spawn(application.run_until_stopped(self.shutdown.clone()));
        self
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("join").expect("clean stop");
    }

    /// A second daemon on this app's database (a replica, on PostgreSQL), named `name`.
    pub async fn replica(&self, name: &str) -> Replica {
        let mut settings = self.settings.clone();
        settings.replica.name = name.into();
        let application = Application::build(settings).await.expect("build");
        let shutdown = CancellationToken::new();
        Replica {
            addr: application.ingest_addr(),
            admin_addr: application.admin_addr(),
            task: tokio::spawn(application.run_until_stopped(shutdown.clone())),
            shutdown,
        }
    }
}

/// Another daemon on a test app's database (see [`TestApp::replica`]).
pub struct Replica {
    pub addr: SocketAddr,
    pub admin_addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Replica {
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.expect("join").expect("clean stop");
    }
}

/// A consent event with a given id.
pub fn consent_event(id: &str, phone: &str, opted_out: bool) -> String {
    serde_json::json!({
        "type": "consentUpdate-v1",
        "id": id,
        "createdAt": "2026-11-21T10:00:00Z",
        "data": {"organizationId": "org_1", "phoneNumber": phone, "globalOptedOut": opted_out}
    })
    .to_string()
}

/// The admin token tests configure with [`with_admin_token`].
pub const ADMIN_TOKEN: &str = "admin-token-0123";

/// Configures [`ADMIN_TOKEN`] as the one admin token.
pub fn with_admin_token(settings: &mut Settings) {
    settings.admin.tokens = vec![SecretString::from(ADMIN_TOKEN)];
}

impl TestApp {
    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{}", self.admin_addr, path)
    }

    /// GET on the admin listener with [`ADMIN_TOKEN`].
    pub async fn admin_get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(self.admin_url(path))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("admin request")
    }

    /// POST of a JSON body on the admin listener with [`ADMIN_TOKEN`].
    pub async fn admin_post(&self, path: &str, body: &serde_json::Value) -> reqwest::Response {
        self.http
            .post(self.admin_url(path))
            .bearer_auth(ADMIN_TOKEN)
            .json(body)
            .send()
            .await
            .expect("admin request")
    }
}

/// The account named `name`.
pub fn account(name: &str) -> outreach_sync::model::AccountId {
    outreach_sync::model::AccountId::new(name).expect("an account's name")
}

/// The account `name` as `settings` serve it.
pub fn served(settings: &Settings, name: &str) -> outreach_sync::settings::Account {
    settings
        .accounts()
        .expect("the accounts")
        .into_iter()
        .find(|account| account.id == *name)
        .expect("an account served")
}
