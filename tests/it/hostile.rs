//! The attack suite: each finding of an adversarial pass against the daemon, reproduced as
//! it was found, and what the daemon does now. The listener floods (slow headers, idle
//! connections, unsigned bodies) are not here yet; what is here is the input an attacker or
//! a clumsy operator controls: configuration text, the console's `next`, free text of a
//! local change, and the JSON of a signed delivery.

use serde_json::{Value, json};

use crate::cli::run;
use crate::common::{Backend, on_both_backends, spawn_app_on, with_admin_token};

/// As found: a TOML syntax error on a secret's line (here a missing closing quote) printed
/// that line, secret included, to stderr, so to the journal, from `check-config` and
/// `serve`.
#[test]
fn a_configuration_error_names_file_line_and_key_but_never_the_lines_text() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    for (text, line, key) in [
        (
            "[webhook]\nsecrets = [\"whsec_LEAKED_IF_SHOWN]\n",
            "line 2",
            "webhook.secrets",
        ),
        (
            "[service]\nclient_id = \"me@example.org\"\nclient_secret = \"LEAKED_IF_SHOWN\"\nclient_secret = \"LEAKED_IF_SHOWN_2\"\n",
            "line 4",
            "service.client_secret",
        ),
    ] {
        std::fs::write(&config, text).unwrap();
        for command in ["check-config", "serve"] {
            let out = run(
                dir.path(),
                &[command, "--config", config.to_str().unwrap()],
                &[],
                "",
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
            assert!(
                stderr.contains("config.toml") && stderr.contains(line) && stderr.contains(key),
                "{command}: {stderr}"
            );
            assert!(
                !stderr.contains("LEAKED_IF_SHOWN") && !stdout.contains("LEAKED_IF_SHOWN"),
                "{command} printed the secret: {stderr}{stdout}"
            );
        }
    }
}

on_both_backends!(a_reason_longer_than_500_characters_is_refused_and_nothing_is_recorded);
/// As found: a 1.5 MB `reason` went into the ledger, which is never pruned.
async fn a_reason_longer_than_500_characters_is_refused_and_nothing_is_recorded(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    let change = |reason: String| {
        json!({"phoneNumber": "+15550000401", "organizationId": "org_1", "optedOut": true,
               "reason": reason})
    };
    let response = app
        .admin_post("/v1/consent", &change("x".repeat(501)))
        .await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert!(
        error["message"].as_str().unwrap().contains("at most 500"),
        "{error}"
    );
    assert_eq!(app.count("SELECT COUNT(*) FROM ledger").await, 0);
    // Characters, not bytes: 500 of them in a script of several bytes each is taken.
    let response = app
        .admin_post("/v1/consent", &change("é".repeat(500)))
        .await;
    assert_eq!(response.status(), 202);
    assert_eq!(app.count("SELECT COUNT(*) FROM ledger").await, 1);
    app.stop().await;
}

on_both_backends!(a_delivery_with_a_key_twice_is_quarantined_as_ambiguous_and_not_applied);
/// As found: `"globalOptedOut":true, ..., "globalOptedOut":false` was applied as the last
/// value. Which one the sender meant cannot be told: the delivery is kept and quarantined,
/// and the ledger does not guess.
async fn a_delivery_with_a_key_twice_is_quarantined_as_ambiguous_and_not_applied(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let body = r#"{"type":"consentUpdate-v1","id":"evt_dup","createdAt":"2026-11-21T10:00:00Z","data":{"organizationId":"org_1","phoneNumber":"+15550000402","globalOptedOut":true,"globalOptedOut":false}}"#;
    let response = app.post_signed(body).await;
    assert_eq!(response.status(), 200, "verified, so kept");
    app.drain().await;
    assert_eq!(app.texts("SELECT state FROM outbox").await, ["quarantined"]);
    assert_eq!(
        app.texts("SELECT last_error FROM outbox").await,
        ["ambiguous: duplicate key globalOptedOut"]
    );
    assert_eq!(app.count("SELECT COUNT(*) FROM ledger").await, 0);
    app.stop().await;
}

on_both_backends!(a_delivery_that_is_not_json_is_quarantined_saying_where_and_why);
/// As found: a number like `1e999` was quarantined as "not a JSON object".
async fn a_delivery_that_is_not_json_is_quarantined_saying_where_and_why(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let body = r#"{"type":"consentUpdate-v1","id":"evt_big","data":{"organizationId":"org_1","phoneNumber":"+15550000403","globalOptedOut":true,"tagId":1e999}}"#;
    // Ingest only checks that the body is JSON text, not that every number fits a double.
    let response = app.post_signed(body).await;
    assert_eq!(response.status(), 200);
    app.drain().await;
    assert_eq!(app.texts("SELECT state FROM outbox").await, ["quarantined"]);
    let error = app.texts("SELECT last_error FROM outbox").await;
    assert!(
        error[0].starts_with("not JSON: number out of range at line 1 column"),
        "{error:?}"
    );
    app.stop().await;
}
