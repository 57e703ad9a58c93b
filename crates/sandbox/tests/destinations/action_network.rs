//! The fake Action Network: its token and the person signup helper.

use outreach_sync_sandbox::DEFAULT_ACTION_NETWORK_KEY;
use serde_json::{Value, json};

use super::common::*;

#[tokio::test]
async fn action_network_wants_its_token() {
    let fakes = Fakes::default().await;
    for token in [None, Some("wrong-key")] {
        let answer = fakes
            .an_post(
                token,
                json!({"person": {"phone_numbers": [{"number": "12025550143", "status": "unsubscribed"}]}}),
            )
            .await;
        assert_eq!(answer.status, 401, "{token:?}");
        assert!(answer.body["error"].is_string(), "{}", answer.body);
    }
    assert!(fakes.sandbox.action_network_truth().people.is_empty());
}

#[tokio::test]
async fn the_signup_helper_creates_then_matches_by_number() {
    let fakes = Fakes::default().await;
    let created = fakes.an_signup("12025550143", "subscribed").await;
    assert_eq!(created.status, 200, "{}", created.body);
    let identifier = created.body["identifiers"][0]
        .as_str()
        .expect("an identifier")
        .to_owned();
    let uuid = identifier
        .strip_prefix("action_network:")
        .expect("action_network:<uuid>");
    assert_eq!(uuid.len(), 36, "{uuid}");
    for field in [
        "created_date",
        "modified_date",
        "phone_numbers",
        "email_addresses",
    ] {
        assert!(
            created.body.get(field).is_some(),
            "{field}: {}",
            created.body
        );
    }
    assert!(
        created.body["_links"]["self"]["href"]
            .as_str()
            .is_some_and(|href| href.ends_with(uuid)),
        "{}",
        created.body
    );
    assert_eq!(created.body["phone_numbers"][0]["status"], "subscribed");

    let matched = fakes.an_signup("12025550143", "unsubscribed").await;
    assert_eq!(matched.status, 200);
    assert_eq!(matched.body["identifiers"][0], identifier.as_str());
    assert_eq!(matched.body["phone_numbers"][0]["status"], "unsubscribed");
    assert_eq!(matched.body["phone_numbers"][0]["number"], "12025550143");

    let truth = fakes.sandbox.action_network_truth();
    assert_eq!(truth.people.len(), 1, "matched, not made twice");
    assert_eq!(truth.people[0].phone_numbers[0].status, "unsubscribed");
    let created_flags: Vec<bool> = truth.signups.iter().map(|s| s.created).collect();
    assert_eq!(created_flags, [true, false]);
    let over_http = fakes
        .control(reqwest::Method::GET, "/actionnetwork", None)
        .await;
    assert_eq!(
        over_http.body["signups"][1]["phoneNumbers"][0]["status"],
        "unsubscribed"
    );
    assert_eq!(over_http.body["requests"]["total"], 2);
}

#[tokio::test]
async fn a_signup_without_a_number_or_email_or_with_a_bad_status_is_400() {
    let fakes = Fakes::default().await;
    for (what, body) in [
        ("nothing", json!({"person": {"given_name": "Ida"}})),
        ("no person", json!({"add_tags": ["x"]})),
        (
            "a bad status",
            json!({"person": {"phone_numbers": [{"number": "12025550143", "status": "maybe"}]}}),
        ),
        (
            "a bad number",
            json!({"person": {"phone_numbers": [{"number": "call me", "status": "subscribed"}]}}),
        ),
    ] {
        let answer = fakes.an_post(Some(DEFAULT_ACTION_NETWORK_KEY), body).await;
        assert_eq!(answer.status, 400, "{what}: {}", answer.body);
        assert!(answer.body["error"].is_string(), "{what}: {}", answer.body);
    }
    let email_only = fakes
        .an_post(
            Some(DEFAULT_ACTION_NETWORK_KEY),
            json!({"person": {"email_addresses": [{"address": "ida@example.org"}]}}),
        )
        .await;
    assert_eq!(email_only.status, 200, "an email alone is enough");
    assert_eq!(fakes.sandbox.action_network_truth().people.len(), 1);
}

#[tokio::test]
async fn action_network_faults_are_set_over_http_too() {
    let fakes = Fakes::default().await;
    let queued = fakes
        .control(
            reqwest::Method::POST,
            "/actionnetwork/faults",
            Some(json!({"count": 1, "fault": {"kind": "status", "status": 429, "retryAfterSecs": 3}})),
        )
        .await;
    assert_eq!(queued.status, 200, "{}", queued.body);
    let garbage = fakes
        .control(
            reqwest::Method::POST,
            "/actionnetwork/faults",
            Some(json!({"fault": {"kind": "garbage"}})),
        )
        .await;
    assert_eq!(garbage.body["queued"].as_array().map(Vec::len), Some(2));
    let limited = fakes.an_signup("12025550143", "unsubscribed").await;
    assert_eq!(limited.status, 429);
    assert_eq!(
        limited
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("3")
    );
    assert!(limited.body["error"].is_string(), "{}", limited.body);
    let not_json = fakes.an_signup("12025550143", "unsubscribed").await;
    assert_eq!(not_json.body, Value::String("<not JSON>".into()));
    assert!(fakes.sandbox.action_network_truth().people.is_empty());
    let refused = fakes
        .control(
            reqwest::Method::POST,
            "/actionnetwork/faults",
            Some(json!({"fault": {"kind": "status", "status": 200}})),
        )
        .await;
    assert_eq!(refused.status, 400, "200 is not a fault");
    assert_eq!(
        fakes.an_signup("12025550143", "unsubscribed").await.status,
        200
    );
    // The VAN fake was never touched.
    assert_eq!(fakes.sandbox.van_truth().requests.total, 0);
}
