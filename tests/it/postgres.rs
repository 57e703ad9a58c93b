//! The PostgreSQL schema on a real server: applied once by replicas starting together, the
//! stable views with the same columns as on SQLite, the ledger append-only, and its seqs
//! handed out in commit order.
//!
//! The server comes from `OUTREACH_SYNC_TEST_POSTGRES_URL` (`.ci/run` makes sure there is
//! one); without it these tests say so on the terminal and pass without running. Each test
//! works in a database of its own, dropped at the end.

use std::io::Write as _;
use std::str::FromStr as _;
use std::sync::Once;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection as _, PgConnection, PgPool};

/// The variable naming the test server.
pub const SERVER_VARIABLE: &str = "OUTREACH_SYNC_TEST_POSTGRES_URL";

/// A database of its own on the test server, dropped with it.
pub struct TestDatabase {
    server: PgConnectOptions,
    pub name: String,
    /// The database's URL, for `database.url`.
    pub url: String,
    pub options: PgConnectOptions,
}

impl TestDatabase {
    /// A fresh database, or `None` (said once on the terminal) when no server is given.
    pub async fn create() -> Option<Self> {
        let Ok(url) = std::env::var(SERVER_VARIABLE) else {
            static SKIPPED: Once = Once::new();
            SKIPPED.call_once(|| {
                // Straight to the terminal: the test harness would swallow a print.
                let _ = writeln!(
                    std::io::stderr(),
                    "\nPostgreSQL tests SKIPPED: {SERVER_VARIABLE} is not set (e.g. \
                     postgres://postgres@127.0.0.1:5432/test); only SQLite was tested.\n"
                );
            });
            return None;
        };
        let server = PgConnectOptions::from_str(&url).expect("a PostgreSQL URL");
        let name = format!("outreach_sync_test_{:016x}", rand::random::<u64>());
        let mut admin = PgConnection::connect_with(&server)
            .await
            .unwrap_or_else(|e| panic!("{SERVER_VARIABLE} is set but unreachable: {e}"));
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .expect("create the test database");
        let options = server.clone().database(&name);
        let (base, query) = url.split_once('?').unwrap_or((&url, ""));
        let (server_part, _) = base.rsplit_once('/').expect("postgres://HOST/DB");
        let url = match query {
            "" => format!("{server_part}/{name}"),
            query => format!("{server_part}/{name}?{query}"),
        };
        Some(Self {
            server,
            url,
            name,
            options,
        })
    }

    pub async fn pool(&self) -> PgPool {
        PgPoolOptions::new()
            .max_connections(4)
            .connect_with(self.options.clone())
            .await
            .expect("connect to the test database")
    }

    pub async fn drop(self) {
        let mut admin = PgConnection::connect_with(&self.server).await.unwrap();
        sqlx::query(&format!("DROP DATABASE {} WITH (FORCE)", self.name))
            .execute(&mut admin)
            .await
            .expect("drop the test database");
    }
}

#[tokio::test]
async fn replicas_starting_together_apply_the_postgres_migrations_once() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    let replicas = [
        database.pool().await,
        database.pool().await,
        database.pool().await,
    ];
    let runs = replicas
        .iter()
        .map(|pool| outreach_sync::store::POSTGRES_MIGRATOR.run(pool));
    for result in futures::future::join_all(runs).await {
        result.expect("every replica's migration succeeds");
    }
    let pool = &replicas[0];
    let (applied, succeeded): (i64, i64) =
        sqlx::query_as("SELECT COUNT(*), COUNT(*) FILTER (WHERE success) FROM _sqlx_migrations")
            .fetch_one(pool)
            .await
            .unwrap();
    let expected = outreach_sync::store::POSTGRES_MIGRATOR.iter().count() as i64;
    assert_eq!((applied, succeeded), (expected, expected));
    let heads: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM ledger_head")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(heads, 1, "the schema ran once");
    for pool in replicas {
        pool.close().await;
    }
    database.drop().await;
}

/// The columns of a view on SQLite, in order.
async fn sqlite_view_columns(view: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = outreach_sync::settings::Settings::default();
    settings.database.url = format!("sqlite://{}", dir.path().join("views.db").display());
    let pool = outreach_sync::store::pool(&settings).await.unwrap();
    outreach_sync::store::migrate(&pool).await.unwrap();
    let columns = sqlx::query_scalar(&format!("SELECT name FROM pragma_table_info('{view}')"))
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    columns
}

#[tokio::test]
async fn the_stable_views_have_the_same_columns_on_both_backends() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    let pool = database.pool().await;
    outreach_sync::store::POSTGRES_MIGRATOR
        .run(&pool)
        .await
        .unwrap();
    let contract: [(&str, &[&str]); 2] = [
        (
            "consent_current",
            &[
                "organization_id",
                "lead_id",
                "phone_number",
                "opted_out",
                "changed_at",
                "source",
                "account_id",
            ],
        ),
        (
            "consent_ledger",
            &[
                "seq",
                "organization_id",
                "lead_id",
                "phone_number",
                "opted_out",
                "occurred_at",
                "recorded_at",
                "source",
                "event_ref",
                "superseded",
                "account_id",
            ],
        ),
    ];
    for (view, columns) in contract {
        let on_postgres: Vec<String> = sqlx::query_scalar(
            "SELECT column_name::text FROM information_schema.columns
             WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position",
        )
        .bind(view)
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(on_postgres, columns, "{view} on PostgreSQL");
        assert_eq!(sqlite_view_columns(view).await, columns, "{view} on SQLite");
    }
    pool.close().await;
    database.drop().await;
}

#[tokio::test]
async fn the_ledger_on_postgres_refuses_changes_and_deletions() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    let pool = database.pool().await;
    outreach_sync::store::POSTGRES_MIGRATOR
        .run(&pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO ledger (seq, organization_id, phone_number, opted_out, occurred_at,
                             recorded_at, source, event_ref, hash)
         VALUES (1, 'org_1', '+15550000001', TRUE, now(), now(), 'webhook', 'event:evt_1',
                 repeat('0', 64))",
    )
    .execute(&pool)
    .await
    .unwrap();
    for change in [
        "UPDATE ledger SET opted_out = FALSE",
        "DELETE FROM ledger",
        "TRUNCATE ledger",
    ] {
        let error = sqlx::query(change).execute(&pool).await.unwrap_err();
        assert!(
            error.to_string().contains("append-only"),
            "{change}: {error}"
        );
    }
    let kept: bool = sqlx::query_scalar("SELECT opted_out FROM consent_ledger WHERE seq = 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(kept);
    pool.close().await;
    database.drop().await;
}

#[tokio::test]
async fn a_ledger_seq_is_taken_only_after_the_previous_appender_commits() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    let pool = database.pool().await;
    outreach_sync::store::POSTGRES_MIGRATOR
        .run(&pool)
        .await
        .unwrap();
    let take = "UPDATE ledger_head SET seq = seq + 1 RETURNING seq";
    let mut first = pool.begin().await.unwrap();
    let seq: i64 = sqlx::query_scalar(take)
        .fetch_one(&mut *first)
        .await
        .unwrap();
    assert_eq!(seq, 1);
    // A second appender cannot take a seq while the first is open: it would wait (here it
    // gives up at once instead), so seq 2 can never become visible before seq 1.
    let mut second = pool.begin().await.unwrap();
    sqlx::query("SET LOCAL lock_timeout = '50ms'")
        .execute(&mut *second)
        .await
        .unwrap();
    let blocked = sqlx::query_scalar::<_, i64>(take)
        .fetch_one(&mut *second)
        .await
        .unwrap_err();
    assert!(blocked.to_string().contains("lock timeout"), "{blocked}");
    second.rollback().await.unwrap();
    first.commit().await.unwrap();
    let next: i64 = sqlx::query_scalar(take).fetch_one(&pool).await.unwrap();
    assert_eq!(next, 2, "gapless, in commit order");
    pool.close().await;
    database.drop().await;
}

/// The binary with `database.url` pointing at `url`.
fn command_on(url: &str, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_outreach-sync"))
        .args(args)
        .env("OUTREACH_SYNC__DATABASE__URL", url)
        .env("OUTREACH_SYNC__WEBHOOK__SECRETS", "unused-here")
        .output()
        .expect("run outreach-sync")
}

#[tokio::test]
async fn migrate_applies_the_postgres_schema_and_never_shows_the_password() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    let user = database.options.get_username().to_owned();
    let (host, port) = (database.options.get_host(), database.options.get_port());
    // Trust authentication takes any password: this one must not be shown.
    let url = format!("postgres://{user}:pa55word@{host}:{port}/{}", database.name);
    for _ in 0..2 {
        let migrated = command_on(&url, &["migrate"]);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&migrated.stdout),
            String::from_utf8_lossy(&migrated.stderr),
        );
        assert!(migrated.status.success(), "{stderr}");
        assert!(stdout.contains(":[redacted]@"), "{stdout}");
        assert!(!format!("{stdout}{stderr}").contains("pa55word"));
    }
    let pool = database.pool().await;
    let views: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.views
         WHERE table_name IN ('consent_current', 'consent_ledger')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(views, 2);

    // Every other command runs on it too, and never shows the password either.
    let status = command_on(&url, &["status"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&status.stdout),
        String::from_utf8_lossy(&status.stderr),
    );
    assert!(status.status.success(), "{stderr}");
    assert!(stdout.contains("ledger entries:        0"), "{stdout}");
    assert!(!format!("{stdout}{stderr}").contains("pa55word"));
    pool.close().await;
    database.drop().await;
}

/// `(organization, lead, number, opted out, time, source)` rows of a view, times as
/// RFC 3339 with milliseconds in UTC on both backends.
type ConsentRow = (String, Option<String>, String, bool, String, String);

const PG_TIME: &str = r#"'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'"#;

#[tokio::test]
async fn migrate_from_sqlite_moves_the_ledger_the_mirror_and_the_outbox_into_postgres() {
    use outreach_sync::client::ServiceClient;
    use outreach_sync::reconcile::{PassRequest, Reconciler};
    use outreach_sync_sandbox::{Sandbox, SandboxConfig};
    use tokio_util::sync::CancellationToken;

    let Some(database) = TestDatabase::create().await else {
        return;
    };
    // A SQLite database with a bit of everything: webhook and local consent, a message
    // status, a quarantined delivery, a pending push, a reconciled mirror.
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 30,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let app = crate::common::spawn_app(crate::common::with_admin_token).await;
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    Reconciler::new(app.pool.clone(), client, &app.settings.reconcile)
        .run_pass(&PassRequest::default(), &CancellationToken::new())
        .await
        .unwrap();
    for (id, phone, out) in [
        ("evt_1", "+15550000001", true),
        ("evt_2", "+15550000002", false),
    ] {
        let body = crate::common::consent_event(id, phone, out);
        assert_eq!(app.post_signed(&body).await.status(), 200);
    }
    let status = serde_json::json!({"type": "messageStatus-v1", "id": "evt_m", "createdAt": "2026-11-21T10:00:00Z",
        "data": {"id": "msg_1", "threadId": "thr_1", "status": "delivered", "type": "SMS",
                 "createdAt": "2026-11-21T09:59:00Z", "organizationId": "org_1"}});
    assert_eq!(app.post_signed(&status.to_string()).await.status(), 200);
    let unknown = r#"{"type": "somethingNew-v9", "id": "evt_new", "data": {}}"#;
    assert_eq!(app.post_signed(unknown).await.status(), 200);
    let change = serde_json::json!({"phoneNumber": "+15550000003", "organizationId": "org_1", "optedOut": true});
    assert_eq!(app.admin_post("/v1/consent", &change).await.status(), 202);
    app.drain().await;
    let sqlite_url = app.settings.database.url.clone();
    let sqlite = app.sqlite().clone();
    let sqlite_consent: Vec<ConsentRow> = sqlx::query_as(
        "SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source
         FROM consent_current ORDER BY phone_number, organization_id",
    )
    .fetch_all(&sqlite)
    .await
    .unwrap();
    let sqlite_ledger: Vec<(i64, String, String, bool, String, String)> = sqlx::query_as(
        "SELECT seq, phone_number, event_ref, opted_out, occurred_at, source
         FROM consent_ledger ORDER BY seq",
    )
    .fetch_all(&sqlite)
    .await
    .unwrap();
    let sqlite_bodies: Vec<(i64, Vec<u8>, String)> =
        sqlx::query_as("SELECT id, body, state FROM outbox ORDER BY id")
            .fetch_all(&sqlite)
            .await
            .unwrap();
    assert!(
        sqlite_consent.len() > 3 && sqlite_bodies.len() == 4,
        "{} consent rows, {} deliveries",
        sqlite_consent.len(),
        sqlite_bodies.len()
    );

    let url = format!(
        "postgres://{}@{}:{}/{}",
        database.options.get_username(),
        database.options.get_host(),
        database.options.get_port(),
        database.name
    );
    let copied = command_on(&url, &["migrate", "--from", &sqlite_url]);
    let stdout = String::from_utf8_lossy(&copied.stdout);
    assert!(
        copied.status.success(),
        "{}",
        String::from_utf8_lossy(&copied.stderr)
    );
    assert!(stdout.contains("ledger"), "{stdout}");

    let pool = database.pool().await;
    let pg_consent: Vec<ConsentRow> = sqlx::query_as(&format!(
        "SELECT organization_id, lead_id, phone_number, opted_out,
                to_char(changed_at AT TIME ZONE 'UTC', {PG_TIME}), source
         FROM consent_current ORDER BY phone_number COLLATE \"C\", organization_id COLLATE \"C\""
    ))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(pg_consent, sqlite_consent);
    let pg_ledger: Vec<(i64, String, String, bool, String, String)> = sqlx::query_as(&format!(
        "SELECT seq, phone_number, event_ref, opted_out,
                to_char(occurred_at AT TIME ZONE 'UTC', {PG_TIME}), source
         FROM consent_ledger ORDER BY seq"
    ))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(pg_ledger, sqlite_ledger);
    let pg_bodies: Vec<(i64, Vec<u8>, String)> =
        sqlx::query_as("SELECT id, body, state FROM outbox ORDER BY id")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        pg_bodies, sqlite_bodies,
        "the exact bytes received, and their states"
    );
    let head: i64 = sqlx::query_scalar("SELECT seq FROM ledger_head")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        head,
        sqlite_ledger.last().unwrap().0,
        "new entries continue the seqs"
    );
    // The chain comes across whole, and new entries continue it.
    let sqlite_head = outreach_sync::ledger::chain::verify(&sqlite)
        .await
        .unwrap()
        .unwrap();
    let pg_head = outreach_sync::ledger::chain::verify(&pool)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pg_head, sqlite_head);
    let stored: String = sqlx::query_scalar("SELECT hash FROM ledger_head")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, pg_head.hash);
    let (leads, pushes, passes): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM leads), (SELECT COUNT(*) FROM pushes),
                (SELECT COUNT(*) FROM reconcile_passes)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((leads, pushes, passes), (30, 1, 1));
    // The next delivery gets the next outbox id.
    let next: i64 = sqlx::query_scalar(
        "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index)
         VALUES ('event:next', now(), '\\x7b7d', '{}', 0) RETURNING id",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(next, sqlite_bodies.last().unwrap().0 + 1);

    // A second copy would double the ledger: refused, nothing written.
    let again = command_on(&url, &["migrate", "--from", &sqlite_url]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("empty database only"), "{stderr}");

    pool.close().await;
    app.stop().await;
    sandbox.shutdown().await;
    database.drop().await;
}
