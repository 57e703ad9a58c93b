//! The fake BigQuery: its token endpoint (the JWT bearer grant of a service account), bearer
//! authentication, and tables and views.

use std::time::Duration;

use outreach_sync_sandbox::BIGQUERY_TEST_CLIENT_EMAIL;
use reqwest::Method;
use serde_json::json;

use super::common::*;

const SHORT_LIVED: &str = "Invalid JWT: Token must be a short-lived token (60 minutes) and in a \
     reasonable timeframe. Check your iat and exp values in the JWT claim.";

#[tokio::test]
async fn a_signed_jwt_gets_a_bearer_token_the_api_takes() {
    let fakes = Fakes::default().await;
    let assertion = bigquery_assertion(&bigquery_private_key(), json!({}));
    let answer = fakes.bq_grant(&assertion).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let token = answer.body["access_token"].as_str().expect("a token");
    assert!(token.starts_with("ya29."), "{token}");
    assert_eq!(answer.body["expires_in"], 3599);
    assert_eq!(answer.body["token_type"], "Bearer");
    let missing = fakes
        .bq(
            Method::GET,
            &format!("{CONSENT_TABLES}/optouts"),
            Some(token),
            None,
        )
        .await;
    assert_eq!(missing.status, 404, "authenticated: {}", missing.body);
    assert_eq!(fakes.sandbox.bigquery_truth().counts.tokens_issued, 1);
}

#[tokio::test]
async fn bad_grants_are_refused_in_google_s_words() {
    let fakes = Fakes::default().await;
    let key = bigquery_private_key();
    let now = now_secs();
    let cases = [
        (
            "wrong key",
            OTHER_KEY.to_owned(),
            json!({}),
            "Invalid JWT Signature.",
        ),
        (
            "wrong aud",
            key.clone(),
            // The URL the assertion is posted to is not the audience Google takes.
            json!({"aud": fakes.sandbox.bigquery_token_url()}),
            "Invalid JWT: Failed audience check.",
        ),
        (
            "too long",
            key.clone(),
            json!({"iat": now, "exp": now + 3601}),
            SHORT_LIVED,
        ),
        (
            "expired",
            key.clone(),
            json!({"iat": now - 7200, "exp": now - 3600}),
            SHORT_LIVED,
        ),
        ("no exp", key.clone(), json!({"exp": null}), SHORT_LIVED),
        (
            "unknown account",
            key.clone(),
            json!({"iss": "nobody@sandbox-project.iam.gserviceaccount.com"}),
            "Invalid grant: account not found",
        ),
    ];
    for (what, pem, changes, description) in cases {
        let answer = fakes.bq_grant(&bigquery_assertion(&pem, changes)).await;
        assert_eq!(answer.status, 400, "{what}: {}", answer.body);
        assert_eq!(answer.body["error"], "invalid_grant", "{what}");
        let said = answer.body["error_description"]
            .as_str()
            .unwrap_or_default();
        assert!(said.starts_with(description), "{what}: {said}");
    }
    let no_scope = fakes
        .bq_grant(&bigquery_assertion(&key, json!({"scope": null})))
        .await;
    assert_eq!(no_scope.body["error"], "invalid_scope", "{}", no_scope.body);
    let wrong_grant = fakes
        .bq_grant_form(&[("grant_type", "client_credentials"), ("assertion", "x")])
        .await;
    assert_eq!(wrong_grant.status, 400);
    assert_eq!(wrong_grant.body["error"], "unsupported_grant_type");
    assert_eq!(fakes.sandbox.bigquery_truth().counts.tokens_issued, 0);
}

#[tokio::test]
async fn a_tampered_jwt_has_an_invalid_signature() {
    let fakes = Fakes::default().await;
    let good = bigquery_assertion(&bigquery_private_key(), json!({}));
    let other = bigquery_assertion(
        &bigquery_private_key(),
        json!({"scope": "https://www.googleapis.com/auth/cloud-platform"}),
    );
    // The claims of one with the signature of the other.
    let mut parts: Vec<&str> = good.split('.').collect();
    parts[1] = other.split('.').nth(1).expect("claims");
    let answer = fakes.bq_grant(&parts.join(".")).await;
    assert_eq!(answer.body["error_description"], "Invalid JWT Signature.");
}

#[tokio::test]
async fn another_account_can_be_registered_over_http() {
    let fakes = Fakes::default().await;
    let email = "exporter@other-project.iam.gserviceaccount.com";
    let registered = fakes
        .control(
            Method::POST,
            "/bigquery/keys",
            Some(json!({"clientEmail": email, "publicKeyPem": OTHER_PUBLIC_KEY})),
        )
        .await;
    assert_eq!(registered.status, 204, "{}", registered.body);
    let answer = fakes
        .bq_grant(&bigquery_assertion(OTHER_KEY, json!({"iss": email})))
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let not_a_key = fakes
        .control(
            Method::POST,
            "/bigquery/keys",
            Some(json!({"clientEmail": email, "publicKeyPem": "hello"})),
        )
        .await;
    assert_eq!(not_a_key.status, 400);
    let emails = fakes.sandbox.bigquery_truth().client_emails;
    assert!(emails.iter().any(|e| e == BIGQUERY_TEST_CLIENT_EMAIL));
    assert!(emails.iter().any(|e| e == email));
}

#[tokio::test]
async fn the_api_wants_a_live_token_this_sandbox_issued() {
    let fakes = Fakes::default().await;
    let path = format!("{CONSENT_TABLES}/optouts");
    for token in [None, Some("ya29.not-one-of-ours")] {
        let answer = fakes.bq(Method::GET, &path, token, None).await;
        assert_eq!(answer.status, 401, "{token:?}");
        assert_eq!(answer.body["error"]["status"], "UNAUTHENTICATED");
        assert_eq!(google_error(&answer)["reason"], "unauthorized");
        assert!(
            answer.body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Request had invalid authentication credentials")),
            "{}",
            answer.body
        );
    }
    // Long enough that a loaded machine still uses the token within it.
    fakes.sandbox.bigquery_set_token_lifetime(3);
    let assertion = bigquery_assertion(&bigquery_private_key(), json!({}));
    let granted = fakes.bq_grant(&assertion).await;
    assert_eq!(granted.body["expires_in"], 3);
    let token = granted.body["access_token"].as_str().expect("a token");
    assert_eq!(
        fakes.bq(Method::GET, &path, Some(token), None).await.status,
        404
    );
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let expired = fakes.bq(Method::GET, &path, Some(token), None).await;
    assert_eq!(expired.status, 401, "expired: {}", expired.body);
}

#[tokio::test]
async fn a_table_is_missing_then_made_then_read_then_a_duplicate() {
    let fakes = Fakes::default().await;
    let token = fakes.bq_token().await;
    let path = format!("{CONSENT_TABLES}/optouts");
    let missing = fakes.bq(Method::GET, &path, Some(&token), None).await;
    assert_eq!(missing.status, 404);
    assert_eq!(google_error(&missing)["reason"], "notFound");
    assert_eq!(
        missing.body["error"]["message"],
        "Not found: Table sandbox-project:consent.optouts"
    );
    let fields = json!([
        {"name": "phoneNumber", "type": "STRING", "mode": "REQUIRED"},
        {"name": "optedOut", "type": "BOOL"},
        {"name": "at", "type": "TIMESTAMP", "mode": "REQUIRED"},
    ]);
    let created = fakes.bq_create_table(&token, "optouts", fields).await;
    assert_eq!(created.status, 200, "{}", created.body);
    assert_eq!(created.body["kind"], "bigquery#table");
    assert_eq!(created.body["id"], "sandbox-project:consent.optouts");
    assert_eq!(created.body["type"], "TABLE");
    let read = fakes.bq(Method::GET, &path, Some(&token), None).await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body["tableReference"]["tableId"], "optouts");
    assert_eq!(
        read.body["schema"]["fields"][1],
        json!({"name": "optedOut", "type": "BOOLEAN", "mode": "NULLABLE"})
    );
    let again = fakes.bq_create_table(&token, "optouts", json!([])).await;
    assert_eq!(again.status, 409);
    assert_eq!(google_error(&again)["reason"], "duplicate");
    assert_eq!(again.body["error"]["status"], "ALREADY_EXISTS");
    assert_eq!(
        again.body["error"]["message"],
        "Already Exists: Table sandbox-project:consent.optouts"
    );
    let bad = fakes
        .bq_create_table(&token, "bad", json!([{"name": "x", "type": "VARCHAR"}]))
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(google_error(&bad)["reason"], "invalid");
    let truth = fakes.sandbox.bigquery_truth();
    assert_eq!(truth.tables.len(), 1);
    assert_eq!(truth.tables[0].schema[2].field_type, "TIMESTAMP");
}

#[tokio::test]
async fn a_view_and_a_table_in_a_dataset_added_by_a_test() {
    let fakes = Fakes::default().await;
    let token = fakes.bq_token().await;
    let elsewhere = "/projects/analytics/datasets/warehouse/tables";
    let body = json!({
        "tableReference": {"projectId": "analytics", "datasetId": "warehouse", "tableId": "latest"},
        "view": {"query": "SELECT 1 AS x", "useLegacySql": false},
    });
    let no_dataset = fakes
        .bq(Method::POST, elsewhere, Some(&token), Some(body.clone()))
        .await;
    assert_eq!(no_dataset.status, 404);
    assert_eq!(
        no_dataset.body["error"]["message"],
        "Not found: Dataset analytics:warehouse"
    );
    assert!(fakes.sandbox.bigquery_add_dataset("analytics", "warehouse"));
    let view = fakes
        .bq(Method::POST, elsewhere, Some(&token), Some(body))
        .await;
    assert_eq!(view.status, 200, "{}", view.body);
    assert_eq!(view.body["type"], "VIEW");
    assert_eq!(
        view.body["view"],
        json!({"query": "SELECT 1 AS x", "useLegacySql": false})
    );
    let truth = fakes.control(Method::GET, "/bigquery", None).await.body;
    assert_eq!(truth["tables"][0]["type"], "VIEW");
    assert_eq!(truth["tables"][0]["view"]["query"], "SELECT 1 AS x");
    assert_eq!(truth["datasets"].as_array().map(Vec::len), Some(2));
}
