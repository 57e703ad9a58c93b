//! BigQuery, on the sandbox's stand-in of Google's token endpoint, `tables` and
//! `tabledata.insertAll`: a token from the service account's key, the table and its views
//! made, each entry a row with `insertId` its seq, a row refused with BigQuery's reason,
//! quota errors retried.

use std::collections::{BTreeMap, BTreeSet};

use outreach_sync::settings::kinds::bigquery::BigQuerySettings;
use outreach_sync_sandbox::destinations::{BIGQUERY_DATASET, BIGQUERY_PROJECT, Fake, FakeFault};
use outreach_sync_sandbox::{BigQueryTruth, RunningSandbox, bigquery_key_file};

use super::*;

/// A BigQuery warehouse on `sandbox`'s stand-in, in `dataset`, `batch` rows a request.
pub(crate) fn bigquery_warehouse(
    sandbox: &RunningSandbox,
    dataset: &str,
    batch: u32,
) -> DestinationSettings {
    let system = SystemSettings::BigQuery(BigQuerySettings::of_table(
        BIGQUERY_PROJECT,
        dataset,
        TABLE,
        batch,
    ));
    let key = bigquery_key_file(&sandbox.bigquery_token_url());
    let mut warehouse = DestinationSettings::new("bq", system, &sandbox.bigquery_url(), &key);
    warehouse.requests_per_second = Some(1_000);
    warehouse
}

/// The table's rows by seq, each with its insertIds, as the stand-in stored them.
fn stored(truth: &BigQueryTruth) -> BTreeMap<i64, Vec<(Option<String>, Value)>> {
    let mut by_seq: BTreeMap<i64, Vec<_>> = BTreeMap::new();
    let table = truth
        .tables
        .iter()
        .find(|t| t.table_id == TABLE)
        .expect("the table was made");
    for row in &table.rows {
        let seq = row.json["seq"]
            .as_i64()
            .or_else(|| row.json["seq"].as_str().and_then(|s| s.parse().ok()))
            .expect("a seq");
        by_seq
            .entry(seq)
            .or_default()
            .push((row.insert_id.clone(), row.json.clone()));
    }
    by_seq
}

on_both_backends!(
    every_entry_reaches_bigquery_once_by_its_insert_id_in_a_table_made_with_its_views,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn every_entry_reaches_bigquery_once_by_its_insert_id_in_a_table_made_with_its_views(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    super::local_changes(&app, 4).await;
    let app = writing_to(app, vec![bigquery_warehouse(&sandbox, BIGQUERY_DATASET, 5)]).await;
    app.settle().await;
    let ledger = ledger_rows(&app).await;
    let truth = sandbox.bigquery_truth();
    let table = truth
        .tables
        .iter()
        .find(|t| t.table_id == TABLE)
        .expect("the table was made");
    let columns: Vec<(&str, &str, &str)> = table
        .schema
        .iter()
        .map(|f| (f.name.as_str(), f.field_type.as_str(), f.mode.as_str()))
        .collect();
    let expected: Vec<(&str, &str, &str)> = outreach_sync::model::warehouse::COLUMNS
        .iter()
        .map(|c| {
            let mode = if c.required { "REQUIRED" } else { "NULLABLE" };
            (c.name, bigquery_type(c.kind), mode)
        })
        .collect();
    assert_eq!(columns, expected, "the table has the rows' schema");
    for view in ["_once", "_current"] {
        let name = format!("{TABLE}{view}");
        let made = truth
            .tables
            .iter()
            .find(|t| t.table_id == name)
            .unwrap_or_else(|| panic!("the view {name} was made"));
        let query = &made.view.as_ref().expect("a view").query;
        assert!(query.contains("QUALIFY ROW_NUMBER()"), "{query}");
    }
    let rows = stored(&truth);
    assert_eq!(
        rows.keys().copied().collect::<Vec<_>>(),
        ledger.keys().copied().collect::<Vec<_>>(),
        "every entry, opt-ins too, is a row"
    );
    for (seq, copies) in &rows {
        assert_eq!(copies.len(), 1, "seq {seq} once");
        let (insert_id, json) = &copies[0];
        assert_eq!(insert_id.as_deref(), Some(seq.to_string().as_str()));
        let (phone, opted_out, source, hash, account) = &ledger[seq];
        assert_eq!(&json["phoneNumber"], phone);
        assert_eq!(&json["optedOut"], opted_out);
        assert_eq!(&json["source"], source);
        assert_eq!(json["entryHash"].as_str(), hash.as_deref());
        assert_eq!(&json["accountId"], account);
    }
    assert_eq!(
        truth.counts.tokens_issued, 1,
        "one token serves while it lasts"
    );
    let shown = view(&app, "bq").await;
    assert_eq!(shown["kind"], "bigquery", "{shown}");
    assert_eq!(shown["sent"], ledger.len(), "{shown}");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_row_bigquery_refuses_is_refused_with_its_reason_and_quota_errors_are_retried,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_row_bigquery_refuses_is_refused_with_its_reason_and_quota_errors_are_retried(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    super::local_changes(&app, 3).await;
    app.drain().await;
    let refused_number = "+13035550100";
    sandbox.bigquery_refuse_rows("phoneNumber", refused_number, "invalid");
    sandbox.fake_fail_next(Fake::BigQuery, 1, FakeFault::QuotaExceeded);
    sandbox.fake_fail_next(Fake::BigQuery, 1, FakeFault::RateLimit);
    let app = writing_to(app, vec![bigquery_warehouse(&sandbox, BIGQUERY_DATASET, 4)]).await;
    let first = app.settle().await;
    assert!(
        matches!(first[0].1, outreach_sync::sender::Attempt::Failed { .. }),
        "{first:?}"
    );
    let shown = view(&app, "bq").await;
    assert_eq!(shown["state"], "retrying", "{shown}");
    let error = shown["lastError"].as_str().unwrap_or_default();
    assert!(
        error.contains("quotaExceeded") || error.contains("rateLimitExceeded"),
        "{shown}"
    );
    app.settle().await;
    app.settle().await;
    let ledger = ledger_rows(&app).await;
    let refused: BTreeSet<i64> = ledger
        .iter()
        .filter(|(_, (phone, ..))| phone == refused_number)
        .map(|(seq, _)| *seq)
        .collect();
    assert!(!refused.is_empty(), "the number has entries");
    let rows = stored(&sandbox.bigquery_truth());
    let sent: BTreeSet<i64> = ledger
        .keys()
        .copied()
        .filter(|s| !refused.contains(s))
        .collect();
    assert_eq!(rows.keys().copied().collect::<BTreeSet<_>>(), sent);
    let listed = super::outcomes(&app, "bq").await;
    let refusals: Vec<&Value> = listed
        .iter()
        .filter(|o| o["outcome"] == "refused")
        .collect();
    assert_eq!(refusals.len(), refused.len(), "{listed:?}");
    for refusal in refusals {
        let reason = refusal["reason"].as_str().unwrap_or_default();
        assert!(reason.starts_with("invalid"), "BigQuery's reason: {reason}");
    }
    let shown = view(&app, "bq").await;
    assert_eq!(shown["state"], "active", "{shown}");
    assert_eq!(shown["refused"], refused.len(), "{shown}");
    assert_eq!(shown["sent"], sent.len(), "{shown}");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_bigquery_key_that_is_refused_or_a_dataset_that_is_missing_stops_it_saying_why,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_bigquery_key_that_is_refused_or_a_dataset_that_is_missing_stops_it_saying_why(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    // A key Google does not know: the grant is refused.
    let mut unknown = bigquery_warehouse(&sandbox, BIGQUERY_DATASET, 10);
    let key: Value = serde_json::from_str(outreach_sync_sandbox::BIGQUERY_TEST_KEY).expect("key");
    let mut other = key.clone();
    other["client_email"] = json!("nobody@sandbox-project.iam.gserviceaccount.com");
    other["token_uri"] = json!(sandbox.bigquery_token_url());
    unknown.api_key = Some(other.to_string().into());
    let mut missing = bigquery_warehouse(&sandbox, "no_such_dataset", 10);
    missing.name = "bq-missing".into();
    let app = writing_to(app, vec![unknown, missing]).await;
    app.settle().await;
    let shown = view(&app, "bq").await;
    assert_eq!(shown["state"], "error", "{shown}");
    let error = shown["lastError"].as_str().unwrap_or_default();
    assert!(
        error.contains("credentials") && error.contains("invalid_grant"),
        "{shown}"
    );
    let private_key = key["private_key"].as_str().expect("a private key");
    assert!(!error.contains(&private_key[40..80]), "the key is a secret");
    let shown = view(&app, "bq-missing").await;
    assert_eq!(shown["state"], "error", "{shown}");
    let error = shown["lastError"].as_str().unwrap_or_default();
    assert!(error.contains("no_such_dataset"), "{shown}");
    assert!(
        sandbox.bigquery_truth().tables.is_empty(),
        "nothing was made"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

/// A token that nears its end is granted anew before the next batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bigquery_token_near_its_end_is_granted_anew() {
    let Some((sandbox, app)) = campaign(Backend::Sqlite).await else {
        return;
    };
    // Under the minute a token is replaced before: each batch asks for one.
    sandbox.bigquery_set_token_lifetime(30);
    let app = writing_to(app, vec![bigquery_warehouse(&sandbox, BIGQUERY_DATASET, 3)]).await;
    app.settle().await;
    let truth = sandbox.bigquery_truth();
    let batches = truth.counts.insert_all_requests;
    assert!(batches >= 3, "{:?}", truth.counts);
    assert!(truth.counts.tokens_issued > batches, "{:?}", truth.counts);
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_bigquery_table_deleted_under_it_is_made_again_and_filled_from_the_first_entry,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_bigquery_table_deleted_under_it_is_made_again_and_filled_from_the_first_entry(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    super::local_changes(&app, 4).await;
    let app = writing_to(app, vec![bigquery_warehouse(&sandbox, BIGQUERY_DATASET, 5)]).await;
    app.settle().await;
    assert_eq!(
        stored(&sandbox.bigquery_truth()).len(),
        ledger_rows(&app).await.len()
    );
    // A data team deletes the table (`bq rm`), then one more entry comes.
    assert!(sandbox.bigquery_drop_table(TABLE));
    let later = json!({"phoneNumber": "+13035550299", "organizationId": "org_1", "optedOut": true});
    assert_eq!(app.admin_post("/v1/consent", &later).await.status(), 202);
    let ledger = ledger_rows(&app).await;
    crate::common::eventually(
        "the table made again holds every entry",
        std::time::Duration::from_secs(60),
        async || {
            app.settle().await;
            let truth = sandbox.bigquery_truth();
            truth.tables.iter().any(|t| t.table_id == TABLE)
                && stored(&truth).keys().copied().collect::<Vec<_>>()
                    == ledger.keys().copied().collect::<Vec<_>>()
        },
    )
    .await;
    assert_eq!(app.metrics.destination_refills_counted("bq"), 1);
    let shown = view(&app, "bq").await;
    assert_eq!(shown["state"], "active", "{shown}");
    app.stop().await;
    sandbox.shutdown().await;
}

/// BigQuery's standard SQL type of each kind of column, as the contract's schema gives it.
fn bigquery_type(kind: outreach_sync::model::warehouse::ColumnType) -> &'static str {
    use outreach_sync::model::warehouse::ColumnType;
    match kind {
        ColumnType::Integer => "INTEGER",
        ColumnType::Text => "STRING",
        ColumnType::Boolean => "BOOLEAN",
        ColumnType::Time => "TIMESTAMP",
    }
}
