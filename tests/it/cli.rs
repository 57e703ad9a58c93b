//! The binary as a user runs it: exit codes, redaction, `sign`, `webhooks diagnose`.

use crate::common;
use crate::common::{Backend, on_both_backends, spawn_app_on};

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_outreach-sync");

pub(crate) fn run(
    dir: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: &str,
) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env(
            "OUTREACH_SYNC__DATABASE__URL",
            format!("sqlite://{}/cli.db", dir.display()),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("spawn");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().expect("wait")
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn check_config_redacts_every_secret() {
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("client_secret");
    std::fs::write(&secrets, "hunter2-from-file\n").unwrap();
    let out = run(
        dir.path(),
        &["check-config"],
        &[
            ("OUTREACH_SYNC__WEBHOOK__SECRETS", "hunter2-a,hunter2-b"),
            ("OUTREACH_SYNC__ADMIN__TOKENS", "hunter2-token"),
            (
                "OUTREACH_SYNC__SERVICE__CLIENT_SECRET_FILE",
                secrets.to_str().unwrap(),
            ),
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout) + &text(&out.stderr);
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(
        shown.contains("secrets = [\"[redacted]\", \"[redacted]\"]"),
        "{shown}"
    );
    assert!(shown.contains("client_secret = \"[redacted]\""), "{shown}");
}

#[test]
fn invalid_configuration_exits_2_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[(&str, &str)], &str); 4] = [
        (&[], "webhook.secrets"),
        (
            &[
                ("OUTREACH_SYNC__WEBHOOK__SECRETS", "s"),
                ("OUTREACH_SYNC__INGEST__BIND", "nowhere"),
            ],
            "ingest.bind",
        ),
        (
            &[
                ("OUTREACH_SYNC__WEBHOOK__SECRETS", "s"),
                ("OUTREACH_SYNC__WEBHOOK__ALGORITHM", "md5"),
            ],
            "algorithm",
        ),
        (
            &[
                ("OUTREACH_SYNC__WEBHOOK__SECRETS", "s"),
                ("OUTREACH_SYNC__LOG__LEVEL", "loud"),
            ],
            "log.level",
        ),
    ];
    for (env, key) in cases {
        let out = run(dir.path(), &["check-config"], env, "");
        assert_eq!(out.status.code(), Some(2), "{env:?}");
        assert!(
            text(&out.stderr).contains(key),
            "{key}: {}",
            text(&out.stderr)
        );
    }
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[webhook]\nsecrets = [\"s\"]\nsecret = \"typo\"\n").unwrap();
    let out = run(
        dir.path(),
        &["check-config", "--config", file.to_str().unwrap()],
        &[],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("secret"),
        "{}",
        text(&out.stderr)
    );
    let out = run(dir.path(), &["no-such-command"], &[], "");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn sign_prints_the_headers_the_configured_scheme_expects() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        dir.path(),
        &["sign", "--secret", "It's a Secret to Everybody"],
        &[("OUTREACH_SYNC__WEBHOOK__PREFIX", "sha256=")],
        "Hello, World!",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim(),
        "x-signature: sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    );
}

on_both_backends!(diagnose_finds_the_format_of_deliveries_the_configuration_refused);
async fn diagnose_finds_the_format_of_deliveries_the_configuration_refused(backend: Backend) {
    // Configured for the defaults (X-Signature, sha256, hex) ...
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    // ... while the sender signs `{timestamp}.{body}` with SHA-1, base64, under its own header.
    let body = common::consent_event("evt_d", "+15550001111", true);
    let ts = chrono::Utc::now().timestamp().to_string();
    let tag = outreach_sync::signature::compute(
        outreach_sync::settings::Algorithm::Sha1,
        common::SECRET.as_bytes(),
        &[ts.as_bytes(), b".", body.as_bytes()],
    );
    let signature = format!(
        "v1={}",
        outreach_sync::signature::encode(outreach_sync::settings::Encoding::Base64, &tag)
    );
    let headers = vec![
        ("x-vendor-signature".into(), signature),
        ("x-vendor-timestamp".into(), ts),
    ];
    assert_eq!(app.post_with(body, &headers).await.status(), 401);
    assert_eq!(app.readyz().await, 200);

    let out = run(
        app.dir.path(),
        &["webhooks", "diagnose", "--json"],
        &[
            ("OUTREACH_SYNC__DATABASE__URL", &app.settings.database.url),
            ("OUTREACH_SYNC__WEBHOOK__SECRETS", common::SECRET),
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["examined"], 1);
    let format = &report["formats"][0];
    assert_eq!(format["header"], "x-vendor-signature");
    assert_eq!(format["algorithm"], "sha1");
    assert_eq!(format["encoding"], "base64");
    assert_eq!(format["prefix"], "v1=");
    assert_eq!(format["timestampHeader"], "x-vendor-timestamp");
    let snippet = format["config"].as_str().unwrap();
    assert!(
        snippet.starts_with("[webhook]\n") && snippet.contains("algorithm = \"sha1\""),
        "{snippet}"
    );
    app.stop().await;
}

#[test]
fn the_example_configuration_is_valid_and_names_every_key() {
    let path = crate::repository("config/example.toml");
    let settings =
        outreach_sync::settings::Settings::load_from(Some(&path), &[]).expect("example is valid");
    let example: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
    let defaults: toml::Table = settings.redacted_toml().parse().unwrap();
    for (section, keys) in &defaults {
        // `[[subscriber]]` is a list, empty by default: the example shows one, commented.
        let Some(keys) = keys.as_table() else {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                text.contains(&format!("# [[{section}]]")),
                "config/example.toml lacks [[{section}]]"
            );
            continue;
        };
        for key in keys.keys() {
            assert!(
                example[section].as_table().unwrap().contains_key(key),
                "config/example.toml lacks {section}.{key}"
            );
        }
    }
}

// Multi-threaded: the commands run as blocking child processes while the daemon works.
on_both_backends!(
    the_read_commands_show_what_the_daemon_applied,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn the_read_commands_show_what_the_daemon_applied(backend: Backend) {
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    for body in [
        common::consent_event("evt_a", "+15550003333", true),
        r#"{"type":"leadCreated-v9","id":"evt_b","data":{}}"#.to_string(),
    ] {
        assert_eq!(app.post_signed(&body).await.status(), 200);
    }
    let env = [("OUTREACH_SYNC__WEBHOOK__SECRETS", common::SECRET)];
    let db = [(
        "OUTREACH_SYNC__DATABASE__URL",
        app.settings.database.url.as_str(),
    )];
    let env: Vec<(&str, &str)> = env.iter().chain(db.iter()).copied().collect();
    let json = |args: &[&str]| {
        let out = run(app.dir.path(), args, &env, "");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).expect("JSON")
    };
    app.drain().await;
    assert_eq!(json(&["status", "--json"])["backlog"], 0);

    let consent = json(&["consent", "+15550003333", "--json"]);
    assert_eq!(consent["items"][0]["optedOut"], true);
    assert_eq!(consent["items"][0]["organizationId"], "org_1");
    let history = json(&["history", "+15550003333", "--json"]);
    assert_eq!(history["items"][0]["eventRef"], "event:evt_a");
    let quarantined = json(&["events", "--quarantined", "--json"]);
    assert_eq!(quarantined["items"][0]["dedupKey"], "event:evt_b");
    let replayed = json(&["replay", "--quarantined", "--json"]);
    assert_eq!(
        (
            replayed["requeued"].as_u64(),
            replayed["quarantined"].as_u64()
        ),
        (Some(1), Some(1))
    );
    let status = json(&["status", "--json"]);
    assert_eq!(
        (status["quarantined"].as_i64(), status["applied"].as_i64()),
        (Some(1), Some(1))
    );

    let unknown = run(app.dir.path(), &["consent", "+15559999999"], &env, "");
    assert_eq!(unknown.status.code(), Some(3));
    let missing = run(app.dir.path(), &["replay", "--id", "999"], &env, "");
    assert_eq!(missing.status.code(), Some(3));
    app.stop().await;
}

#[test]
fn commands_that_never_see_a_webhook_need_no_webhook_secret() {
    let dir = tempfile::tempdir().unwrap();
    // What `demo` prints for a look at its database: the URL alone.
    for args in [
        &["migrate"][..],
        &["status"],
        &["events", "--limit", "5"],
        &["export", "ledger"],
    ] {
        let out = run(dir.path(), args, &[], "");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    for lookup in ["consent", "history"] {
        let unknown = run(dir.path(), &[lookup, "+15550001234"], &[], "");
        assert_eq!(unknown.status.code(), Some(3), "{}", text(&unknown.stderr));
    }
    // The daemon itself still needs one.
    let serve = run(dir.path(), &["serve"], &[], "");
    assert_eq!(serve.status.code(), Some(2));
    assert!(text(&serve.stderr).contains("webhook.secrets"));
}
