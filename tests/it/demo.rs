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

/// The demo, run to its end as a newcomer runs it: its last lines say how the opt-outs of
/// the run stand against the deadline, and how to print the whole report.
#[tokio::test]
async fn the_demo_ends_with_the_compliance_of_its_opt_outs() {
    let dir = tempfile::tempdir().expect("demo dir");
    let run = tokio::process::Command::new(crate::daemon_process::BIN)
        .args(["demo", "--duration", "3", "--leads", "200", "--dir"])
        .arg(dir.path())
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the demo ends in time")
        .expect("the demo runs");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{said}");
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
    assert!(line.contains("account:candidate at most"), "{line}");
    assert!(
        said.contains("outreach-sync report compliance --format html"),
        "{said}"
    );
}
