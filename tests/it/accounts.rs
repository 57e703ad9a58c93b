//! The account served, written as one `[[account]]` table: its own ingest path, its own
//! signing secrets, its own credentials for the service; and the configurations that are
//! refused at start, naming the key.

use crate::daemon_process::{self, Daemon, Signer, config_file, numbered_consent_event};
use outreach_sync_sandbox::{Sandbox, SandboxConfig};

const PARTY_SECRET: &str = "party-webhook-secret-1";

/// Runs `outreach-sync ARGS` in `dir`, which must succeed.
fn succeeds(dir: &std::path::Path, args: &[&str]) {
    let output = daemon_process::command(dir, args, &[])
        .output()
        .expect("run outreach-sync");
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

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
    succeeds(dir.path(), &["reconcile"]);

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
    assert_eq!(
        crate::common::series_value(
            &metrics,
            "outreach_sync_deliveries_total{account=\"party\",outcome=\"rejected\"}"
        )
        .as_deref(),
        Some("1"),
        "the refusal on the account's path is counted as the account's: {metrics}"
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
fn service_beside_an_account_and_accounts_that_collide_are_refused_at_start_naming_the_key() {
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
        (
            account("party")
                + &account("candidate").replace(
                    "name = \"candidate\"\n",
                    "name = \"candidate\"\ningest_path = \"/webhooks/party\"\n",
                ),
            "`account.ingest_path`",
        ),
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

/// As found by a hostile tester: each of these passed `check-config`; the first four made
/// `serve` panic building its router (exit 101), the others were served wrongly (a path no
/// client reaches, a health check taken, a name `accountId=` refuses, one secret verifying
/// another account's deliveries, sections silently unread, credentials in clear text or
/// printed). Now `check-config` and `serve` refuse each, exit 2, naming the key and never
/// the secret.
#[test]
fn configurations_serve_could_not_honour_are_refused_by_check_config_and_serve_naming_the_key() {
    let dir = tempfile::tempdir().expect("dir");
    let account = |name: &str, extra: &str, secret: &str| {
        format!(
            "[[account]]\nname = \"{name}\"\nbase_url = \"https://api.example.org\"\nclient_id = \"c\"\nclient_secret = \"TOPSECRET-client\"\n{extra}\n[account.webhook]\nsecrets = [\"{secret}\"]\n\n"
        )
    };
    let path = |path: &str| format!("ingest_path = \"{path}\"");
    let party = account("party", "", "TOPSECRET-1");
    let cases = [
        (
            account("party", &path("/webhooks/:x"), "s"),
            "account.ingest_path",
        ),
        (
            account("party", &path("/webhooks/{"), "s"),
            "account.ingest_path",
        ),
        (
            account("party", &path("/webhooks/{a}"), "s1")
                + &account("candidate", &path("/webhooks/{b}"), "s2"),
            "account.ingest_path",
        ),
        (
            account("party", &path("/webhooks/{*rest}"), "s"),
            "account.ingest_path",
        ),
        (
            account("party", &path("/webhooks/café"), "s"),
            "account.ingest_path",
        ),
        (
            party.clone() + &account("candidate", &path("/healthz"), "s2"),
            "account.ingest_path",
        ),
        (
            party.clone() + &account("candidate", &path("/sources/twilio"), "s2"),
            "account.ingest_path",
        ),
        (account(&"a".repeat(5_000), "", "s"), "account.name"),
        (
            party.clone() + &account("candidate", "", "TOPSECRET-1"),
            "account.webhook.secrets",
        ),
        (
            format!("[webhook]\nsecrets = [\"TOPSECRET-w\"]\n{party}"),
            "`webhook`",
        ),
        (
            format!("[ingest]\npath = \"/webhooks\"\n{party}"),
            "ingest.path",
        ),
        (
            party.replace("https://api.example.org", "http://api.example.org"),
            "account.base_url",
        ),
        (
            format!(
                "{party}[[destination]]\nname = \"van\"\nkind = \"van\"\nbase_url = \"https://app:TOPSECRET-u@api.securevan.com/v4\"\napi_key = \"TOPSECRET-k\"\n"
            ),
            "destination.base_url",
        ),
    ];
    for (number, (config, key)) in cases.iter().enumerate() {
        std::fs::write(config_file(dir.path()), config).expect("config");
        let commands: &[&str] = if number < 4 {
            &["check-config", "serve"]
        } else {
            &["check-config"]
        };
        for command in commands {
            let output =
                exits_within_a_minute(daemon_process::command(dir.path(), &[command], &[]));
            let stderr = String::from_utf8_lossy(&output.stderr);
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert_eq!(output.status.code(), Some(2), "{command} {key}: {stderr}");
            assert!(stderr.contains(key), "{command} {key}: {stderr}");
            assert!(
                !stderr.contains("TOPSECRET") && !stdout.contains("TOPSECRET"),
                "{command} printed a secret: {stderr}{stdout}"
            );
        }
    }
}

/// `command`'s output once it exits; stopped after a minute (a configuration that should be
/// refused but is not starts a daemon), which the caller's assertions then report.
fn exits_within_a_minute(mut command: std::process::Command) -> std::process::Output {
    use std::process::Stdio;
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run outreach-sync");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().expect("its state").is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait_with_output().expect("its output")
}

/// `config/example.toml`'s commented `[[subscriber]]`, `[[destination]]` and `[[account]]`
/// tables, uncommented: each block from a `# [[name]]` line to the next blank line.
fn example_tables() -> String {
    let text = std::fs::read_to_string(crate::repository("config/example.toml")).expect("example");
    let mut tables = String::new();
    let mut inside = false;
    for line in text.lines() {
        let opens = line.starts_with("# [[") && line.trim_end().ends_with("]]");
        inside = (inside || opens) && line.starts_with('#');
        if inside {
            let uncommented = line
                .strip_prefix("# ")
                .unwrap_or(line.trim_start_matches('#'));
            tables.push_str(uncommented);
            tables.push('\n');
        }
    }
    tables
}

/// The `VALUE`s of `KEY=VALUE` lines of a systemd unit file of the repository.
fn unit_lines(path: &str, key: &str) -> Vec<String> {
    let text = std::fs::read_to_string(crate::repository(path)).expect("unit file");
    let prefix = format!("{key}=");
    text.lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .map(str::to_owned)
        .collect()
}

/// The example's accounts, destinations and subscriber load, as the packaged unit with the
/// drop-in `systemd/accounts.conf` runs the daemon: its environment (minus what the drop-in
/// unsets) and a file for each credential it loads, read through the `_file` keys the
/// example names. Without the drop-in, the unit's single-account secrets are refused.
#[test]
fn the_example_accounts_load_with_the_credentials_the_systemd_drop_in_passes() {
    let dir = tempfile::tempdir().expect("dir");
    let config = example_tables();
    assert!(config.matches("[[account]]").count() >= 2, "{config}");
    std::fs::write(config_file(dir.path()), &config).expect("config");
    let credentials = dir.path().join("credentials");
    std::fs::create_dir(&credentials).expect("credentials");
    let mut ids = unit_lines("systemd/outreach-sync.service", "LoadCredential");
    ids.extend(unit_lines("systemd/accounts.conf", "LoadCredential"));
    for id in &ids {
        let id = id.split(':').next().expect("an id");
        // Base64 (a subscriber's secret is whsec_ + base64), distinct for each file.
        let mut hex: String = id.bytes().map(|b| format!("{b:02x}")).collect();
        while !hex.len().is_multiple_of(4) {
            hex.push('A');
        }
        // A public key is no secret but must be one: an Ed25519 key's 32 bytes.
        let text = match id {
            "telnyx-public-key" => {
                format!("{}\n", outreach_sync_sandbox::DEFAULT_TELNYX_PUBLIC_KEY)
            }
            _ => format!("whsec_CRED{hex}\n"),
        };
        std::fs::write(credentials.join(id), text).expect("credential");
    }
    let unset: Vec<String> = unit_lines("systemd/accounts.conf", "UnsetEnvironment")
        .iter()
        .flat_map(|names| {
            names
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    let unit_env: Vec<(String, String)> =
        unit_lines("systemd/outreach-sync.service", "Environment")
            .iter()
            .filter_map(|assignment| assignment.split_once('='))
            .filter(|(name, _)| !name.ends_with("DATABASE__URL"))
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect();
    let directory = (
        "CREDENTIALS_DIRECTORY".to_owned(),
        credentials.display().to_string(),
    );
    let with_drop_in: Vec<(String, String)> = unit_env
        .iter()
        .filter(|(name, _)| !unset.contains(name))
        .cloned()
        .chain([directory.clone()])
        .collect();
    let output = daemon_process::command(dir.path(), &["check-config"], &with_drop_in)
        .output()
        .expect("run check-config");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert_eq!(output.status.code(), Some(0), "{stderr}\n{config}");
    for shown in [
        "name = \"party\"",
        "name = \"candidate\"",
        "van-main",
        "crm",
    ] {
        assert!(stdout.contains(shown), "{shown}: {stdout}");
    }
    assert!(
        !stdout.contains("CRED") && !stderr.contains("CRED"),
        "{stdout}{stderr}"
    );

    let without: Vec<(String, String)> = unit_env.into_iter().chain([directory]).collect();
    let output = daemon_process::command(dir.path(), &["check-config"], &without)
        .output()
        .expect("run check-config");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`webhook`") || stderr.contains("`service`"),
        "{stderr}"
    );
}

/// One reconciliation page of `leads`, applied as the account `account`'s.
async fn mirror_in(
    app: &crate::common::TestApp,
    account: &str,
    pass: &str,
    leads: &[serde_json::Value],
) {
    let leads: Vec<outreach_sync::model::Lead> = leads
        .iter()
        .map(|lead| serde_json::from_value(lead.clone()).expect("a lead"))
        .collect();
    let mut conn = app
        .pool
        .bulk_connection(1024, 1000)
        .await
        .expect("a connection");
    let mut tx = conn.begin_write().await.expect("begin");
    outreach_sync::apply::lead_page(
        &mut tx,
        &crate::common::account(account),
        pass,
        &leads,
        chrono::Utc::now(),
    )
    .await
    .expect("a page");
    tx.commit().await.expect("commit");
}

/// [`lead`], holding `van_id` in its custom field `VanID`.
fn lead_with_van_id(phone: &str, van_id: u64, opted_out: bool) -> serde_json::Value {
    let mut lead = lead(phone, opted_out);
    lead["customFields"] = serde_json::json!({"VanID": van_id.to_string()});
    lead
}

fn lead(phone: &str, opted_out: bool) -> serde_json::Value {
    serde_json::json!({"id": "lead_1", "organizationId": "org_1", "phoneNumber": phone,
                       "globalOptedOut": opted_out})
}

crate::common::on_both_backends!(
    two_accounts_using_the_same_lead_and_organization_ids_keep_their_leads_consent_and_entries_apart
);
async fn two_accounts_using_the_same_lead_and_organization_ids_keep_their_leads_consent_and_entries_apart(
    backend: crate::common::Backend,
) {
    use outreach_sync::ledger;
    let Some(app) = crate::common::spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let phone = "+15550000001";
    // The same lead id, organization and number in both accounts: opted out in one only.
    mirror_in(&app, "party", "pass_1", &[lead(phone, true)]).await;
    mirror_in(&app, "candidate", "pass_1", &[lead(phone, false)]).await;
    let current = ledger::current(&app.pool, phone, None)
        .await
        .expect("current");
    let seen: Vec<(&str, &str, bool)> = current
        .iter()
        .map(|r| {
            (
                r.account_id.as_str(),
                r.organization_id.as_str(),
                r.opted_out,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("candidate", "org_1", false), ("party", "org_1", true)],
        "{current:?}"
    );

    // A later page of one account changes that account's consent only.
    mirror_in(&app, "candidate", "pass_2", &[lead(phone, true)]).await;
    mirror_in(&app, "party", "pass_2", &[lead(phone, false)]).await;
    let current = ledger::current(&app.pool, phone, None)
        .await
        .expect("current");
    let seen: Vec<(&str, bool)> = current
        .iter()
        .map(|r| (r.account_id.as_str(), r.opted_out))
        .collect();
    assert_eq!(seen, [("candidate", true), ("party", false)]);

    // Every entry says its account, and the chain over both accounts' entries holds.
    let history = ledger::history(&app.pool, phone, None)
        .await
        .expect("history");
    let accounts: Vec<&str> = history.iter().map(|e| e.account_id.as_str()).collect();
    assert_eq!(accounts, ["party", "candidate", "candidate", "party"]);
    let head = ledger::chain::verify(&app.pool)
        .await
        .expect("a walk")
        .expect("an intact chain");
    assert_eq!(head.seq, 4);
    // PostgreSQL's own function of the encoding gives the hashes the daemon wrote.
    if let outreach_sync::store::Pool::Postgres(pg) = &app.pool {
        let mismatched: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM ledger AS l
             WHERE l.hash <> ledger_entry_hash(
                 COALESCE((SELECT b.hash FROM ledger AS b WHERE b.seq < l.seq
                           ORDER BY b.seq DESC LIMIT 1), repeat('0', 64)), l)",
        )
        .fetch_one(pg)
        .await
        .expect("hashes");
        assert_eq!(mismatched, 0);
    }
    app.stop().await;
}

/// Two accounts of the service, each its own sandbox with its own credentials; the same
/// seed makes their lead, organization ids and numbers collide.
async fn two_sandboxes() -> (
    outreach_sync_sandbox::RunningSandbox,
    outreach_sync_sandbox::RunningSandbox,
) {
    let spawn = async |name: &str| {
        Sandbox::spawn(SandboxConfig {
            leads: 20,
            organizations: 1,
            client_id: format!("{name}-client"),
            client_secret: format!("{name}-client-secret"),
            ..SandboxConfig::default()
        })
        .await
        .expect("sandbox")
    };
    (spawn("party").await, spawn("candidate").await)
}

fn two_accounts_config(
    party: &outreach_sync_sandbox::RunningSandbox,
    candidate: &outreach_sync_sandbox::RunningSandbox,
) -> String {
    let account = |name: &str, sandbox: &outreach_sync_sandbox::RunningSandbox| {
        format!(
            "[[account]]\nname = \"{name}\"\nbase_url = \"{}\"\nclient_id = \"{}\"\nclient_secret = \"{}\"\nrequests_per_second = 1000\n[account.webhook]\nsecrets = [\"{name}-webhook-secret\"]\n\n",
            sandbox.base_url(),
            sandbox.config().client_id,
            sandbox.config().client_secret,
        )
    };
    account("party", party)
        + &account("candidate", candidate)
        + "[consent]\nshare_across_accounts = true\n"
}

/// A signed consent change of `lead` (as the service announces it) to `path`.
async fn post_consent(
    daemon: &Daemon,
    (path, secret): (&str, &str),
    lead: &outreach_sync_sandbox::wire::Lead,
    opted_out: bool,
) -> u16 {
    let body = serde_json::json!({
        "type": "consentUpdate-v1", "id": format!("evt_{opted_out}_{}", lead.id),
        "createdAt": chrono::Utc::now().to_rfc3339(),
        "data": {"id": lead.id, "type": "lead", "organizationId": lead.organization_id,
                 "phoneNumber": lead.phone_number, "globalOptedOut": opted_out},
    })
    .to_string();
    let mut request = reqwest::Client::new()
        .post(daemon.url(path))
        .body(body.clone());
    for (name, value) in Signer::new(secret).headers(body.as_bytes()) {
        request = request.header(name, value);
    }
    request.send().await.expect("an answer").status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opt_out_given_to_one_account_is_recorded_suppressed_and_pushed_in_the_other() {
    const PARTY: &str = "party-webhook-secret";
    let (party, candidate) = two_sandboxes().await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        config_file(dir.path()),
        two_accounts_config(&party, &candidate),
    )
    .expect("config");
    // Each account in turn, each with its own keys: both mirrors, the same lead ids twice.
    succeeds(dir.path(), &["reconcile", "--json"]);
    let token = (
        "OUTREACH_SYNC__ADMIN__TOKENS".to_owned(),
        "ops:accounts-token".to_owned(),
    );
    let daemon = Daemon::start(dir.path(), "accounts", &[token]).await;
    let status: serde_json::Value = daemon_process::command(dir.path(), &["status", "--json"], &[])
        .output()
        .map(|o| serde_json::from_slice(&o.stdout).expect("status is JSON"))
        .expect("run status");
    assert_eq!(
        status["leads"].as_u64(),
        Some(40),
        "20 leads of each account: {status}"
    );

    let (lead, twin) = twins(&party, &candidate);
    assert!(!twin.global_opted_out);
    // Each account's path takes its own signatures only.
    assert_eq!(
        post_consent(&daemon, ("/webhooks/candidate", PARTY), &lead, true).await,
        401,
        "a delivery signed for one account is refused on another's path"
    );
    assert_eq!(
        post_consent(&daemon, ("/webhooks/party", PARTY), &lead, true).await,
        200
    );

    // The other account's service is told: its lead with that number is opted out there.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let there = candidate.leads().into_iter().find(|l| l.id == twin.id);
        if there.is_some_and(|l| l.global_opted_out) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the opt-out never reached the other account's service:\n{}",
            daemon.logs()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The ledger says so: in the candidate account, an account-wide entry (which
    // suppresses the number) and the organization's, local, shared, naming the original.
    let output =
        daemon_process::command(dir.path(), &["history", &lead.phone_number, "--json"], &[])
            .output()
            .expect("run history");
    let history: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let entries = history["items"].as_array().cloned().unwrap_or_default();
    let original = entries
        .iter()
        .find(|e| e["accountId"] == "party" && e["source"] == "webhook")
        .unwrap_or_else(|| panic!("the original opt-out: {history}"));
    let shared: Vec<&serde_json::Value> = entries
        .iter()
        .filter(|e| e["accountId"] == "candidate" && e["optedOut"] == true)
        .collect();
    let organizations: Vec<&str> = shared
        .iter()
        .filter_map(|e| e["organizationId"].as_str())
        .collect();
    assert!(organizations.contains(&"*"), "{history}");
    assert!(
        organizations.contains(&twin.organization_id.as_str()),
        "{history}"
    );
    for entry in &shared {
        assert_eq!(entry["source"], "local", "{entry}");
        assert_eq!(
            entry["eventRef"],
            format!("shared:{}", original["seq"]),
            "{entry}"
        );
    }
    // An opt-in is never shared: the candidate's lead opting back in there leaves the
    // party's opt-out as it is.
    let candidate_secret = "candidate-webhook-secret";
    let answer = post_consent(
        &daemon,
        ("/webhooks/candidate", candidate_secret),
        &twin,
        false,
    );
    assert_eq!(answer.await, 200);
    let consent =
        daemon_process::command(dir.path(), &["consent", &lead.phone_number, "--json"], &[])
            .output()
            .expect("run consent");
    let consent: serde_json::Value = serde_json::from_slice(&consent.stdout).expect("JSON");
    let state = |account: &str| {
        consent["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["accountId"] == account && r["organizationId"] == lead.organization_id)
            .map(|r| r["optedOut"].clone())
    };
    assert_eq!(state("party"), Some(true.into()), "{consent}");
    assert_eq!(state("candidate"), Some(false.into()), "{consent}");

    // Lookups and the compliance report take one account.
    let json_of = |args: &[&str]| -> serde_json::Value {
        let output = daemon_process::command(dir.path(), args, &[])
            .output()
            .expect("run the command");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("JSON")
    };
    let accounts_of = |value: &serde_json::Value| -> Vec<String> {
        let items = value["items"].as_array().cloned().unwrap_or_default();
        items
            .iter()
            .map(|i| i["accountId"].as_str().unwrap_or("?").to_owned())
            .collect()
    };
    let only = json_of(&[
        "consent",
        &lead.phone_number,
        "--account",
        "party",
        "--json",
    ]);
    let accounts = accounts_of(&only);
    assert!(
        !accounts.is_empty() && accounts.iter().all(|a| a == "party"),
        "{only}"
    );
    let report = json_of(&[
        "report",
        "compliance",
        "--account",
        "candidate",
        "--format",
        "json",
    ]);
    let accounts = accounts_of(&report);
    assert!(
        !accounts.is_empty() && accounts.iter().all(|a| a == "candidate"),
        "the shared opt-outs are the candidate's: {report}"
    );
    // The party's opt-out counts the candidate account as one of its destinations, had
    // once its copy was recorded and pushed there.
    let report = json_of(&[
        "report",
        "compliance",
        "--account",
        "party",
        "--format",
        "json",
    ]);
    let item = report["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["seq"] == original["seq"])
        .cloned()
        .unwrap_or_else(|| panic!("the original in the report: {report}"));
    let candidate_had = item["destinations"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d["name"] == "account:candidate")
        .map(|d| d["honouredAt"].clone());
    assert!(
        candidate_had.as_ref().is_some_and(|at| at.is_string()),
        "{item}"
    );
    // The admin API records a local change in the account it names, and only a served one.
    let change = async |account: &str| {
        let body = serde_json::json!({"phoneNumber": "+15559990000", "organizationId": "org_x",
                                      "optedOut": true, "accountId": account});
        reqwest::Client::new()
            .post(daemon.admin_url("/v1/consent"))
            .bearer_auth("accounts-token")
            .json(&body)
            .send()
            .await
            .expect("an answer")
    };
    let refused = change("nobody").await;
    assert_eq!(refused.status(), 404);
    let said = refused.text().await.unwrap_or_default();
    assert!(said.contains("party, candidate"), "{said}");
    assert_eq!(change("candidate").await.status(), 202);
    let recorded = json_of(&["history", "+15559990000", "--json"]);
    assert_eq!(
        accounts_of(&recorded).first().map(String::as_str),
        Some("candidate"),
        "{recorded}"
    );
    let unknown = daemon_process::command(dir.path(), &["reconcile", "--account", "nobody"], &[])
        .output()
        .expect("run reconcile");
    assert_eq!(unknown.status.code(), Some(2));
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(said.contains("party, candidate"), "{said}");
    drop(daemon);
    party.shutdown().await;
    candidate.shutdown().await;
}

/// The shared copy of an opt-out reached the other account's service; the person then
/// texts START there, and the service's webhook of it is lost. A pass that finds the lead
/// opted in takes that opt-in (the service had the opt-out, by the push answered since the
/// number was suppressed): it does not opt the person out again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opt_in_given_after_a_shared_opt_out_reached_the_service_holds_when_its_webhook_is_lost()
{
    let (party, candidate) = two_sandboxes().await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        config_file(dir.path()),
        two_accounts_config(&party, &candidate),
    )
    .expect("config");
    succeeds(dir.path(), &["reconcile", "--json"]);
    let daemon = Daemon::start(dir.path(), "opt-in-after-share", &[]).await;
    let (lead, twin) = twins(&party, &candidate);
    assert_eq!(
        post_consent(
            &daemon,
            ("/webhooks/party", "party-webhook-secret"),
            &lead,
            true
        )
        .await,
        200
    );
    assert!(
        opted_out_at(&candidate, &twin.id, std::time::Duration::from_secs(30)).await,
        "the shared opt-out reached the other service:\n{}",
        daemon.logs()
    );
    drop(daemon);
    // The sandbox delivers no webhooks here: the START's is lost.
    candidate
        .text_start(&twin.organization_id, &twin.phone_number)
        .expect("START");
    succeeds(
        dir.path(),
        &["reconcile", "--account", "candidate", "--json"],
    );

    let consent = daemon_process::command(
        dir.path(),
        &[
            "consent",
            &twin.phone_number,
            "--account",
            "candidate",
            "--json",
        ],
        &[],
    )
    .output()
    .expect("run consent");
    let consent: serde_json::Value = serde_json::from_slice(&consent.stdout).expect("JSON");
    let mirrored = consent["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["organizationId"] == twin.organization_id)
        .map(|r| r["optedOut"].clone());
    assert_eq!(
        mirrored,
        Some(false.into()),
        "the person's opt-in holds: {consent}"
    );
    party.shutdown().await;
    candidate.shutdown().await;
}

/// A lead of `party` not opted out, and the lead of `candidate` with the same number.
fn twins(
    party: &outreach_sync_sandbox::RunningSandbox,
    candidate: &outreach_sync_sandbox::RunningSandbox,
) -> (
    outreach_sync_sandbox::wire::Lead,
    outreach_sync_sandbox::wire::Lead,
) {
    let lead = party
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .expect("a lead not opted out");
    let twin = candidate
        .leads()
        .into_iter()
        .find(|l| l.phone_number == lead.phone_number)
        .expect("the same number in the other account");
    (lead, twin)
}

/// Waits up to `limit` for the lead `id` of `sandbox` to be opted out there.
async fn opted_out_at(
    sandbox: &outreach_sync_sandbox::RunningSandbox,
    id: &str,
    limit: std::time::Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let lead = sandbox.leads().into_iter().find(|l| l.id == id);
        if lead.is_some_and(|l| l.global_opted_out) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_account_down_holds_up_nothing_of_the_other_and_its_shared_opt_out_arrives_when_it_returns()
 {
    let (party, candidate) = two_sandboxes().await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        config_file(dir.path()),
        two_accounts_config(&party, &candidate),
    )
    .expect("config");
    succeeds(dir.path(), &["reconcile"]);
    let daemon = Daemon::start(dir.path(), "outage", &[]).await;
    let (lead, twin) = twins(&party, &candidate);

    // The candidate's service answers every request with an error from now on.
    let down = outreach_sync_sandbox::ApiFaults {
        rate_5xx: 1.0,
        ..outreach_sync_sandbox::ApiFaults::default()
    };
    candidate.set_api_faults(down);
    succeeds(
        dir.path(),
        &[
            "opt-out",
            &lead.phone_number,
            "--org",
            &lead.organization_id,
            "--account",
            "party",
            "--reason",
            "asked by phone",
        ],
    );
    let limit = std::time::Duration::from_secs(20);
    assert!(
        opted_out_at(&party, &lead.id, limit).await,
        "the party's own push went on while the other account was down:\n{}",
        daemon.logs()
    );
    assert!(
        !opted_out_at(&candidate, &twin.id, std::time::Duration::from_secs(2)).await,
        "the candidate's service is down: nothing reached it"
    );
    // Until then the party's opt-out waits for that account in the compliance report.
    let output = daemon_process::command(
        dir.path(),
        &[
            "report",
            "compliance",
            "--account",
            "party",
            "--format",
            "json",
        ],
        &[],
    )
    .output()
    .expect("run the report");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let waiting: Vec<&serde_json::Value> = report["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["source"] == "local")
        .flat_map(|i| i["destinations"].as_array().into_iter().flatten())
        .filter(|d| d["name"] == "account:candidate")
        .collect();
    assert!(
        !waiting.is_empty() && waiting.iter().all(|d| d["honouredAt"].is_null()),
        "{report}"
    );
    // It comes back: the shared opt-out, waiting in its queue, arrives.
    candidate.set_api_faults(outreach_sync_sandbox::ApiFaults::default());
    assert!(
        opted_out_at(&candidate, &twin.id, std::time::Duration::from_secs(60)).await,
        "the shared opt-out reached the other account once it returned:\n{}",
        daemon.logs()
    );
    drop(daemon);
    party.shutdown().await;
    candidate.shutdown().await;
}

/// An `[[account]]` whose service is nowhere (its pushes wait): its records are what count.
pub(crate) fn unreachable_account(name: &str) -> outreach_sync::settings::AccountSettings {
    outreach_sync::settings::AccountSettings {
        name: name.to_owned(),
        base_url: "http://127.0.0.1:9".to_owned(),
        client_id: format!("{name}-client"),
        client_secret: Some(secrecy::SecretString::from(format!("{name}-secret"))),
        webhook: outreach_sync::settings::WebhookSettings {
            secrets: vec![secrecy::SecretString::from(format!("{name}-webhook"))],
            ..outreach_sync::settings::WebhookSettings::default()
        },
        ..outreach_sync::settings::AccountSettings::default()
    }
}

crate::common::on_both_backends!(
    an_opt_out_shared_with_another_account_suppresses_its_number_there_for_leads_to_come,
    flavor = "multi_thread"
);
async fn an_opt_out_shared_with_another_account_suppresses_its_number_there_for_leads_to_come(
    backend: crate::common::Backend,
) {
    use outreach_sync::ledger;
    let Some(app) = crate::common::spawn_app_on(backend, |settings| {
        crate::common::with_admin_token(settings);
        settings.account = vec![
            unreachable_account("party"),
            unreachable_account("candidate"),
        ];
        settings.consent.share_across_accounts = true;
    })
    .await
    else {
        return;
    };
    let phone = "+15550000001";
    let in_candidate = crate::common::account("candidate");
    mirror_in(&app, "candidate", "pass_1", &[lead(phone, false)]).await;
    let change = serde_json::json!({"phoneNumber": phone, "organizationId": "org_9",
                                    "optedOut": true, "accountId": "party"});
    assert_eq!(app.admin_post("/v1/consent", &change).await.status(), 202);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
    let candidate = loop {
        let now = ledger::current_with_suppression(
            &app.pool,
            phone,
            outreach_sync::model::Scope::everywhere().in_account(Some(&in_candidate)),
        )
        .await
        .expect("current");
        if now.suppressed {
            break now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never shared: {now:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let states: Vec<(&str, bool)> = candidate
        .items
        .iter()
        .map(|r| (r.organization_id.as_str(), r.opted_out))
        .collect();
    assert_eq!(states, [("*", true), ("org_1", true)], "{candidate:?}");
    // A lead that appears later in the candidate account with the number is opted out.
    let newcomer = serde_json::json!({"id": "lead_2", "organizationId": "org_2",
                                      "phoneNumber": phone, "globalOptedOut": false});
    mirror_in(&app, "candidate", "pass_2", &[newcomer]).await;
    let org_2 = ledger::current(&app.pool, phone, Some("org_2"))
        .await
        .expect("current");
    assert_eq!(org_2.len(), 1);
    assert!(
        org_2[0].opted_out && org_2[0].account_id == "candidate",
        "{org_2:?}"
    );
    // The candidate's service reports the opt-out sharing pushed there (reconciliation
    // finds its lead opted out): that is no new opt-out of the person's, not shared back.
    let mut confirmed = lead(phone, true);
    confirmed["updatedAt"] = serde_json::json!(chrono::Utc::now().to_rfc3339());
    mirror_in(&app, "candidate", "pass_3", &[confirmed]).await;
    // Sharing goes in seq order: once a later opt-out is shared, it has passed that one.
    let later = serde_json::json!({"phoneNumber": "+15550000002", "organizationId": "org_9",
                                   "optedOut": true, "accountId": "party"});
    assert_eq!(app.admin_post("/v1/consent", &later).await.status(), 202);
    crate::common::eventually(
        "a later opt-out shared",
        std::time::Duration::from_secs(15),
        async || {
            ledger::current_with_suppression(
                &app.pool,
                "+15550000002",
                outreach_sync::model::Scope::everywhere().in_account(Some(&in_candidate)),
            )
            .await
            .expect("current")
            .suppressed
            .then_some(())
        },
    )
    .await;
    // The party's own opt-out is not shared back to it, and nothing was shared twice.
    let history = ledger::history(&app.pool, phone, None)
        .await
        .expect("history");
    let party: Vec<&str> = history
        .iter()
        .filter(|e| e.account_id == "party")
        .map(|e| e.event_ref.as_str())
        .collect();
    assert_eq!(party.len(), 1, "{party:?}");
    app.stop().await;
}

crate::common::on_both_backends!(
    lookups_and_destinations_take_each_accounts_own_lead_when_their_ids_collide,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn lookups_and_destinations_take_each_accounts_own_lead_when_their_ids_collide(
    backend: crate::common::Backend,
) {
    use outreach_sync::settings::{DestinationSettings, SystemSettings};
    let van = Sandbox::spawn(SandboxConfig {
        leads: 1,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let (party_phone, candidate_phone) = ("+15550000101", "+15550000102");
    let (party_van_id, candidate_van_id) = (
        van.van_add_person(party_phone),
        van.van_add_person(candidate_phone),
    );
    let Some(app) = crate::common::spawn_app_on(backend, |settings| {
        crate::common::with_admin_token(settings);
        settings.account = vec![
            unreachable_account("candidate"),
            unreachable_account("party"),
        ];
        let mut destination = DestinationSettings::new(
            "van-main",
            SystemSettings::Van(Default::default()),
            &van.van_url(),
            outreach_sync_sandbox::DEFAULT_VAN_KEY,
        );
        destination.requests_per_second = Some(1_000);
        // One committee both accounts write into (a VAN destination names its accounts).
        destination.scope.accounts = vec!["candidate".to_owned(), "party".to_owned()];
        settings.destination = vec![destination];
    })
    .await
    else {
        return;
    };
    // The same lead id in both accounts: different people, different VAN IDs. The party's
    // lead opts out; the candidate's does not (and comes first by key).
    mirror_in(
        &app,
        "candidate",
        "pass_1",
        &[lead_with_van_id(candidate_phone, candidate_van_id, false)],
    )
    .await;
    mirror_in(
        &app,
        "party",
        "pass_1",
        &[lead_with_van_id(party_phone, party_van_id, true)],
    )
    .await;
    app.settle().await;

    // VAN was told of the party's person, and of nobody else.
    let truth = van.van_truth();
    let told: Vec<u64> = truth.canvass_responses.iter().map(|r| r.van_id).collect();
    assert_eq!(told, [party_van_id], "{truth:?}");
    let outcomes: serde_json::Value = app
        .admin_get("/v1/destinations/van-main/outcomes")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(outcomes["items"][0]["outcome"], "sent", "{outcomes}");
    assert_eq!(outcomes["items"][0]["accountId"], "party", "{outcomes}");

    // A lookup by id names the account; without one it is the first served.
    for (query, phone, account) in [
        ("?accountId=party", party_phone, "party"),
        ("?accountId=candidate", candidate_phone, "candidate"),
        ("", candidate_phone, "candidate"),
    ] {
        let response = app.admin_get(&format!("/v1/leads/lead_1{query}")).await;
        assert_eq!(response.status(), 200, "{query}");
        let found: serde_json::Value = response.json().await.expect("json");
        assert_eq!(found["phoneNumber"], phone, "{query}: {found}");
        assert_eq!(found["accountId"], account, "{query}: {found}");
        assert_eq!(found["globalOptedOut"], account == "party", "{found}");
    }
    let unknown = app.admin_get("/v1/leads/lead_1?accountId=nobody").await;
    assert_eq!(unknown.status(), 404);
    app.stop().await;
    van.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_of_an_account_no_longer_served_is_named_at_start() {
    let dir = tempfile::tempdir().expect("dir");
    // Recorded under `[service]`: the account `default`.
    succeeds(
        dir.path(),
        &[
            "opt-out",
            "+15550000001",
            "--org",
            "org_1",
            "--reason",
            "by phone",
        ],
    );
    // The configuration moves to a named account.
    std::fs::write(
        config_file(dir.path()),
        "[[account]]\nname = \"party\"\nbase_url = \"http://127.0.0.1:9\"\nclient_id = \"c\"\nclient_secret = \"s\"\n[account.webhook]\nsecrets = [\"party-secret\"]\n",
    )
    .expect("config");
    let daemon = Daemon::start(dir.path(), "moved", &[]).await;
    let named = crate::common::within(std::time::Duration::from_secs(10), async || {
        let logs = daemon.logs();
        logs.contains("no [[account]] serves").then_some(logs)
    })
    .await
    .unwrap_or_else(|| panic!("no warning: {}", daemon.logs()));
    let line = named
        .lines()
        .find(|l| l.contains("no [[account]] serves"))
        .expect("the line");
    assert!(line.contains("default"), "{line}");
    assert!(line.contains("party"), "it says what is served: {line}");
    assert_eq!(
        named.matches("no [[account]] serves").count(),
        1,
        "only `default` is named, not the served account: {named}"
    );
}

#[tokio::test]
async fn each_accounts_registration_check_is_kept_and_a_failed_one_is_shown_naming_its_account() {
    use outreach_sync::model::{RegistrationCheck, Timestamp};
    use outreach_sync::registrations;
    let Some(app) = crate::common::spawn_app_on(crate::common::Backend::Sqlite, |settings| {
        crate::common::with_admin_token(settings);
        settings.account = vec![
            unreachable_account("party"),
            unreachable_account("candidate"),
        ];
    })
    .await
    else {
        return;
    };
    let check = |ok: bool, url: &str| RegistrationCheck {
        checked_at: Timestamp::now(),
        ok,
        problems: if ok {
            Vec::new()
        } else {
            vec![format!("no consentUpdate-v1 registration targets {url}")]
        },
        target_url: url.to_owned(),
    };
    let status = async || -> serde_json::Value {
        app.admin_get("/v1/status")
            .await
            .json()
            .await
            .expect("json")
    };
    // Keeps a check of `account`'s registrations at its own path.
    let keep = async |account: &str, ok: bool| {
        let url = format!("https://h/webhooks/{account}");
        let account = crate::common::account(account);
        registrations::record_in(&app.pool, &account, &check(ok, &url))
            .await
            .expect("kept");
    };
    keep("party", false).await;
    // The other account's check, done later and passing, hides nothing.
    keep("candidate", true).await;
    let shown = status().await;
    assert_eq!(shown["registrationCheck"]["ok"], false, "{shown}");
    assert_eq!(
        shown["registrationCheck"]["problems"][0],
        "account party: no consentUpdate-v1 registration targets https://h/webhooks/party"
    );
    keep("party", true).await;
    let shown = status().await;
    assert_eq!(shown["registrationCheck"]["ok"], true, "{shown}");
    let metrics = crate::common::metrics_text(&app.http, app.admin_url("/metrics")).await;
    assert_eq!(
        crate::common::series_value(&metrics, "outreach_sync_registration_ok").as_deref(),
        Some("1")
    );
    app.stop().await;
}

#[test]
fn a_van_destination_that_names_no_account_of_several_and_an_unknown_account_are_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let account = |name: &str| {
        format!(
            "[[account]]\nname = \"{name}\"\nbase_url = \"https://api.example.org\"\nclient_id = \"{name}@example.org\"\nclient_secret = \"TOPSECRET\"\n[account.webhook]\nsecrets = [\"s-{name}\"]\n"
        )
    };
    let destination = |kind: &str, accounts: &str| {
        format!(
            "[[destination]]\nname = \"{kind}-1\"\nkind = \"{kind}\"\nbase_url = \"https://api.example.org/v4\"\napi_key = \"TOPSECRET\"\n{accounts}\n"
        )
    };
    let accounts = account("party") + &account("candidate");
    for (config, command, said) in [
        (
            accounts.clone() + &destination("van", ""),
            "check-config",
            "a VAN ID means a person only in that committee",
        ),
        (
            accounts.clone() + &destination("van", ""),
            "serve",
            "must name its accounts",
        ),
        (
            accounts.clone() + &destination("action_network", "accounts = [\"partty\"]"),
            "check-config",
            "no account `partty` is served",
        ),
        (
            accounts.clone()
                + "[[subscriber]]\nname = \"crm\"\nurl = \"https://crm.example.org/\"\nsecret = \"whsec_c2VjcmV0LXNoYXJlZC13aXRoLXRoZS1jcm0=\"\naccounts = [\"nobody\"]\n",
            "check-config",
            "subscriber.accounts",
        ),
    ] {
        std::fs::write(config_file(dir.path()), &config).expect("config");
        let output = daemon_process::command(dir.path(), &[command], &[])
            .output()
            .expect("run outreach-sync");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command}: {stderr}");
        assert!(stderr.contains(said), "{command}: {said}: {stderr}");
        assert!(!stderr.contains("TOPSECRET"), "{stderr}");
    }
    // Naming its account, the same configuration is valid.
    let config = accounts + &destination("van", "accounts = [\"party\"]");
    std::fs::write(config_file(dir.path()), &config).expect("config");
    let output = daemon_process::command(dir.path(), &["check-config"], &[])
        .output()
        .expect("run outreach-sync");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

crate::common::on_both_backends!(
    a_destination_writes_only_the_accounts_it_names,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_destination_writes_only_the_accounts_it_names(backend: crate::common::Backend) {
    use outreach_sync::settings::{DestinationSettings, SystemSettings};
    let fakes = Sandbox::spawn(SandboxConfig {
        leads: 1,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let (party_phone, candidate_phone) = ("+15550000101", "+15550000102");
    // A person of the party's committee; the candidate's own data holds the same VAN ID
    // for its lead (a VAN ID of the candidate's committee, someone else in the party's).
    let party_van_id = fakes.van_add_person(party_phone);
    let Some(app) = crate::common::spawn_app_on(backend, |settings| {
        crate::common::with_admin_token(settings);
        settings.account = vec![
            unreachable_account("party"),
            unreachable_account("candidate"),
        ];
        let mut van = DestinationSettings::new(
            "van-party",
            SystemSettings::Van(Default::default()),
            &fakes.van_url(),
            outreach_sync_sandbox::DEFAULT_VAN_KEY,
        );
        van.scope.accounts = vec!["party".to_owned()];
        van.requests_per_second = Some(1_000);
        let mut an = DestinationSettings::new(
            "an-candidate",
            SystemSettings::ActionNetwork(Default::default()),
            &fakes.action_network_url(),
            outreach_sync_sandbox::DEFAULT_ACTION_NETWORK_KEY,
        );
        an.scope.accounts = vec!["candidate".to_owned()];
        an.requests_per_second = Some(1_000);
        settings.destination = vec![van, an];
    })
    .await
    else {
        return;
    };
    // The candidate's lead opts out; the party's person is not touched.
    mirror_in(
        &app,
        "party",
        "pass_1",
        &[lead_with_van_id(party_phone, party_van_id, false)],
    )
    .await;
    mirror_in(
        &app,
        "candidate",
        "pass_1",
        &[lead_with_van_id(candidate_phone, party_van_id, true)],
    )
    .await;
    app.settle().await;
    let van = fakes.van_truth();
    assert!(van.canvass_responses.is_empty(), "{van:?}");
    let people_written = van
        .requests
        .recent
        .iter()
        .filter(|r| r.method == "POST" && r.path.starts_with("/van/v4/people"))
        .count();
    assert_eq!(people_written, 0, "{van:?}");
    let outcomes: serde_json::Value = app
        .admin_get("/v1/destinations/van-party/outcomes")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(outcomes["items"], serde_json::json!([]), "{outcomes}");
    // Action Network, the candidate's, had the candidate's number.
    let an = fakes.action_network_truth();
    let numbers: Vec<&str> = an
        .signups
        .iter()
        .flat_map(|s| s.phone_numbers.iter().map(|n| n.number.as_str()))
        .collect();
    assert_eq!(numbers, [candidate_phone.trim_start_matches('+')]);

    // The party's own lead opts out: VAN is told of its person, once.
    mirror_in(
        &app,
        "party",
        "pass_2",
        &[lead_with_van_id(party_phone, party_van_id, true)],
    )
    .await;
    app.settle().await;
    let told: Vec<u64> = fakes
        .van_truth()
        .canvass_responses
        .iter()
        .map(|r| r.van_id)
        .collect();
    assert_eq!(told, [party_van_id]);
    assert_eq!(
        fakes.action_network_truth().signups.len(),
        1,
        "not the party's"
    );
    app.stop().await;
    fakes.shutdown().await;
}
