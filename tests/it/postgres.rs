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

use outreach_sync::db;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection as _, PgConnection, PgPool};

/// The variable naming the test server.
pub const SERVER_VARIABLE: &str = "OUTREACH_SYNC_TEST_POSTGRES_URL";

/// A database of its own on the test server, dropped with it.
pub struct TestDatabase {
    server: PgConnectOptions,
    pub name: String,
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
        Some(Self {
            server,
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
    let runs = replicas.iter().map(|pool| db::POSTGRES_MIGRATOR.run(pool));
    for result in futures::future::join_all(runs).await {
        result.expect("every replica's migration succeeds");
    }
    let pool = &replicas[0];
    let (applied, succeeded): (i64, i64) =
        sqlx::query_as("SELECT COUNT(*), COUNT(*) FILTER (WHERE success) FROM _sqlx_migrations")
            .fetch_one(pool)
            .await
            .unwrap();
    let expected = db::POSTGRES_MIGRATOR.iter().count() as i64;
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
    let pool = db::pool(&settings).await.unwrap();
    db::migrate(&pool).await.unwrap();
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
    db::POSTGRES_MIGRATOR.run(&pool).await.unwrap();
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
    db::POSTGRES_MIGRATOR.run(&pool).await.unwrap();
    sqlx::query(
        "INSERT INTO ledger (seq, organization_id, phone_number, opted_out, occurred_at,
                             recorded_at, source, event_ref)
         VALUES (1, 'org_1', '+15550000001', TRUE, now(), now(), 'webhook', 'event:evt_1')",
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
    db::POSTGRES_MIGRATOR.run(&pool).await.unwrap();
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

    // The rest of the commands do not run on PostgreSQL yet, and say so.
    let status = command_on(&url, &["status"]);
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert_eq!(status.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`database.url`") && !stderr.contains("pa55word"),
        "{stderr}"
    );
    pool.close().await;
    database.drop().await;
}
