//! A warehouse table changed under the daemon by its data team: renamed, its schema dropped
//! and made again, truncated (each found behind what was sent, made again or found empty,
//! and filled again from the first entry, the destination `refilling` meanwhile); a column
//! added `NOT NULL` or given another type (the destination stops as it would at start, and
//! nothing is refused for it: once mended and retried, every row is there).

use serde_json::{Value, json};
use sqlx::PgPool;

use super::{TABLE, ledger_rows, local_changes, postgres_warehouse, warehouse_campaign};
use crate::common::{Backend, TestApp, eventually, on_both_backends};
use crate::destinations::{view, writing_to};

const WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The seqs the table (of `table`, qualified) holds.
async fn seqs_in(pool: &PgPool, table: &str) -> Vec<i64> {
    sqlx::query_scalar(&format!("SELECT \"seq\" FROM {table} ORDER BY \"seq\""))
        .fetch_all(pool)
        .await
        .unwrap_or_default()
}

async fn ledger_seqs(app: &TestApp) -> Vec<i64> {
    ledger_rows(app).await.into_keys().collect()
}

async fn execute(pool: &PgPool, sql: &str) {
    sqlx::query(sql).execute(pool).await.expect(sql);
}

/// One more local opt-out, numbered `i`.
async fn one_more(app: &TestApp, i: usize) {
    let change = json!({"phoneNumber": format!("+130355502{i:02}"), "organizationId": "org_1",
                        "optedOut": true});
    assert_eq!(app.admin_post("/v1/consent", &change).await.status(), 202);
}

/// Waits until the table holds every entry of the ledger and the destination is active.
async fn whole(app: &TestApp, pool: &PgPool, table: &str) -> Value {
    eventually("the table holds every entry", WAIT, async || {
        app.settle().await;
        let shown = view(app, "warehouse").await;
        (seqs_in(pool, table).await == ledger_seqs(app).await && shown["state"] == "active")
            .then_some(shown)
    })
    .await
}

on_both_backends!(
    a_table_renamed_its_schema_remade_or_truncated_is_filled_again_from_the_first_entry,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_table_renamed_its_schema_remade_or_truncated_is_filled_again_from_the_first_entry(
    backend: Backend,
) {
    let Some((database, _sandbox, app)) = warehouse_campaign(backend).await else {
        return;
    };
    let pool = database.pool().await;
    execute(&pool, "CREATE SCHEMA analytics").await;
    let table = format!("analytics.{TABLE}");
    local_changes(&app, 6).await;
    let warehouse = postgres_warehouse(
        "warehouse",
        &database.url,
        "batch = 4\nschema = \"analytics\"",
    );
    let app = writing_to(app, vec![warehouse]).await;
    whole(&app, &pool, &table).await;
    let first = ledger_seqs(&app).await.len();

    // Renamed: the daemon makes the table again and fills it with every entry, not only
    // what comes after.
    execute(&pool, &format!("ALTER TABLE {table} RENAME TO {TABLE}_old")).await;
    one_more(&app, 1).await;
    let shown = whole(&app, &pool, &table).await;
    assert_eq!(seqs_in(&pool, &table).await.len(), first + 1, "{shown}");
    assert_eq!(app.metrics.destination_refills_counted("warehouse"), 1);

    // The schema dropped and made again, empty.
    execute(&pool, "DROP SCHEMA analytics CASCADE").await;
    execute(&pool, "CREATE SCHEMA analytics").await;
    one_more(&app, 2).await;
    whole(&app, &pool, &table).await;
    assert_eq!(app.metrics.destination_refills_counted("warehouse"), 2);

    // Truncated: found behind what was written at the next batch.
    execute(&pool, &format!("TRUNCATE {table}")).await;
    one_more(&app, 3).await;
    let shown = whole(&app, &pool, &table).await;
    assert_eq!(app.metrics.destination_refills_counted("warehouse"), 3);
    assert_eq!(shown["refused"], 0, "{shown}");
    let copies: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) - COUNT(DISTINCT \"seq\") FROM {table}"
    ))
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(copies, 0, "each entry once");
    pool.close().await;
    app.stop().await;
    database.drop().await;
}

on_both_backends!(
    a_column_added_not_null_or_given_another_type_stops_it_and_nothing_is_lost_once_mended,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_column_added_not_null_or_given_another_type_stops_it_and_nothing_is_lost_once_mended(
    backend: Backend,
) {
    let Some((database, _sandbox, app)) = warehouse_campaign(backend).await else {
        return;
    };
    let pool = database.pool().await;
    local_changes(&app, 3).await;
    let app = writing_to(
        app,
        vec![postgres_warehouse("warehouse", &database.url, "batch = 4")],
    )
    .await;
    whole(&app, &pool, TABLE).await;

    // The data team's column, NOT NULL, no default: no row of the daemon's can fill it.
    execute(
        &pool,
        &format!("ALTER TABLE {TABLE} ADD COLUMN \"teamId\" text NOT NULL DEFAULT 'data'"),
    )
    .await;
    execute(
        &pool,
        &format!("ALTER TABLE {TABLE} ALTER COLUMN \"teamId\" DROP DEFAULT"),
    )
    .await;
    for i in 0..5 {
        one_more(&app, i).await;
    }
    let stopped = eventually("the destination stops", WAIT, async || {
        app.settle().await;
        let shown = view(&app, "warehouse").await;
        (shown["state"] == "error").then_some(shown)
    })
    .await;
    let error = stopped["lastError"].as_str().unwrap_or_default();
    assert!(error.contains("teamId"), "{stopped}");
    assert!(!error.contains(&database.url), "{error}");
    assert_eq!(
        stopped["refused"], 0,
        "nothing is refused for it: {stopped}"
    );

    // Mended, then retried: every row is written.
    execute(
        &pool,
        &format!("ALTER TABLE {TABLE} DROP COLUMN \"teamId\""),
    )
    .await;
    let retried = app
        .admin_post("/v1/destinations/warehouse/retry", &json!({}))
        .await;
    assert_eq!(retried.status(), 200);
    let shown = whole(&app, &pool, TABLE).await;
    assert_eq!(shown["refused"], 0, "{shown}");

    // `optedOut` made text (its view dropped first, as PostgreSQL asks): PostgreSQL would
    // cast every row into it without a word.
    execute(&pool, &format!("DROP VIEW {TABLE}_current")).await;
    execute(
        &pool,
        &format!("ALTER TABLE {TABLE} ALTER COLUMN \"optedOut\" TYPE text"),
    )
    .await;
    let stopped = eventually("the type change is found", WAIT, async || {
        one_more(&app, 9).await;
        app.settle().await;
        let shown = view(&app, "warehouse").await;
        (shown["state"] == "error").then_some(shown)
    })
    .await;
    let error = stopped["lastError"].as_str().unwrap_or_default();
    assert!(error.contains("`optedOut` is text"), "{stopped}");
    let metrics = app.metrics.render(Default::default());
    assert!(
        metrics.contains(
            "outreach_sync_destination_requests_total{destination=\"warehouse\",outcome=\"lookup\"}"
        ),
        "counted as a lookup, not as credentials: {metrics}"
    );
    pool.close().await;
    app.stop().await;
    database.drop().await;
}
