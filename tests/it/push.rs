//! Local consent changes pushed to the sandbox: retries with a persisted backoff, and the
//! webhook the service sends back recognised as an echo, not a new change.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use common::{Backend, TestApp, on_both_backends, spawn_app_on, with_admin_token};
use outreach_sync::apply::{self, LocalChange};
use outreach_sync::client::ServiceClient;
use outreach_sync::pusher::{Attempted, Pusher};
use outreach_sync_sandbox::wire::{Lead, WebhookConfig};
use outreach_sync_sandbox::{RunningSandbox, Sandbox, SandboxConfig};
use serde_json::{Value, json};
use tokio::sync::Notify;

async fn sandbox() -> RunningSandbox {
    Sandbox::spawn(SandboxConfig {
        account_sync: false,
        leads: 6,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox")
}

fn opted_in_lead(sandbox: &RunningSandbox) -> Lead {
    sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .expect("an opted-in lead")
}

async fn json_of(response: reqwest::Response) -> Value {
    response.json().await.expect("JSON")
}

async fn status(app: &TestApp) -> Value {
    json_of(app.admin_get("/v1/status").await).await
}

on_both_backends!(a_push_that_fails_twice_is_retried_with_backoff_and_then_sent);
async fn a_push_that_fails_twice_is_retried_with_backoff_and_then_sent(backend: Backend) {
    let sandbox = sandbox().await;
    let lead = opted_in_lead(&sandbox);
    // No service configured: the daemon's own pusher stays off and this test drives one.
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    let change = LocalChange {
        account: outreach_sync::model::AccountId::default_account(),
        organization_id: lead.organization_id.clone(),
        phone_number: lead.phone_number.clone(),
        opted_out: true,
        tag_id: None,
        reason: Some("asked by email".into()),
        actor: "cli:test".into(),
    };
    let recorded = apply::record_local(&app.pool, &change, Utc::now())
        .await
        .unwrap();
    let mut config = common::client_config(&sandbox);
    config.max_retries = 0; // each failure reaches the pusher
    let client = ServiceClient::new(config).unwrap();
    let pusher = Pusher::new(app.pool.clone(), client, Arc::new(Notify::new()));
    sandbox.fail_next(&[503, 503]);

    let now = Utc::now();
    let Some(Attempted::Retry {
        next_attempt_at, ..
    }) = pusher.try_push(now).await.unwrap()
    else {
        panic!("the first attempt fails")
    };
    let status_after_one = status(&app).await;
    assert_eq!(status_after_one["pushes"]["pending"], 1);
    assert_eq!(status_after_one["pushes"]["retrying"], 1);
    assert!(
        status_after_one["pushes"]["lastPushError"]
            .as_str()
            .unwrap()
            .contains("503")
    );
    assert_eq!(
        pusher.try_push(now).await.unwrap(),
        None,
        "not due before its backoff"
    );
    let first_retry = chrono::DateTime::parse_from_rfc3339(&next_attempt_at)
        .unwrap()
        .with_timezone(&Utc);
    assert!(first_retry > now);
    let Some(Attempted::Retry {
        next_attempt_at: second,
        ..
    }) = pusher.try_push(first_retry).await.unwrap()
    else {
        panic!("the second attempt fails")
    };
    let second_retry = chrono::DateTime::parse_from_rfc3339(&second)
        .unwrap()
        .with_timezone(&Utc);
    assert!(
        second_retry - first_retry > first_retry - now,
        "the backoff grows"
    );
    assert_eq!(
        pusher.try_push(second_retry).await.unwrap(),
        Some(Attempted::Sent { seq: recorded.seq })
    );

    let pushed = status(&app).await;
    assert_eq!(pushed["pushes"]["pending"], 0);
    assert_eq!(pushed["pushes"]["sent"], 1);
    let attempts = app
        .count(&format!(
            "SELECT CAST(attempts AS BIGINT) FROM pushes WHERE seq = {}",
            recorded.seq
        ))
        .await;
    assert_eq!(attempts, 3);
    let upstream = sandbox
        .leads()
        .into_iter()
        .find(|l| l.id == lead.id)
        .unwrap();
    assert!(upstream.global_opted_out, "the service has the change");
    let feed = json_of(app.admin_get("/v1/consent/changes").await).await;
    assert_eq!(feed["items"][0]["push"], "sent");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(the_returning_webhook_is_recognised_as_the_echo_of_the_local_change);
async fn the_returning_webhook_is_recognised_as_the_echo_of_the_local_change(backend: Backend) {
    let sandbox = sandbox().await;
    let lead = opted_in_lead(&sandbox);
    // No service configured: the daemon's own pusher stays off and this test drives one.
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    sandbox
        .register_webhook(
            &app.url(&app.settings.ingest.path),
            common::SECRET,
            WebhookConfig::all_consent(),
        )
        .expect("registration");

    let change = json!({"phoneNumber": lead.phone_number, "organizationId": lead.organization_id,
                        "optedOut": true});
    let recorded = json_of(app.admin_post("/v1/consent", &change).await).await;
    let seq = recorded["seq"].as_i64().unwrap();

    // The pusher sends the PATCH, the sandbox delivers its webhook, the worker applies it.
    let client = ServiceClient::new(common::client_config(&sandbox)).unwrap();
    let pusher = Pusher::new(app.pool.clone(), client, Arc::new(Notify::new()));
    assert_eq!(
        pusher.try_push(Utc::now()).await.unwrap(),
        Some(Attempted::Sent { seq })
    );
    assert!(
        sandbox.settle(Duration::from_secs(10)).await,
        "the webhook left the sandbox"
    );
    app.drain().await;
    let feed = json_of(app.admin_get("/v1/consent/changes").await).await;
    let entries = feed["items"].as_array().unwrap().clone();
    let local = entries
        .iter()
        .find(|e| e["seq"] == seq)
        .expect("the local entry");
    let echo = entries
        .iter()
        .find(|e| e["echoOf"] == seq)
        .expect("the echo is recognised");
    assert_eq!(local["push"], "sent");
    assert_eq!(echo["source"], "webhook");
    assert_eq!(echo["optedOut"], true);
    assert_eq!(echo["superseded"], false);
    assert_eq!(
        echo["occurredAt"], local["occurredAt"],
        "the echo carries the time of the change it echoes"
    );
    assert_eq!(entries.len(), 2, "no other change was recorded");
    let path = format!(
        "/v1/consent?phoneNumber={}",
        lead.phone_number.replace('+', "%2B")
    );
    let current = json_of(app.admin_get(&path).await).await;
    assert_eq!(current["items"].as_array().unwrap().len(), 1);
    assert_eq!(current["items"][0]["optedOut"], true);
    assert_eq!(
        current["items"][0]["source"], "local",
        "the echo did not replace the change"
    );
    let reason = app
        .texts(&format!(
            "SELECT reason FROM ledger WHERE seq = {}",
            echo["seq"]
        ))
        .await;
    assert_eq!(reason, [format!("echo of local change seq {seq}")]);
    // The push knows its echo (the metric counting echoes is process-wide, shared by
    // every test of this binary, so this daemon's own record is what is checked).
    let echo_ref = app
        .texts(&format!("SELECT echo_ref FROM pushes WHERE seq = {seq}"))
        .await;
    assert_eq!(echo_ref, [echo["eventRef"].as_str().unwrap()]);
    app.stop().await;
    sandbox.shutdown().await;
}

const BIN: &str = env!("CARGO_BIN_EXE_outreach-sync");

fn cli(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .args(args)
        .env(
            "OUTREACH_SYNC__DATABASE__URL",
            format!("sqlite://{}/cli.db", dir.display()),
        )
        .env("OUTREACH_SYNC__WEBHOOK__SECRETS", common::SECRET)
        .output()
        .expect("run the binary")
}

#[test]
fn the_opt_out_and_opt_in_commands_queue_changes_and_refuse_a_bad_number_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad = cli(dir.path(), &["opt-out", "5550001", "--org", "org_1"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("E.164"));
    let no_org = cli(dir.path(), &["opt-in", "+15550001234", "--org", ""]);
    assert_eq!(no_org.status.code(), Some(2));
    let out = cli(
        dir.path(),
        &[
            "opt-out",
            "+15550001234",
            "--org",
            "org_1",
            "--tag",
            "tag_stop",
            "--reason",
            "called in",
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recorded: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(recorded["push"], "pending");
    let opt_in = cli(dir.path(), &["opt-in", "+15550001234", "--org", "org_1"]);
    assert_eq!(opt_in.status.code(), Some(0));
    let status = cli(dir.path(), &["status", "--json"]);
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    // The opt-out was never attempted: the newer opt-in supersedes it.
    assert_eq!(status["pushes"]["pending"], 1);
    let text = cli(dir.path(), &["status"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("pending pushes:        1"));
    let history = cli(dir.path(), &["history", "+15550001234", "--json"]);
    let history: Value = serde_json::from_slice(&history.stdout).unwrap();
    let pushes: Vec<&str> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["push"].as_str().unwrap())
        .collect();
    assert_eq!(pushes, ["superseded", "pending"]);
}
