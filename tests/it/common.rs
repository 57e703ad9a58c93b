//! The daemon started in-process on loopback with a fresh SQLite file, for integration tests.
#![allow(dead_code)]

use std::net::SocketAddr;

use outreach_sync::app::Application;
use outreach_sync::outbox::OutboxState;
use outreach_sync::settings::Settings;
use outreach_sync::signature::{Key, SignatureFormat, sign};
use outreach_sync::worker::{Outcome, Worker};
use secrecy::SecretString;
use sqlx::SqlitePool;
use tokio_util::sync::CancellationToken;

pub const SECRET: &str = "test-secret-0123";

pub struct TestApp {
    pub addr: SocketAddr,
    /// The admin listener.
    pub admin_addr: SocketAddr,
    pub settings: Settings,
    pub pool: SqlitePool,
    pub http: reqwest::Client,
    pub dir: tempfile::TempDir,
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

pub async fn spawn_app(configure: impl FnOnce(&mut Settings)) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut settings = test_settings(dir.path());
    configure(&mut settings);
    settings.validate().expect("valid test settings");
    let application = Application::build(settings.clone()).await.expect("build");
    let addr = application.ingest_addr();
    let admin_addr = application.admin_addr();
    let pool = SqlitePool::connect(&settings.database.url)
        .await
        .expect("pool");
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(application.run_until_stopped(shutdown.clone()));
    TestApp {
        addr,
        admin_addr,
        settings,
        pool,
        http: reqwest::Client::new(),
        dir,
        shutdown,
        task,
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
    pub async fn post_signed(&self, body: &str) -> reqwest::Response {
        let headers = self.sign_with(SECRET, body.as_bytes());
        self.post_with(body, &headers).await
    }

    pub async fn outbox_rows(&self) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM outbox")
            .fetch_one(&self.pool)
            .await
            .expect("count")
    }

    /// Applies everything committed to the outbox so far, as the daemon's worker would, and
    /// returns what it did: a test waits for background work by doing it.
    pub async fn drain(&self) -> Outcome {
        let state = std::sync::Arc::new(OutboxState::default());
        Worker::new(self.pool.clone(), state, self.settings.consent.account_sync)
            .drain()
            .await
            .expect("drain the outbox")
    }

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
