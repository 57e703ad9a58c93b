//! What the real process writes to stdout and stderr at the most verbose levels: no secret,
//! ever, and every delivery's outcome once with its dedup key. Secrets come the way systemd
//! hands them over: `_file` keys relative to `$CREDENTIALS_DIRECTORY`.

use crate::daemon_process;

use std::path::Path;
use std::time::Duration;

use crate::common::within;
use base64::Engine as _;
use daemon_process::{Daemon, SECRET, Signer, command};
use outreach_sync_sandbox::{Sandbox, SandboxConfig};
use serde_json::Value;

const WEBHOOK_SECRET: &str = "whsecret-log-test-7f3a9c";
const ADMIN_TOKEN: &str = "admintoken-log-test-51be0d";
const CLIENT_SECRET: &str = "clientsecret-log-test-c0ffee";
const CLIENT_ID: &str = "logs@example.org";

/// The credentials directory systemd would make, and the environment that points at it.
fn credentials(dir: &Path, sandbox_url: &str, format: &str) -> Vec<(String, String)> {
    let credentials = dir.join("credentials");
    std::fs::create_dir_all(&credentials).unwrap();
    std::fs::write(
        credentials.join("webhook-secrets"),
        format!("{WEBHOOK_SECRET}\n"),
    )
    .unwrap();
    // A named token: the name may be logged (it is the actor of changes), the token never.
    std::fs::write(
        credentials.join("admin-tokens"),
        format!("ops:{ADMIN_TOKEN}\n"),
    )
    .unwrap();
    std::fs::write(
        credentials.join("client-secret"),
        format!("{CLIENT_SECRET}\n"),
    )
    .unwrap();
    [
        (
            "CREDENTIALS_DIRECTORY",
            credentials.display().to_string().as_str(),
        ),
        ("OUTREACH_SYNC__WEBHOOK__SECRETS_FILE", "webhook-secrets"),
        ("OUTREACH_SYNC__ADMIN__TOKENS_FILE", "admin-tokens"),
        (
            "OUTREACH_SYNC__SERVICE__CLIENT_SECRET_FILE",
            "client-secret",
        ),
        ("OUTREACH_SYNC__SERVICE__CLIENT_ID", CLIENT_ID),
        ("OUTREACH_SYNC__SERVICE__BASE_URL", sandbox_url),
        ("OUTREACH_SYNC__RECONCILE__ON_START", "true"),
        ("OUTREACH_SYNC__INGEST__MAX_BODY_BYTES", "4096"),
        ("OUTREACH_SYNC__LOG__LEVEL", "debug,outreach_sync=trace"),
        ("OUTREACH_SYNC__LOG__FORMAT", format),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Every form a secret could leak in.
fn secret_forms() -> Vec<String> {
    let basic = base64::engine::general_purpose::STANDARD;
    vec![
        WEBHOOK_SECRET.into(),
        ADMIN_TOKEN.into(),
        CLIENT_SECRET.into(),
        SECRET.into(),
        basic.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}")),
        basic.encode(CLIENT_SECRET),
    ]
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in secret_forms() {
        assert!(!text.contains(&secret), "{what} shows `{secret}`:\n{text}");
    }
}

/// Runs `serve` with every kind of delivery, admin calls and a reconciliation pass, then
/// `check-config`; returns the daemon's output.
async fn drive(format: &str) -> String {
    let sandbox = Sandbox::spawn(SandboxConfig {
        client_id: CLIENT_ID.into(),
        client_secret: CLIENT_SECRET.into(),
        leads: 20,
        activity_interval: None,
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = credentials(dir.path(), &sandbox.base_url(), format);
    let mut daemon = Daemon::start(dir.path(), "serve", &env).await;
    assert!(
        within(Duration::from_secs(20), async || sandbox
            .stats()
            .token_requests
            >= 1)
        .await
        .is_some(),
        "the daemon asks for a token with the client secret: {}",
        daemon.logs()
    );

    let http = reqwest::Client::new();
    let post = |body: &str, headers: Vec<(String, String)>| {
        let request = headers
            .into_iter()
            .fold(http.post(daemon.url("/webhooks")), |r, (n, v)| {
                r.header(n, v)
            })
            .body(body.to_string());
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let signer = Signer::new(WEBHOOK_SECRET);
    let event = |id: &str| {
        serde_json::json!({
            "type": "consentUpdate-v1", "id": id, "createdAt": "2026-11-21T10:00:00Z",
            "data": {"organizationId": "org_1", "phoneNumber": "+15550001111", "globalOptedOut": true}
        })
        .to_string()
    };
    let (one, two) = (event("evt_log_1"), event("evt_log_2"));
    assert_eq!(post(&one, signer.headers(one.as_bytes())).await, 200);
    assert_eq!(post(&two, signer.headers(two.as_bytes())).await, 200);
    assert_eq!(post(&one, signer.headers(one.as_bytes())).await, 200);
    let forged = event("evt_forged");
    let wrong = Signer::new("not-the-secret").headers(forged.as_bytes());
    assert_eq!(post(&forged, wrong).await, 401);
    assert_eq!(post(&forged, Vec::new()).await, 401);
    assert_eq!(post("{not json", signer.headers(b"{not json")).await, 400);
    let large = format!(r#"{{"id":"big","pad":"{}"}}"#, "x".repeat(8192));
    assert_eq!(post(&large, signer.headers(large.as_bytes())).await, 413);

    let status = http
        .get(daemon.admin_url("/v1/status"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(status.status(), 200);
    let refused = http
        .get(daemon.admin_url("/v1/status"))
        .bearer_auth(format!("{ADMIN_TOKEN}x"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let lead = sandbox.leads().into_iter().next().expect("a seeded lead");
    let change = http
        .post(daemon.admin_url("/v1/consent"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&serde_json::json!({
            "phoneNumber": lead.phone_number,
            "organizationId": lead.organization_id,
            "optedOut": true,
            "reason": "logs test",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(change.status(), 202);
    let pushed = sandbox.stats().api_requests;
    assert!(
        within(Duration::from_secs(10), async || sandbox
            .stats()
            .api_requests
            > pushed)
        .await
        .is_some(),
        "the pusher calls the service: {}",
        daemon.logs()
    );

    for args in [&["check-config"][..], &["--json", "check-config"][..]] {
        let mut env = env.clone();
        env.push(("OUTREACH_SYNC__INGEST__BIND".into(), "127.0.0.1:0".into()));
        let output = command(dir.path(), args, &env).output().unwrap();
        assert!(output.status.success(), "{args:?}: {output:?}");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(text.contains("[redacted]"), "{text}");
        assert_no_secret(&format!("{args:?}"), &text);
    }

    daemon.signal(libc::SIGTERM);
    let exit = daemon.exit_within(Duration::from_secs(10)).await;
    assert!(exit.is_some_and(|s| s.success()), "{}", daemon.logs());
    sandbox.shutdown().await;
    let logs = daemon.logs();
    println!("{format}: {} lines of output checked", logs.lines().count());
    logs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_appears_in_text_logs_at_trace_level() {
    let logs = drive("text").await;

    assert!(logs.contains("TRACE") || logs.contains("DEBUG"), "{logs}");
    assert_no_secret("the daemon's output", &logs);
    // The leader logs the chain's head as it starts leading (then every hour).
    assert!(logs.contains("ledger chain head"), "{logs}");
    for (key, outcome) in [
        ("event:evt_log_2", "accepted"),
        ("event:evt_log_1", "duplicate"),
    ] {
        let lines = logs
            .lines()
            .filter(|l| l.contains(key) && l.contains(&format!("outcome=\"{outcome}\"")))
            .count();
        assert_eq!(lines, 1, "{key} {outcome}: {logs}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_appears_in_json_logs_and_each_outcome_is_logged_once_with_its_dedup_key() {
    let logs = drive("json").await;

    assert_no_secret("the daemon's output", &logs);
    let lines: Vec<Value> = logs
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["level"] == "TRACE" || l["level"] == "DEBUG"),
        "{logs}"
    );
    let outcomes: Vec<(Option<&str>, &str)> = lines
        .iter()
        .filter(|l| l["target"] == "outreach_sync::ingest")
        .filter_map(|l| Some((l["span"]["dedup_key"].as_str(), l["outcome"].as_str()?)))
        .collect();
    let mut expected = vec![
        (Some("event:evt_log_1"), "accepted"),
        (Some("event:evt_log_2"), "accepted"),
        (Some("event:evt_log_1"), "duplicate"),
        (None, "rejected"),
        (None, "rejected"),
        (None, "not_json"),
        (None, "too_large"),
    ];
    let mut seen = outcomes.clone();
    expected.sort();
    seen.sort();
    assert_eq!(seen, expected, "one outcome line per delivery: {logs}");
}
