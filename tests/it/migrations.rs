//! Upgrading a database that holds data: every migration after the first release keeps what
//! is there, on a real SQLite file (and on PostgreSQL where a migration rebuilds a table).

use chrono::{TimeZone, Utc};
use outreach_sync::apply;
use outreach_sync::model::{ConsentObservation, KeptEvidence, Source};
use outreach_sync::store::{ApplyTx as _, Pool};
use sqlx::Connection as _;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

use crate::common::{Backend, on_both_backends};
use crate::postgres::TestDatabase;

/// The migrations a database had before `fewer_indexes_by_number`.
const BEFORE: i64 = 20261121000005;

/// The migrations of `backend`'s folder before `version`, as the earlier release had them:
/// copied as files into `into`, for a migrator of their own.
fn migrations_before(backend: &str, version: i64, into: &std::path::Path) -> std::path::PathBuf {
    std::fs::create_dir(into).unwrap();
    let folder = crate::repository(&format!("migrations/{backend}"));
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let number: i64 = name.split('_').next().unwrap().parse().unwrap();
        if number < version {
            std::fs::copy(&path, into.join(&name)).unwrap();
        }
    }
    into.to_path_buf()
}

/// A SQLite database in `dir` migrated with the migrations before `version` only, as the
/// earlier release left it, with a pool of `connections`.
async fn database_before(
    dir: &std::path::Path,
    version: i64,
    connections: u32,
) -> sqlx::SqlitePool {
    let old = migrations_before("sqlite", version, &dir.join("migrations"));
    let options = SqliteConnectOptions::new()
        .filename(dir.join("old.db"))
        .create_if_missing(true);
    let pool = SqlitePoolOptions::new()
        .max_connections(connections)
        .connect_with(options)
        .await
        .unwrap();
    sqlx::migrate::Migrator::new(old.as_path())
        .await
        .unwrap()
        .run(&pool)
        .await
        .unwrap();
    pool
}

/// The migration that lets the ledger take source `import`.
const IMPORT_SOURCE: i64 = 20261126200001;

#[tokio::test]
async fn a_connection_opened_before_the_import_source_was_allowed_takes_it_after() {
    let dir = tempfile::tempdir().unwrap();
    let pool = database_before(dir.path(), IMPORT_SOURCE, 2).await;
    // A connection that read the old schema, held while the migration runs on the other.
    let mut early = pool.acquire().await.unwrap();
    let refused = sqlx::query(
        "INSERT INTO consent_state (organization_id, phone_number, lead_id, opted_out, changed_at, source, seq)
         VALUES ('o', '+1555', NULL, 1, '2026-11-20T10:00:00.000Z', 'import', 1)",
    )
    .execute(&mut *early)
    .await;
    assert!(refused.is_err(), "the old schema refuses 'import'");
    // The migrations up to the last that kept a CHECK on `source`.
    let checked = migrations_before(
        "sqlite",
        SOURCE_CHECKED_BY_CODE,
        &dir.path().join("checked"),
    );
    sqlx::migrate::Migrator::new(checked.as_path())
        .await
        .unwrap()
        .run(&pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO consent_state (organization_id, phone_number, lead_id, opted_out, changed_at, source, seq)
         VALUES ('o', '+1555', NULL, 1, '2026-11-20T10:00:00.000Z', 'import', 1)",
    )
    .execute(&mut *early)
    .await
    .expect("the connection sees the wider check");
    let still_checked = sqlx::query(
        "INSERT INTO consent_state (organization_id, phone_number, lead_id, opted_out, changed_at, source, seq)
         VALUES ('o', '+1556', NULL, 1, '2026-11-20T10:00:00.000Z', 'carrier pigeon', 1)",
    )
    .execute(&mut *early)
    .await;
    assert!(
        still_checked.is_err(),
        "the check still holds for other words"
    );
    let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut *early)
        .await
        .unwrap();
    assert_eq!(integrity, "ok");
}

#[tokio::test]
async fn a_database_from_before_the_consent_key_change_keeps_its_consent_and_applies_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let pool = database_before(dir.path(), BEFORE, 1).await;
    sqlx::raw_sql(
        "INSERT INTO ledger (seq, organization_id, lead_id, phone_number, opted_out, occurred_at,
                             recorded_at, source, event_ref)
         VALUES (1, 'o1', 'lead_1', '+1555', 1, '2026-11-20T10:00:00.000Z',
                 '2026-11-20T10:00:01.000Z', 'webhook', 'event:evt_1'),
                (2, 'o2', NULL, '+1555', 0, '2026-11-20T11:00:00.000Z',
                 '2026-11-20T11:00:01.000Z', 'reconcile', 'reconcile:p:lead_2');
         INSERT INTO consent_state VALUES
                ('o1', '+1555', 'lead_1', 1, '2026-11-20T10:00:00.000Z', 'webhook', 1),
                ('o2', '+1555', NULL, 0, '2026-11-20T11:00:00.000Z', 'reconcile', 2);",
    )
    .execute(&pool)
    .await
    .unwrap();

    // As `migrate` and `serve` do: the migrations, then the chain of the older entries.
    outreach_sync::store::migrate(&pool).await.unwrap();

    let current: Vec<(String, Option<String>, String, bool, String)> = sqlx::query_as(
        "SELECT organization_id, lead_id, phone_number, opted_out, source
         FROM consent_current ORDER BY organization_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        current,
        vec![
            (
                "o1".into(),
                Some("lead_1".into()),
                "+1555".into(),
                true,
                "webhook".into()
            ),
            ("o2".into(), None, "+1555".into(), false, "reconcile".into()),
        ]
    );
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND name IN ('leads_by_phone', 'consent_state_by_phone')",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(indexes.is_empty(), "{indexes:?}");

    // Both holders of the number are found, and a newer event updates the stored pair.
    let mut conn = pool.acquire().await.unwrap();
    let holders = conn
        .holders_of(
            &outreach_sync::model::AccountId::default_account(),
            &["+1555"],
        )
        .await
        .unwrap();
    assert_eq!(holders["+1555"].len(), 2);
    let mut tx = conn.begin().await.unwrap();
    let applied = apply::consent(
        &mut *tx,
        &outreach_sync::model::AccountId::default_account(),
        &[ConsentObservation {
            organization_id: "o2".into(),
            phone_number: "+1555".into(),
            lead_id: Some("lead_2".into()),
            opted_out: true,
            occurred_at: Utc.with_ymd_and_hms(2026, 11, 21, 9, 0, 0).unwrap(),
            source: Source::Webhook,
            event_ref: "event:evt_3".into(),
            tag_id: None,
            reason: None,
            evidence: None,
        }],
        Utc::now(),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    drop(conn);
    assert!(applied[0].current);
    let (opted_out, lead, seq): (bool, Option<String>, i64) = sqlx::query_as(
        "SELECT opted_out, lead_id, seq FROM consent_state
         WHERE organization_id = 'o2' AND phone_number = '+1555'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((opted_out, lead.as_deref(), seq), (true, Some("lead_2"), 3));
    // The older entries were given their hashes, and the new one follows them.
    let head = outreach_sync::ledger::chain::verify(&pool)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(head.seq, 3);
}

/// The migration after which `source` is checked by the code alone (no CHECK in SQL).
const SOURCE_CHECKED_BY_CODE: i64 = 20261204100001;

/// The migrations before `version` of the backend applied to a fresh database: a SQLite
/// file in `dir`, or a PostgreSQL database of its own (`None` without a test server).
async fn backend_before(
    backend: Backend,
    dir: &std::path::Path,
    version: i64,
) -> Option<(Pool, Option<TestDatabase>)> {
    match backend {
        Backend::Sqlite => Some((database_before(dir, version, 2).await.into(), None)),
        Backend::Postgres => {
            let database = TestDatabase::create().await?;
            let pool = database.pool().await;
            let old = migrations_before("postgres", version, &dir.join("migrations"));
            sqlx::migrate::Migrator::new(old.as_path())
                .await
                .unwrap()
                .run(&pool)
                .await
                .unwrap();
            Some((pool.into(), Some(database)))
        }
    }
}

/// Every pending migration, as `migrate` and `serve` run them.
async fn migrate_all(pool: &Pool) {
    match pool {
        Pool::Sqlite(pool) => outreach_sync::store::migrate(pool).await.unwrap(),
        Pool::Postgres(pool) => outreach_sync::store::POSTGRES_MIGRATOR
            .run(pool)
            .await
            .unwrap(),
    }
}

async fn execute(pool: &Pool, sql: &str) -> Result<(), sqlx::Error> {
    match pool {
        Pool::Sqlite(pool) => sqlx::raw_sql(sql).execute(pool).await.map(drop),
        Pool::Postgres(pool) => sqlx::raw_sql(sql).execute(pool).await.map(drop),
    }
}

/// Each row `sql` selects, its columns as text (NULL as `None`), in the query's order.
async fn text_rows(pool: &Pool, sql: &str) -> Vec<Vec<Option<String>>> {
    use sqlx::Row as _;
    match pool {
        Pool::Sqlite(pool) => sqlx::query(sql)
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|row| (0..row.len()).map(|i| row.get(i)).collect())
            .collect(),
        Pool::Postgres(pool) => sqlx::query(sql)
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|row| (0..row.len()).map(|i| row.get(i)).collect())
            .collect(),
    }
}

/// Every column of every ledger entry and consent state, as text.
async fn ledger_and_states(pool: &Pool) -> (Vec<Vec<Option<String>>>, Vec<Vec<Option<String>>>) {
    let ledger = text_rows(
        pool,
        "SELECT CAST(seq AS TEXT), organization_id, lead_id, phone_number,
                CAST(opted_out AS TEXT), CAST(occurred_at AS TEXT), CAST(recorded_at AS TEXT),
                source, event_ref, CAST(superseded AS TEXT), tag_id, reason, hash,
                CAST(evidence AS TEXT), account_id
         FROM ledger ORDER BY seq",
    )
    .await;
    let states = text_rows(
        pool,
        "SELECT organization_id, phone_number, lead_id, CAST(opted_out AS TEXT),
                CAST(changed_at AS TEXT), source, CAST(seq AS TEXT), account_id,
                CAST(rank_at AS TEXT)
         FROM consent_state ORDER BY phone_number, organization_id, account_id",
    )
    .await;
    (ledger, states)
}

/// Observations of every source the old CHECK listed, applied in one transaction.
async fn record_every_source(pool: &Pool, day: u32) {
    let sources = [
        Source::Webhook,
        Source::Reconcile,
        Source::Local,
        Source::Import,
        Source::Van,
        Source::ActionNetwork,
        Source::Twilio,
    ];
    let observations: Vec<ConsentObservation> = sources
        .iter()
        .enumerate()
        .map(|(i, &source)| ConsentObservation {
            organization_id: format!("org_{}", i % 2),
            phone_number: format!("+1555000{day:02}{i:02}"),
            lead_id: (i % 3 == 0).then(|| format!("lead_{day}_{i}")),
            opted_out: i % 2 == 0,
            occurred_at: Utc.with_ymd_and_hms(2026, 11, day, 10, 0, 0).unwrap(),
            source,
            event_ref: format!("test:{day}:{i}"),
            tag_id: None,
            reason: Some(format!("said \"{source}\"")),
            evidence: (source == Source::Import).then(|| KeptEvidence::Import {
                file: "list.csv".into(),
                sha256: "00".repeat(32),
                line: i as u64,
                actor: "test".into(),
                reason: None,
            }),
        })
        .collect();
    let account = outreach_sync::model::AccountId::default_account();
    let mut tx = pool.begin_write().await.unwrap();
    let applied = apply::consent(&mut tx, &account, &observations, Utc::now())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(applied.len(), sources.len());
}

on_both_backends!(a_database_keeps_its_ledger_and_states_when_the_source_check_goes);
async fn a_database_keeps_its_ledger_and_states_when_the_source_check_goes(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let Some((pool, database)) = backend_before(backend, dir.path(), SOURCE_CHECKED_BY_CODE).await
    else {
        return;
    };
    record_every_source(&pool, 20).await;
    let before = ledger_and_states(&pool).await;
    let head_before = outreach_sync::ledger::chain::verify(&pool)
        .await
        .unwrap()
        .expect("an intact chain before");
    assert_eq!(before.0.len(), 7);
    assert_eq!(before.1.len(), 7);
    let refused = "INSERT INTO consent_state
                          (organization_id, phone_number, lead_id, opted_out, changed_at, source, seq)
                   VALUES ('o', '+1999', NULL, TRUE, '2026-11-20T10:00:00.000Z', 'carrier_pigeon', 1)";
    assert!(
        execute(&pool, refused).await.is_err(),
        "the CHECK holds before"
    );

    migrate_all(&pool).await;

    // Every row as it was, and the chain with the same head.
    assert_eq!(ledger_and_states(&pool).await, before);
    let head = outreach_sync::ledger::chain::verify(&pool)
        .await
        .unwrap()
        .expect("an intact chain after");
    assert_eq!(head, head_before);
    if let Pool::Sqlite(sqlite) = &pool {
        let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(sqlite)
            .await
            .unwrap();
        assert_eq!(integrity, "ok");
    }
    // The ledger is still append-only, and the next entries follow on from the chain.
    assert!(execute(&pool, "DELETE FROM ledger").await.is_err());
    assert!(
        execute(&pool, "UPDATE ledger SET opted_out = NOT opted_out")
            .await
            .is_err()
    );
    record_every_source(&pool, 21).await;
    let head = outreach_sync::ledger::chain::verify(&pool)
        .await
        .unwrap()
        .expect("an intact chain with new entries");
    assert_eq!(head.seq, head_before.seq + 7);
    let views = text_rows(&pool, "SELECT source FROM consent_current ORDER BY source").await;
    assert_eq!(views.len(), 14);
    let views = text_rows(&pool, "SELECT source FROM consent_ledger").await;
    assert_eq!(views.len(), 14);

    // A word outside the old list is the code's to refuse: SQL takes it, reading it back
    // through the daemon is an error that names it.
    execute(&pool, refused)
        .await
        .expect("no CHECK on consent_state.source");
    let seq = head.seq + 1;
    execute(
        &pool,
        &format!(
            "INSERT INTO ledger (seq, organization_id, lead_id, phone_number, opted_out,
                                 occurred_at, recorded_at, source, event_ref, superseded, hash)
             VALUES ({seq}, 'o', NULL, '+1999', TRUE, '2026-11-20T10:00:00.000Z',
                     '2026-11-20T10:00:01.000Z', 'carrier_pigeon', 'sql:1', FALSE, 'x')"
        ),
    )
    .await
    .expect("no CHECK on ledger.source");
    let refused = outreach_sync::ledger::chain::verify(&pool)
        .await
        .expect_err("an unknown source is not read as one");
    let message = refused.to_string();
    assert!(
        message.contains("unknown source") && message.contains("carrier_pigeon"),
        "{message}"
    );

    match pool {
        Pool::Sqlite(pool) => pool.close().await,
        Pool::Postgres(pool) => pool.close().await,
    }
    if let Some(database) = database {
        database.drop().await;
    }
}

/// The first migration after which none edits the schema's text by hand.
const LAST_WRITABLE_SCHEMA: i64 = 20261203100003;

#[test]
fn no_migration_after_the_source_check_writes_the_schema_by_hand() {
    let mut offending = Vec::new();
    for backend in ["sqlite", "postgres"] {
        let folder = crate::repository(&format!("migrations/{backend}"));
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let number: i64 = name.split('_').next().unwrap().parse().unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            if number > LAST_WRITABLE_SCHEMA && text.to_lowercase().contains("writable_schema") {
                offending.push(format!("{backend}/{name}"));
            }
        }
    }
    assert!(
        offending.is_empty(),
        "rebuild the table instead of editing sqlite_schema: {offending:?}"
    );
}
