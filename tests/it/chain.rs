//! The ledger's hash chain: written with every entry on both backends, shown by `status`,
//! checked by `ledger verify`, and computed for the entries of databases from before it.

use outreach_sync::ledger::chain;
use serde_json::Value;

use crate::common::{Backend, consent_event, on_both_backends, spawn_app_on, with_admin_token};
use crate::postgres::TestDatabase;

on_both_backends!(the_chain_holds_until_an_entry_is_changed_by_hand_and_then_names_it);
async fn the_chain_holds_until_an_entry_is_changed_by_hand_and_then_names_it(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    for (i, opted_out) in [true, false, true].into_iter().enumerate() {
        let body = consent_event(&format!("evt_{i}"), &format!("+1555000000{i}"), opted_out);
        assert_eq!(app.post_signed(&body).await.status(), 200);
    }
    app.drain().await;
    let local = serde_json::json!({"phoneNumber": "+15550000009", "organizationId": "org_1",
                                   "optedOut": true, "reason": "asked by \"phone\"\né"});
    assert_eq!(app.admin_post("/v1/consent", &local).await.status(), 202);

    let head = chain::verify(&app.pool)
        .await
        .unwrap()
        .expect("an intact chain");
    assert_eq!(head.seq, 4);
    let status: Value = app.admin_get("/v1/status").await.json().await.unwrap();
    assert_eq!(status["chainHead"]["seq"], 4);
    assert_eq!(status["chainHead"]["hash"], head.hash.as_str());

    // Someone with the database's keys sets the triggers aside and flips an entry's consent
    // (which entry is seq 3 depends on the order the worker loops applied them in).
    let edit = match backend {
        Backend::Sqlite => {
            "DROP TRIGGER ledger_is_append_only_update;
             UPDATE ledger SET opted_out = NOT opted_out WHERE seq = 3;"
        }
        Backend::Postgres => {
            "ALTER TABLE ledger DISABLE TRIGGER ledger_is_append_only_update;
             UPDATE ledger SET opted_out = NOT opted_out WHERE seq = 3;"
        }
    };
    app.execute(edit).await;
    let broken = chain::verify(&app.pool).await.unwrap().unwrap_err();
    assert_eq!(broken.seq, 3, "{broken}");
    assert!(broken.to_string().contains("seq 3"), "{broken}");
    app.stop().await;
}

/// The migrations PostgreSQL databases had before the chain.
const BEFORE_CHAIN: i64 = 20261125200001;

#[tokio::test]
async fn a_postgres_ledger_from_before_the_chain_is_chained_by_its_migration() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(crate::repository("migrations/postgres")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let version: i64 = name.split('_').next().unwrap().parse().unwrap();
        if version < BEFORE_CHAIN {
            std::fs::copy(&path, dir.path().join(&name)).unwrap();
        }
    }
    let pool = database.pool().await;
    sqlx::migrate::Migrator::new(dir.path())
        .await
        .unwrap()
        .run(&pool)
        .await
        .unwrap();
    // Every kind of value the encoding must write as Rust does: nulls, quotes, a newline,
    // a control character, non-ASCII text, times with milliseconds.
    sqlx::raw_sql(
        "INSERT INTO ledger (seq, organization_id, lead_id, phone_number, opted_out, occurred_at,
                             recorded_at, source, event_ref, superseded, tag_id, reason)
         VALUES (1, 'o1', 'lead_1', '+1555', TRUE, '2026-11-20T10:00:00.123Z',
                 '2026-11-20T10:00:01.000Z', 'webhook', 'event:evt_1', FALSE, NULL, NULL),
                (2, 'o2', NULL, '+1555', FALSE, '2026-11-20T11:00:00Z',
                 '2026-11-20T11:00:01.999Z', 'local', 'local:1', TRUE, 'tag_9',
                 E'said \"stop\"\\n\\u0001 to Zoë / \\\\ done');
         UPDATE ledger_head SET seq = 2;",
    )
    .execute(&pool)
    .await
    .unwrap();

    outreach_sync::store::POSTGRES_MIGRATOR
        .run(&pool)
        .await
        .unwrap();

    let head = chain::verify(&pool)
        .await
        .unwrap()
        .expect("an intact chain");
    assert_eq!(head.seq, 2);
    // And the next entry, appended by the daemon's code, follows on from it.
    let stored: String = sqlx::query_scalar("SELECT hash FROM ledger_head")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, head.hash);
    pool.close().await;
    database.drop().await;
}

// Multi-threaded: appenders really run at once (on PostgreSQL, from several connections).
on_both_backends!(
    entries_appended_at_once_by_many_writers_still_form_one_chain_in_seq_order,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn entries_appended_at_once_by_many_writers_still_form_one_chain_in_seq_order(
    backend: Backend,
) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let writers = (0..8).map(|w| {
        let pool = app.pool.clone();
        tokio::spawn(async move {
            for i in 0..10 {
                let change = outreach_sync::apply::LocalChange {
                    account: outreach_sync::model::AccountId::default_account(),
                    organization_id: format!("org_{}", i % 3),
                    phone_number: format!("+1555{w:03}{i:04}"),
                    opted_out: i % 2 == 0,
                    tag_id: None,
                    reason: Some(format!("writer {w}")),
                    actor: "cli:test".into(),
                };
                outreach_sync::apply::record_local(&pool, &change, chrono::Utc::now())
                    .await
                    .expect("recorded");
            }
        })
    });
    let deliveries =
        (0..20).map(|i| consent_event(&format!("evt_{i}"), "+15550001234", i % 2 == 0));
    for body in deliveries {
        assert_eq!(app.post_signed(&body).await.status(), 200);
    }
    for writer in futures::future::join_all(writers).await {
        writer.expect("writer");
    }
    app.drain().await;
    let head = chain::verify(&app.pool)
        .await
        .unwrap()
        .expect("an intact chain");
    assert_eq!(head.seq, 100);
    app.stop().await;
}
