//! The demo's figures: the mirror beside the service (the differences a newcomer watches fall
//! to 0), and columns that add up.

use crate::common;

use outreach_sync::client::ServiceClient;
use outreach_sync::reconcile::{PassRequest, Reconciler};
use outreach_sync_cli::demo::{Row, consent_differences};
use outreach_sync_sandbox::wire::WebhookConfig;
use outreach_sync_sandbox::{DeliveryFaults, RunningSandbox, Sandbox, SandboxConfig};
use secrecy::SecretString;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

/// The daemon, its upstream the sandbox (no schedule: passes run when the test says), and
/// both webhook registrations pointing at it.
async fn daemon_of(sandbox: &RunningSandbox) -> common::TestApp {
    let app = common::spawn_app(|settings| {
        settings.service.base_url = sandbox.base_url();
        settings.service.client_id = sandbox.config().client_id.clone();
        settings.service.client_secret =
            Some(SecretString::from(sandbox.config().client_secret.clone()));
        settings.reconcile.schedule = "".into();
        settings.reconcile.on_start = false;
    })
    .await;
    let url = app.url("/webhooks");
    for config in [WebhookConfig::all_consent(), WebhookConfig::all_messages()] {
        sandbox
            .register_webhook(&url, common::SECRET, config)
            .expect("registration");
    }
    app
}

async fn reconcile(app: &common::TestApp, sandbox: &RunningSandbox) {
    let client = ServiceClient::new(common::client_config(sandbox)).expect("client");
    let summary = Reconciler::new(app.pool.clone(), client, &app.settings.reconcile)
        .run_pass(&PassRequest::default(), &CancellationToken::new())
        .await
        .expect("a pass runs");
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
}

/// Waits for the sandbox's deliveries to be done, then applies what the daemon stored.
async fn deliver(app: &common::TestApp, sandbox: &RunningSandbox) {
    assert!(sandbox.settle(WAIT).await, "deliveries settle");
    app.drain().await;
}

async fn differences(app: &common::TestApp, sandbox: &RunningSandbox) -> usize {
    consent_differences(app.sqlite(), &sandbox.leads())
        .await
        .expect("compare")
        .total()
}

#[tokio::test]
async fn a_dropped_stop_shows_as_a_difference_until_a_reconciliation_pass_repairs_it() {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 30,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let app = daemon_of(&sandbox).await;
    assert_eq!(
        differences(&app, &sandbox).await,
        30,
        "leads not mirrored yet differ"
    );
    reconcile(&app, &sandbox).await;
    assert_eq!(differences(&app, &sandbox).await, 0);

    let lead = sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .expect("an opted-in lead");
    sandbox.set_delivery_faults(DeliveryFaults {
        drop_rate: 1.0,
        ..DeliveryFaults::default()
    });
    let changed = sandbox
        .text_stop(&lead.organization_id, &lead.phone_number)
        .expect("STOP");
    deliver(&app, &sandbox).await;
    assert_eq!(differences(&app, &sandbox).await, changed.len());
    assert!(!changed.is_empty());

    reconcile(&app, &sandbox).await;
    assert_eq!(differences(&app, &sandbox).await, 0);

    sandbox.set_delivery_faults(DeliveryFaults::default());
    sandbox
        .text_start(&lead.organization_id, &lead.phone_number)
        .expect("START");
    deliver(&app, &sandbox).await;
    assert_eq!(
        differences(&app, &sandbox).await,
        0,
        "a delivered webhook leaves nothing to repair"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test]
async fn the_demo_columns_add_up_under_drops_duplicates_and_reordering() {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 40,
        delivery_faults: DeliveryFaults {
            drop_rate: 0.25,
            duplicate_rate: 0.25,
            reorder: true,
            max_delay_ms: 10,
        },
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let app = daemon_of(&sandbox).await;
    reconcile(&app, &sandbox).await;
    for _ in 0..60 {
        sandbox.activity_step();
    }
    deliver(&app, &sandbox).await;

    let row = Row::read(&sandbox, app.sqlite()).await.expect("figures");
    let w = row.webhooks;
    assert!(w.events > 60, "{w:?}");
    assert!(w.dropped > 0 && w.duplicated > 0, "{w:?}");
    assert_eq!(w.dropped + w.delivered + w.waiting + w.gave_up, w.events);
    assert_eq!((w.waiting, w.gave_up), (0, 0));
    assert_eq!(
        row.stored, w.delivered as i64,
        "one stored delivery per delivered event, a second copy stores nothing"
    );
    assert_eq!((row.applied, row.quarantined), (row.stored, 0));
    assert_eq!(row.passes, 1);

    reconcile(&app, &sandbox).await;
    let row = Row::read(&sandbox, app.sqlite()).await.expect("figures");
    assert_eq!(row.differences.total(), 0);
    assert_eq!(row.differences.leads, 40);
    assert_eq!(row.passes, 2);
    app.stop().await;
    sandbox.shutdown().await;
}

common::on_both_backends!(the_view_reads_its_figures_on_either_backend);
async fn the_view_reads_its_figures_on_either_backend(backend: common::Backend) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 20,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let Some(app) = common::spawn_app_on(backend, |settings| {
        settings.service.base_url = sandbox.base_url();
        settings.service.client_id = sandbox.config().client_id.clone();
        settings.service.client_secret =
            Some(SecretString::from(sandbox.config().client_secret.clone()));
        settings.reconcile.schedule = "".into();
        settings.reconcile.on_start = false;
    })
    .await
    else {
        return;
    };
    let before = Row::read(&sandbox, &app.pool).await.expect("figures");
    assert_eq!((before.passes, before.repaired, before.ledger), (0, 0, 0));
    assert_eq!(before.differences.missing, 20, "nothing mirrored yet");

    let client = ServiceClient::new(common::client_config(&sandbox)).expect("client");
    let summary = Reconciler::new(app.pool.clone(), client, &app.settings.reconcile)
        .run_pass(&PassRequest::default(), &CancellationToken::new())
        .await
        .expect("a pass runs");
    let row = Row::read(&sandbox, &app.pool).await.expect("figures");
    assert_eq!((row.passes, row.repaired), (1, summary.repaired as i64));
    assert_eq!(row.ledger, 20, "the first pass records one entry per lead");
    assert_eq!(row.differences.total(), 0);
    assert_eq!(row.differences.leads, 20);
    app.stop().await;
    sandbox.shutdown().await;
}

/// What `demo --duration 3 --leads 200 --dir DIR` and `extra` printed, run to its end.
async fn run_demo(dir: &std::path::Path, extra: &[&str]) -> String {
    let run = tokio::process::Command::new(crate::daemon_process::BIN)
        .args(["demo", "--duration", "3", "--leads", "200"])
        .args(extra)
        .arg("--dir")
        .arg(dir)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the demo ends in time")
        .expect("the demo runs");
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{said}");
    said
}

/// The demo, run to its end as a newcomer runs it: its last lines say how the opt-outs of
/// the run stand against the deadline, and how to print the whole report.
#[tokio::test]
async fn the_demo_ends_with_the_compliance_of_its_opt_outs() {
    let dir = tempfile::tempdir().expect("demo dir");
    let said = run_demo(dir.path(), &[]).await;
    let line = said
        .lines()
        .find(|l| l.starts_with("compliance: "))
        .unwrap_or_else(|| panic!("no compliance line in {said}"));
    assert!(
        line.contains("honoured everywhere within the deadline"),
        "{line}"
    );
    assert!(line.contains("crm at most"), "{line}");
    // The second account was told of the first's opt-outs, and its mirror follows it.
    let shared = said
        .lines()
        .find(|l| l.starts_with("account `candidate`"))
        .unwrap_or_else(|| panic!("no line of the second account in {said}"));
    assert!(
        shared.ends_with("its mirror differs from it for 0 leads"),
        "{shared}"
    );
    assert!(
        shared.contains("one caller (`demo-campaign`, revoke-all in force from "),
        "{shared}"
    );
    assert!(
        line.contains("caller:demo-campaign:candidate at most"),
        "{line}"
    );
    assert!(said.contains("report compliance --format html"), "{said}");
    texts_to_twilio_show_the_two_opt_outs_reaching_the_service(&said);
    tips_tell_what_the_demo_told(&said, line);
}

/// Of the three texts the demo sends to its Twilio number, the question is held for review
/// and decided not an opt-out, and the two opt-outs (one in the FCC's words, one a sentence
/// held for review and decided) reach the service, the CRM and Action Network.
fn texts_to_twilio_show_the_two_opt_outs_reaching_the_service(said: &str) {
    let texted: Vec<&str> = said.lines().filter(|l| l.contains(" texted ")).collect();
    assert_eq!(texted.len(), 3, "{said}");
    assert!(
        texted[0].contains(
            "\"stop by at 5?\": held for review, decided not an opt-out by demo, nothing recorded"
        ),
        "{said}"
    );
    for (line, words) in texted[1..].iter().zip([
        "\"Opt out\": opted out at the service",
        "\"please stop texting me about the rally\": held for review, decided an opt-out by demo: opted out at the service",
    ]) {
        assert!(
            line.contains(&format!("texted {words}"))
                && line.ends_with("in the CRM, in Action Network"),
            "{said}"
        );
    }
}

/// Each command the demo suggests at its end runs as printed (but `serve`), and the
/// report's totals are the demo's last line's.
fn tips_tell_what_the_demo_told(said: &str, line: &str) {
    let tips: Vec<Vec<&str>> = said
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("outreach-sync --config "))
        .map(|l| {
            let command = l.split("    ").next().unwrap_or(l);
            std::iter::once("--config")
                .chain(command.split_whitespace())
                .collect()
        })
        .collect();
    assert!(tips.len() >= 4, "the tips: {said}");
    for args in tips.iter().filter(|args| !args.contains(&"serve")) {
        let output = std::process::Command::new(crate::daemon_process::BIN)
            .args(args)
            .output()
            .expect("a tip runs");
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let config = tips[0][1];
    let output = std::process::Command::new(crate::daemon_process::BIN)
        .args([
            "--config",
            config,
            "report",
            "compliance",
            "--format",
            "json",
        ])
        .output()
        .expect("the report");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let t = &report["totals"];
    let number_before = |what: &str| -> u64 {
        let before = line.split(what).next().unwrap_or_default();
        let word = before.split_whitespace().last().unwrap_or_default();
        word.parse().unwrap_or_else(|_| panic!("{what} in {line}"))
    };
    assert_eq!(t["optOuts"], number_before(" opt-outs,"), "{t} / {line}");
    assert_eq!(
        t["honoured"],
        number_before(" honoured everywhere"),
        "{t} / {line}"
    );
    assert_eq!(t["pending"], number_before(" pending,"), "{t} / {line}");
    assert_eq!(t["overdue"], number_before(" overdue,"), "{t} / {line}");
    assert_eq!(
        t["unreachable"],
        number_before(" unreachable"),
        "{t} / {line}"
    );
    // The report names every destination the demo wrote to.
    let names: Vec<&str> = report["destinations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["name"].as_str())
        .collect();
    for name in ["service", "crm", "van", "action-network"] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
}

/// `demo --warehouse URL`: the ledger mirrored into a PostgreSQL database as a warehouse
/// while the demo runs, its last lines counting the rows there, and the kept configuration
/// naming it (its URL in a file of its own) for the commands the demo suggests.
#[tokio::test]
async fn the_demo_writes_to_a_local_postgres_warehouse_and_counts_its_rows() {
    let Some(database) = crate::postgres::TestDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().expect("demo dir");
    let said = run_demo(dir.path(), &["--warehouse", &database.url]).await;
    assert!(!said.contains(&database.url), "the URL is a secret: {said}");
    let line = said
        .lines()
        .find(|l| l.starts_with("the PostgreSQL warehouse holds "))
        .unwrap_or_else(|| panic!("no warehouse line in {said}"));
    let pool = database.pool().await;
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM outreach_sync_demo")
        .fetch_one(&pool)
        .await
        .expect("the demo's table");
    assert!(rows > 0, "{line}");
    assert!(
        line.contains(&format!(
            "holds {rows} rows in table outreach_sync_demo, one per ledger entry"
        )),
        "{line}"
    );
    let compliance = said
        .lines()
        .find(|l| l.starts_with("compliance: "))
        .expect("the compliance line");
    assert!(compliance.contains("warehouse at most"), "{compliance}");
    let kept = std::fs::read_to_string(dir.path().join("config.toml")).expect("kept");
    assert!(
        kept.contains("kind = \"postgres\"") && kept.contains("url_file"),
        "{kept}"
    );
    assert!(!kept.contains(&database.url), "{kept}");
    pool.close().await;
    database.drop().await;
}
