//! The account served, written as one `[[account]]` table: its own ingest path, its own
//! signing secrets, its own credentials for the service; and the configurations that are
//! refused at start, naming the key.

use crate::daemon_process::{self, Daemon, Signer, config_file, numbered_consent_event};
use outreach_sync_sandbox::{Sandbox, SandboxConfig};

const PARTY_SECRET: &str = "party-webhook-secret-1";

fn account_config(sandbox: &outreach_sync_sandbox::RunningSandbox) -> String {
    format!(
        r#"
[[account]]
name = "party"
base_url = "{service}"
client_id = "{client_id}"
client_secret = "{client_secret}"
requests_per_second = 1000

[account.webhook]
secrets = ["{PARTY_SECRET}"]
"#,
        service = sandbox.base_url(),
        client_id = sandbox.config().client_id,
        client_secret = sandbox.config().client_secret,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_account_is_served_on_its_own_path_verified_with_its_secrets_and_reconciled_with_its_keys()
 {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 50,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(config_file(dir.path()), account_config(&sandbox)).expect("config");

    // The account's keys reach the service: a pass mirrors its leads.
    let output = daemon_process::command(dir.path(), &["reconcile"], &[])
        .output()
        .expect("run reconcile");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let daemon = Daemon::start(dir.path(), "party", &[]).await;
    let http = reqwest::Client::new();
    let post = async |path: &str, secret: &str| {
        let (_, body) = numbered_consent_event(1, 1000);
        let mut request = http.post(daemon.url(path)).body(body.clone());
        for (name, value) in Signer::new(secret).headers(body.as_bytes()) {
            request = request.header(name, value);
        }
        request.send().await.expect("an answer").status().as_u16()
    };
    assert_eq!(post("/webhooks/party", PARTY_SECRET).await, 200);
    assert_eq!(
        post("/webhooks/party", daemon_process::SECRET).await,
        401,
        "a delivery signed with another secret is refused"
    );
    assert_eq!(
        post("/webhooks", PARTY_SECRET).await,
        404,
        "the default path is not this account's"
    );
    let metrics = crate::common::metrics_text(&http, daemon.admin_url("/metrics")).await;
    assert_eq!(
        crate::common::series_value(
            &metrics,
            "outreach_sync_deliveries_total{outcome=\"unknown_path\"}"
        )
        .as_deref(),
        Some("1"),
        "the delivery to no account's path is counted with the refusals: {metrics}"
    );
    let status: serde_json::Value = daemon_process::command(dir.path(), &["status", "--json"], &[])
        .output()
        .map(|o| serde_json::from_slice(&o.stdout).expect("status is JSON"))
        .expect("run status");
    let leads = status["leads"].as_u64().unwrap_or_default();
    assert!(leads >= 50, "the account's leads are mirrored: {status}");
    drop(daemon);
    sandbox.shutdown().await;
}

#[test]
fn service_beside_an_account_and_several_accounts_are_refused_at_start_naming_the_key() {
    let dir = tempfile::tempdir().expect("dir");
    let account = |name: &str| {
        format!(
            "[[account]]\nname = \"{name}\"\nbase_url = \"https://api.example.org\"\nclient_id = \"{name}@example.org\"\nclient_secret = \"TOPSECRET\"\n[account.webhook]\nsecrets = [\"s-{name}\"]\n"
        )
    };
    for (config, key) in [
        (
            format!("[service]\nclient_id = \"x\"\n{}", account("party")),
            "`service`",
        ),
        (account("party") + &account("candidate"), "`account`"),
        (account("party") + &account("party"), "`account.name`"),
    ] {
        std::fs::write(config_file(dir.path()), &config).expect("config");
        let output = daemon_process::command(dir.path(), &["serve"], &[])
            .output()
            .expect("run serve");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(key), "{key}: {stderr}");
        assert!(!stderr.contains("TOPSECRET"), "{stderr}");
    }
}
