//! The fake BigQuery's `insertAll`: rows checked against the schema, `skipInvalidRows`,
//! `ignoreUnknownValues`, de-duplication by `insertId`, refused rows, its limits, and
//! injected quota and rate-limit faults.

use std::time::Duration;

use outreach_sync_sandbox::destinations::{Fake, FakeFault};
use reqwest::Method;
use serde_json::{Value, json};

use super::common::*;

const INSERT_ALL: &str = "/projects/sandbox-project/datasets/consent/tables/optouts/insertAll";

/// A sandbox with the table `optouts` and a token.
async fn with_table() -> (Fakes, String) {
    let fakes = Fakes::default().await;
    let token = fakes.bq_token().await;
    let fields = json!([
        {"name": "phoneNumber", "type": "STRING", "mode": "REQUIRED"},
        {"name": "optedOut", "type": "BOOLEAN"},
        {"name": "at", "type": "TIMESTAMP"},
    ]);
    let created = fakes.bq_create_table(&token, "optouts", fields).await;
    assert_eq!(created.status, 200, "{}", created.body);
    (fakes, token)
}

fn row(insert_id: &str, phone: Value) -> Value {
    let json = json!({"phoneNumber": phone, "optedOut": true, "at": "2026-11-28T16:00:00Z"});
    json!({"insertId": insert_id, "json": json})
}

async fn insert(fakes: &Fakes, token: &str, body: Value) -> Answer {
    fakes
        .bq(Method::POST, INSERT_ALL, Some(token), Some(body))
        .await
}

/// The `reason` of each row's first error, by index.
fn reasons(answer: &Answer) -> Vec<(u64, String)> {
    answer.body["insertErrors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let reason = e["errors"][0]["reason"].as_str().unwrap_or_default();
            (e["index"].as_u64().unwrap_or(u64::MAX), reason.to_owned())
        })
        .collect()
}

fn stored_ids(fakes: &Fakes) -> Vec<String> {
    let truth = fakes.sandbox.bigquery_truth();
    truth.tables[0]
        .rows
        .iter()
        .filter_map(|r| r.insert_id.clone())
        .collect()
}

#[tokio::test]
async fn valid_rows_are_stored_in_order() {
    let (fakes, token) = with_table().await;
    let body = json!({"kind": "bigquery#tableDataInsertAllRequest", "rows": [
        row("a", json!("+12025550143")), row("b", json!("+12025550144")),
    ]});
    let answer = insert(&fakes, &token, body).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.body,
        json!({"kind": "bigquery#tableDataInsertAllResponse"})
    );
    assert_eq!(stored_ids(&fakes), ["a", "b"]);
    let truth = fakes.sandbox.bigquery_truth();
    assert_eq!(truth.tables[0].rows[1].json["phoneNumber"], "+12025550144");
    assert_eq!(truth.counts.insert_all_requests, 1);
    assert_eq!(truth.counts.rows_received, 2);
    assert_eq!(truth.counts.rows_stored, 2);
}

#[tokio::test]
async fn an_invalid_row_stops_the_others_unless_skip_invalid_rows() {
    let (fakes, token) = with_table().await;
    let rows = json!([
        row("a", json!("+1")),
        row("b", Value::Null),
        row("c", json!("+2"))
    ]);
    let stopped = insert(&fakes, &token, json!({"rows": rows.clone()})).await;
    assert_eq!(stopped.status, 200);
    let expected = [(0, "stopped"), (1, "invalid"), (2, "stopped")];
    let expected: Vec<(u64, String)> = expected.iter().map(|(i, r)| (*i, r.to_string())).collect();
    assert_eq!(reasons(&stopped), expected);
    let invalid = &stopped.body["insertErrors"][1]["errors"][0];
    assert_eq!(invalid["location"], "phoneNumber");
    assert_eq!(invalid["message"], "Missing required field: phoneNumber.");
    assert_eq!(stopped.body["insertErrors"][0]["errors"][0]["message"], "");
    assert!(stored_ids(&fakes).is_empty(), "nothing stored");

    let skipped = insert(
        &fakes,
        &token,
        json!({"skipInvalidRows": true, "rows": rows}),
    )
    .await;
    assert_eq!(reasons(&skipped), [(1, "invalid".to_owned())]);
    assert_eq!(stored_ids(&fakes), ["a", "c"]);
}

#[tokio::test]
async fn a_wrong_type_or_an_unknown_field_is_invalid_unless_ignored() {
    let (fakes, token) = with_table().await;
    let rows = json!([
        {"insertId": "a", "json": {"phoneNumber": "+1", "optedOut": "maybe"}},
        {"insertId": "b", "json": {"phoneNumber": "+2", "at": "yesterday"}},
        {"insertId": "c", "json": {"phoneNumber": "+3", "colour": "red"}},
    ]);
    let answer = insert(&fakes, &token, json!({"rows": rows.clone()})).await;
    let locations: Vec<&Value> = (0..3)
        .map(|i| &answer.body["insertErrors"][i]["errors"][0]["location"])
        .collect();
    assert_eq!(
        locations,
        [&json!("optedOut"), &json!("at"), &json!("colour")]
    );
    assert_eq!(
        answer.body["insertErrors"][2]["errors"][0]["message"],
        "no such field: colour."
    );
    let ignored = json!({"ignoreUnknownValues": true, "skipInvalidRows": true, "rows": rows});
    let answer = insert(&fakes, &token, ignored).await;
    assert_eq!(reasons(&answer).len(), 2, "{}", answer.body);
    let truth = fakes.sandbox.bigquery_truth();
    assert_eq!(truth.tables[0].rows.len(), 1);
    assert_eq!(truth.tables[0].rows[0].json, json!({"phoneNumber": "+3"}));
}

#[tokio::test]
async fn a_repeated_insert_id_is_dropped_within_the_window_and_not_with_none() {
    let (fakes, token) = with_table().await;
    for _ in 0..2 {
        let answer = insert(&fakes, &token, json!({"rows": [row("same", json!("+1"))]})).await;
        assert_eq!(
            answer.body,
            json!({"kind": "bigquery#tableDataInsertAllResponse"})
        );
    }
    assert_eq!(stored_ids(&fakes), ["same"]);
    assert_eq!(fakes.sandbox.bigquery_truth().counts.rows_deduplicated, 1);

    fakes.sandbox.bigquery_set_dedup_window(Duration::ZERO);
    insert(&fakes, &token, json!({"rows": [row("same", json!("+1"))]})).await;
    assert_eq!(stored_ids(&fakes), ["same", "same"], "window 0: never");

    let set = fakes
        .control(
            Method::PUT,
            "/bigquery/dedup_window",
            Some(json!({"ms": 200})),
        )
        .await;
    assert_eq!(set.status, 204);
    insert(&fakes, &token, json!({"rows": [row("later", json!("+1"))]})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    insert(&fakes, &token, json!({"rows": [row("later", json!("+1"))]})).await;
    assert_eq!(
        stored_ids(&fakes).len(),
        4,
        "after the window: stored again"
    );
}

#[tokio::test]
async fn a_refused_value_gets_a_per_row_error() {
    let (fakes, token) = with_table().await;
    fakes
        .sandbox
        .bigquery_refuse_rows("phoneNumber", "+12025550199", "invalid");
    let rows = json!([
        row("a", json!("+12025550143")),
        row("b", json!("+12025550199"))
    ]);
    let answer = insert(
        &fakes,
        &token,
        json!({"skipInvalidRows": true, "rows": rows}),
    )
    .await;
    assert_eq!(reasons(&answer), [(1, "invalid".to_owned())]);
    assert_eq!(
        answer.body["insertErrors"][0]["errors"][0]["location"],
        "phoneNumber"
    );
    assert_eq!(stored_ids(&fakes), ["a"]);
}

#[tokio::test]
async fn the_table_must_exist_be_a_table_and_the_request_within_limits() {
    let (fakes, token) = with_table().await;
    let elsewhere = INSERT_ALL.replace("optouts", "nothing");
    let missing = fakes
        .bq(
            Method::POST,
            &elsewhere,
            Some(&token),
            Some(json!({"rows": [row("a", json!("+1"))]})),
        )
        .await;
    assert_eq!(missing.status, 404);
    assert_eq!(google_error(&missing)["reason"], "notFound");
    let empty = insert(&fakes, &token, json!({"rows": []})).await;
    assert_eq!(empty.status, 400);
    assert_eq!(google_error(&empty)["reason"], "invalid");
    let many: Vec<Value> = (0..50_001).map(|_| json!({"json": {}})).collect();
    let too_many = insert(&fakes, &token, json!({"rows": many})).await;
    assert_eq!(
        too_many.status, 400,
        "{}",
        too_many.body["error"]["message"]
    );
    let padding = "x".repeat(11 * 1024 * 1024);
    let huge = insert(&fakes, &token, json!({"rows": [row("a", json!(padding))]})).await;
    assert_eq!(huge.status, 400);
    assert_eq!(google_error(&huge)["reason"], "invalid");

    let view = json!({
        "tableReference": {"tableId": "latest"},
        "view": {"query": "SELECT * FROM consent.optouts", "useLegacySql": false},
    });
    let made = fakes
        .bq(Method::POST, CONSENT_TABLES, Some(&token), Some(view))
        .await;
    assert_eq!(made.status, 200, "{}", made.body);
    let into_view = fakes
        .bq(
            Method::POST,
            &INSERT_ALL.replace("optouts", "latest"),
            Some(&token),
            Some(json!({"rows": [row("a", json!("+1"))]})),
        )
        .await;
    assert_eq!(into_view.status, 400);
    assert!(stored_ids(&fakes).is_empty());
}

#[tokio::test]
async fn quota_and_rate_limit_faults_are_google_s_403s() {
    let (fakes, token) = with_table().await;
    fakes
        .sandbox
        .fake_fail_next(Fake::BigQuery, 1, FakeFault::QuotaExceeded);
    let pushed = fakes
        .control(
            Method::POST,
            "/bigquery/faults",
            Some(json!({"fault": {"kind": "rate_limit"}})),
        )
        .await;
    assert_eq!(pushed.status, 200, "{}", pushed.body);
    fakes.sandbox.fake_fail_next(
        Fake::BigQuery,
        1,
        FakeFault::Status {
            status: 503,
            retry_after_secs: None,
        },
    );
    let body = json!({"rows": [row("a", json!("+1"))]});
    for (status, reason) in [
        (403, "quotaExceeded"),
        (403, "rateLimitExceeded"),
        (503, "backendError"),
    ] {
        let answer = insert(&fakes, &token, body.clone()).await;
        assert_eq!(answer.status, status, "{}", answer.body);
        assert_eq!(google_error(&answer)["reason"], reason);
        assert_eq!(answer.body["error"]["code"], status);
    }
    assert!(
        stored_ids(&fakes).is_empty(),
        "faulted requests store nothing"
    );
    let answer = insert(&fakes, &token, body).await;
    assert_eq!(answer.status, 200, "then normal again");
    let truth = fakes.sandbox.bigquery_truth();
    assert_eq!(truth.requests.injected_faults, 3);
    assert_eq!(truth.counts.insert_all_requests, 1);
}
