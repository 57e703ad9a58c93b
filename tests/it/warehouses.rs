//! Warehouses: the ledger mirrored into a table a data team queries, an entry a row,
//! PostgreSQL on a second database of the test server (this file) and BigQuery on the
//! sandbox's stand-in (`warehouses/bigquery.rs`), with the destinations' cursor, backoff,
//! outcomes and commands.

use std::collections::BTreeMap;

use outreach_sync::settings::{DestinationSettings, SystemSettings};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::common::{Backend, TestApp, on_both_backends};
use crate::destinations::{campaign, view, writing_to};
use crate::postgres::TestDatabase;

mod bigquery;
mod changed;
mod process;

/// The warehouse's table in these tests.
const TABLE: &str = "consent_events";

/// A PostgreSQL warehouse at `url`, of `extra` keys beside `kind` (TOML).
pub(crate) fn postgres_warehouse(name: &str, url: &str, extra: &str) -> DestinationSettings {
    let system: SystemSettings =
        toml::from_str(&format!("kind = \"postgres\"\n{extra}")).expect("warehouse settings");
    let mut warehouse = DestinationSettings::new(name, system, "", url);
    warehouse.requests_per_second = Some(1_000);
    warehouse
}

/// The ledger as rows: seq to (number, opted out, source, hash, account).
type Ledger = BTreeMap<i64, (String, bool, String, Option<String>, String)>;

pub(crate) async fn ledger_rows(app: &TestApp) -> Ledger {
    let rows: Vec<(i64, String, bool, String, Option<String>, String)> = app
        .rows(
            "SELECT seq, phone_number, opted_out, source, hash, account_id FROM ledger
                 ORDER BY seq",
        )
        .await;
    rows.into_iter()
        .map(|(seq, phone, out, source, hash, account)| (seq, (phone, out, source, hash, account)))
        .collect()
}

/// The warehouse's table as the ledger's rows, and how many rows each seq has.
async fn warehouse_rows(warehouse: &PgPool) -> (Ledger, BTreeMap<i64, i64>) {
    let rows: Vec<(i64, String, bool, String, Option<String>, String)> = sqlx::query_as(&format!(
        "SELECT \"seq\", \"phoneNumber\", \"optedOut\", \"source\", \"entryHash\", \"accountId\"
             FROM {TABLE} ORDER BY \"seq\""
    ))
    .fetch_all(warehouse)
    .await
    .expect("the warehouse's rows");
    let mut copies = BTreeMap::new();
    let table = rows
        .into_iter()
        .map(|(seq, phone, out, source, hash, account)| {
            *copies.entry(seq).or_insert(0) += 1;
            (seq, (phone, out, source, hash, account))
        })
        .collect();
    (table, copies)
}

/// A database of its own for the warehouse, and a [`campaign`] on `backend`; `None` when
/// no PostgreSQL test server is given.
pub(crate) async fn warehouse_campaign(
    backend: Backend,
) -> Option<(TestDatabase, outreach_sync_sandbox::RunningSandbox, TestApp)> {
    let database = TestDatabase::create().await?;
    match campaign(backend).await {
        Some((sandbox, app)) => Some((database, sandbox, app)),
        None => {
            database.drop().await;
            None
        }
    }
}

/// Local changes through the admin API: `count` numbers opted out, the first two of them
/// opted in again after.
async fn local_changes(app: &TestApp, count: usize) {
    for i in 0..count {
        let change = json!({"phoneNumber": format!("+130355501{i:02}"), "organizationId": "org_1",
                            "optedOut": true});
        assert_eq!(app.admin_post("/v1/consent", &change).await.status(), 202);
    }
    for i in 0..2 {
        let change = json!({"phoneNumber": format!("+130355501{i:02}"), "organizationId": "org_1",
                            "optedOut": false});
        assert_eq!(app.admin_post("/v1/consent", &change).await.status(), 202);
    }
}

on_both_backends!(
    every_entry_opt_ins_too_reaches_the_postgres_warehouse_once_with_its_outcome,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn every_entry_opt_ins_too_reaches_the_postgres_warehouse_once_with_its_outcome(
    backend: Backend,
) {
    let Some((database, _sandbox, app)) = warehouse_campaign(backend).await else {
        return;
    };
    local_changes(&app, 6).await;
    // Batches of 4: a ledger of some tens of entries is several requests.
    let warehouse = postgres_warehouse("warehouse", &database.url, "batch = 4");
    let app = writing_to(app, vec![warehouse]).await;
    app.settle().await;
    let ledger = ledger_rows(&app).await;
    assert!(
        ledger.values().any(|(_, out, ..)| !out),
        "opt-ins are entries too"
    );
    let pool = database.pool().await;
    let (table, copies) = warehouse_rows(&pool).await;
    assert_eq!(
        table, ledger,
        "every entry is one row, as the ledger holds it"
    );
    assert!(copies.values().all(|c| *c == 1));
    assert!(
        table.values().all(|(.., hash, _)| hash.is_some()),
        "each row has its hash"
    );

    // Who recorded a local change is on its row.
    let actors: Vec<Option<String>> = sqlx::query_scalar(&format!(
        "SELECT \"actor\" FROM {TABLE} WHERE \"source\" = 'local'"
    ))
    .fetch_all(&pool)
    .await
    .expect("actors");
    assert!(
        !actors.is_empty() && actors.iter().all(|a| a.is_some()),
        "{actors:?}"
    );

    // The view: each number's current state, the opt-in after the opt-out.
    let current: Vec<(String, bool)> = sqlx::query_as(&format!(
        "SELECT \"phoneNumber\", \"optedOut\" FROM {TABLE}_current
             WHERE \"phoneNumber\" LIKE '+130355501%' ORDER BY \"phoneNumber\""
    ))
    .fetch_all(&pool)
    .await
    .expect("the view");
    assert_eq!(current.len(), 6, "{current:?}");
    assert_eq!(
        current.iter().filter(|(_, out)| *out).count(),
        4,
        "{current:?}"
    );

    // The destination's view and outcomes, as for any destination.
    let shown = view(&app, "warehouse").await;
    assert_eq!(shown["kind"], "postgres", "{shown}");
    assert_eq!(shown["state"], "active", "{shown}");
    assert_eq!(shown["sent"], ledger.len(), "{shown}");
    assert_eq!(shown["lagEntries"], 0, "{shown}");
    let metrics = app.metrics.render(Default::default());
    assert!(
        metrics.contains(&format!(
            "outreach_sync_destination_requests_total{{destination=\"warehouse\",outcome=\"sent\"}} {}",
            ledger.len()
        )),
        "{metrics}"
    );

    a_replay_sends_every_row_again_and_adds_none(&app, &pool, &ledger).await;
    pool.close().await;
    app.stop().await;
    database.drop().await;
}

/// A replay of the warehouse from its first entry: every row sent again (counted), the
/// table still each entry once.
async fn a_replay_sends_every_row_again_and_adds_none(
    app: &TestApp,
    pool: &PgPool,
    ledger: &Ledger,
) {
    // A replay sends every row again: the table still has each once.
    let replayed = app
        .admin_post("/v1/destinations/warehouse/replay", &json!({"fromSeq": 1}))
        .await;
    assert_eq!(replayed.status(), 200);
    app.settle().await;
    let (again, copies) = warehouse_rows(pool).await;
    assert_eq!(&again, ledger);
    assert!(copies.values().all(|c| *c == 1));
    let metrics = app.metrics.render(Default::default());
    assert!(
        metrics.contains(&format!(
            "outreach_sync_destination_requests_total{{destination=\"warehouse\",outcome=\"sent\"}} {}",
            2 * ledger.len()
        )),
        "the replay sent every row again: {metrics}"
    );
}

on_both_backends!(
    a_warehouse_starts_at_from_seq_and_takes_only_its_organizations,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_warehouse_starts_at_from_seq_and_takes_only_its_organizations(backend: Backend) {
    let Some((database, _sandbox, app)) = warehouse_campaign(backend).await else {
        return;
    };
    local_changes(&app, 4).await;
    for i in 0..3 {
        let elsewhere = json!({"phoneNumber": format!("+1555020{i:04}"), "organizationId": "org_other",
                               "optedOut": true});
        assert_eq!(
            app.admin_post("/v1/consent", &elsewhere).await.status(),
            202
        );
    }
    app.drain().await;
    let ledger = ledger_rows(&app).await;
    let from = ledger.keys().nth(3).copied().expect("entries");
    let mut warehouse =
        postgres_warehouse("warehouse", &database.url, &format!("from_seq = {from}"));
    warehouse.scope.organizations = vec!["org_1".into()];
    let app = writing_to(app, vec![warehouse]).await;
    app.settle().await;
    let organizations: Vec<(i64, String)> = app
        .rows("SELECT seq, organization_id FROM ledger ORDER BY seq")
        .await;
    let expected: Vec<i64> = organizations
        .iter()
        .filter(|(seq, org)| *seq >= from && org == "org_1")
        .map(|(seq, _)| *seq)
        .collect();
    let pool = database.pool().await;
    let (table, _) = warehouse_rows(&pool).await;
    assert_eq!(table.keys().copied().collect::<Vec<_>>(), expected);
    pool.close().await;
    app.stop().await;
    database.drop().await;
}

on_both_backends!(
    a_warehouse_table_of_other_columns_stops_the_destination_naming_the_column,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_warehouse_table_of_other_columns_stops_the_destination_naming_the_column(
    backend: Backend,
) {
    let Some((database, _sandbox, app)) = warehouse_campaign(backend).await else {
        return;
    };
    let pool = database.pool().await;
    sqlx::query(&format!(
        "CREATE TABLE {TABLE} (\"seq\" bigint PRIMARY KEY, \"optedOut\" text)"
    ))
    .execute(&pool)
    .await
    .expect("a table of the data team's");
    let warehouse = postgres_warehouse("warehouse", &database.url, "");
    let app = writing_to(app, vec![warehouse]).await;
    let http = outreach_sync::sender::http_client().expect("client");
    let checked =
        outreach_sync::sender::destinations::check(&app.settings.destination, None, &http)
            .await
            .expect("checked");
    let problem = checked[0].problem.clone().expect("a problem");
    assert!(problem.contains("no column `accountId`"), "{problem}");
    app.settle().await;
    let shown = view(&app, "warehouse").await;
    assert_eq!(shown["state"], "error", "{shown}");
    let error = shown["lastError"].as_str().unwrap_or_default();
    assert!(error.contains("no column `accountId`"), "{shown}");
    assert!(
        !error.contains(&database.url),
        "the URL is a secret: {error}"
    );
    let written: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {TABLE}"))
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(
        written, 0,
        "nothing is written into a table of other columns"
    );
    pool.close().await;
    app.stop().await;
    database.drop().await;
}

on_both_backends!(
    a_row_the_table_refuses_is_refused_alone_and_a_table_dropped_is_made_again,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_row_the_table_refuses_is_refused_alone_and_a_table_dropped_is_made_again(
    backend: Backend,
) {
    let Some((database, _sandbox, app)) = warehouse_campaign(backend).await else {
        return;
    };
    local_changes(&app, 3).await;
    app.drain().await;
    let pool = database.pool().await;
    // The data team's own rule on the table: one number is never written.
    let refused_number = "+13035550100";
    let app = writing_to(
        app,
        vec![postgres_warehouse("warehouse", &database.url, "batch = 4")],
    )
    .await;
    let http = outreach_sync::sender::http_client().expect("client");
    outreach_sync::sender::destinations::check(&app.settings.destination, None, &http)
        .await
        .expect("checked: the table is made");
    sqlx::query(&format!(
        "ALTER TABLE {TABLE} ADD CONSTRAINT not_this_one CHECK (\"phoneNumber\" <> '{refused_number}')"
    ))
    .execute(&pool)
    .await
    .expect("a constraint");
    app.settle().await;
    let ledger = ledger_rows(&app).await;
    let refused: Vec<i64> = ledger
        .iter()
        .filter(|(_, (phone, ..))| phone == refused_number)
        .map(|(seq, _)| *seq)
        .collect();
    assert!(!refused.is_empty());
    let (table, _) = warehouse_rows(&pool).await;
    assert_eq!(
        table.len() + refused.len(),
        ledger.len(),
        "only its rows are refused"
    );
    let listed = outcomes(&app, "warehouse").await;
    let refusals: Vec<&Value> = listed
        .iter()
        .filter(|o| o["outcome"] == "refused")
        .collect();
    assert_eq!(refusals.len(), refused.len(), "{listed:?}");
    let reason = refusals[0]["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("23514") && reason.contains("not_this_one"),
        "{reason}"
    );

    // The table dropped under it: made again, and what comes next written there.
    sqlx::query(&format!("DROP TABLE {TABLE} CASCADE"))
        .execute(&pool)
        .await
        .expect("drop");
    let later = json!({"phoneNumber": "+13035550199", "organizationId": "org_1", "optedOut": true});
    assert_eq!(app.admin_post("/v1/consent", &later).await.status(), 202);
    app.settle().await;
    app.settle().await;
    let (table, _) = warehouse_rows(&pool).await;
    assert!(
        table.values().any(|(phone, ..)| phone == "+13035550199"),
        "{table:?}"
    );
    assert_eq!(view(&app, "warehouse").await["state"], "active");
    pool.close().await;
    app.stop().await;
    database.drop().await;
}

/// What a test's outcome rows say: (seq, outcome, reason).
pub(crate) async fn outcomes(app: &TestApp, name: &str) -> Vec<Value> {
    let listed: Value = app
        .admin_get(&format!("/v1/destinations/{name}/outcomes"))
        .await
        .json()
        .await
        .expect("json");
    listed["items"].as_array().cloned().unwrap_or_default()
}
