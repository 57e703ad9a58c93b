//! Upgrading a database that holds data: every migration after the first release keeps what
//! is there, on a real SQLite file.

use chrono::{TimeZone, Utc};
use outreach_sync::apply;
use outreach_sync::model::{ConsentObservation, Source};
use outreach_sync::store::ApplyTx as _;
use sqlx::Connection as _;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

/// The migrations a database had before `fewer_indexes_by_number`.
const BEFORE: i64 = 20261121000005;

/// A SQLite database in `dir` migrated with the migrations before `version` only, as the
/// earlier release left it, with a pool of `connections`.
async fn database_before(
    dir: &std::path::Path,
    version: i64,
    connections: u32,
) -> sqlx::SqlitePool {
    // The migrations of the earlier release, as files, for a migrator of their own.
    let old = dir.join("migrations");
    std::fs::create_dir(&old).unwrap();
    for entry in std::fs::read_dir(crate::repository("migrations/sqlite")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let number: i64 = name.split('_').next().unwrap().parse().unwrap();
        if number < version {
            std::fs::copy(&path, old.join(&name)).unwrap();
        }
    }
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
    outreach_sync::store::migrate(&pool).await.unwrap();
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
