//! A reconciliation pass runs in one place at a time per organization: `reconcile` run by
//! hand refuses while the daemon's pass (or any other) holds that organization's lease.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use outreach_sync::client::ServiceClient;
use outreach_sync::reconcile::{PassRefused, PassRequest, Reconciler};
use outreach_sync::settings::Settings;
use outreach_sync_sandbox::{RunningSandbox, Sandbox, SandboxConfig};
use sqlx::SqlitePool;
use tokio_util::sync::CancellationToken;

use crate::common::{Backend, TestApp, on_both_backends, spawn_app_on};

const BIN: &str = env!("CARGO_BIN_EXE_outreach-sync");

fn settings_in(dir: &Path) -> Settings {
    let mut settings = Settings::default();
    settings.database.url = format!("sqlite://{}", dir.join("outreach-sync.db").display());
    settings
}

async fn migrated_pool(settings: &Settings) -> SqlitePool {
    let pool = outreach_sync::store::pool(settings).await.expect("pool");
    outreach_sync::store::migrate(&pool).await.expect("migrate");
    pool
}

/// `outreach-sync reconcile --leads --org ORG` as a separate process on the same database.
fn reconcile_by_hand(settings: &Settings, sandbox: &RunningSandbox, org: &str) -> Output {
    Command::new(BIN)
        .args(["reconcile", "--leads", "--org", org])
        .env("OUTREACH_SYNC__DATABASE__URL", &settings.database.url)
        .env("OUTREACH_SYNC__SERVICE__BASE_URL", sandbox.base_url())
        .env(
            "OUTREACH_SYNC__SERVICE__CLIENT_ID",
            &sandbox.config().client_id,
        )
        .env(
            "OUTREACH_SYNC__SERVICE__CLIENT_SECRET",
            &sandbox.config().client_secret,
        )
        .env("OUTREACH_SYNC__SERVICE__REQUESTS_PER_SECOND", "1000")
        .env("OUTREACH_SYNC__WEBHOOK__SECRETS", "unused-here")
        .output()
        .expect("run reconcile")
}

fn organizations(sandbox: &RunningSandbox) -> Vec<String> {
    let ids: BTreeSet<String> = sandbox
        .leads()
        .into_iter()
        .map(|lead| lead.organization_id)
        .collect();
    ids.into_iter().collect()
}

async fn two_organizations() -> RunningSandbox {
    Sandbox::spawn(SandboxConfig {
        leads: 40,
        organizations: 2,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox")
}

async fn lease_holders(pool: &SqlitePool) -> Vec<(String, String)> {
    sqlx::query_as("SELECT name, holder FROM leases ORDER BY name")
        .fetch_all(pool)
        .await
        .expect("leases")
}

on_both_backends!(
    reconcile_by_hand_refuses_while_another_pass_of_the_organization_runs,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn reconcile_by_hand_refuses_while_another_pass_of_the_organization_runs(backend: Backend) {
    let sandbox = two_organizations().await;
    let orgs = organizations(&sandbox);
    // A database of the backend, with a daemon that has no service to reconcile with.
    let Some(app) = spawn_app_on(backend, |_| {}).await else {
        return;
    };
    let (settings, pool) = (&app.settings, &app.pool);

    // The daemon's pass of the first organization is stuck on an upstream that accepts
    // connections and never answers.
    let stalled = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut config = crate::common::client_config(&sandbox);
    config.base_url = format!("http://{}", stalled.local_addr().unwrap());
    let client = ServiceClient::new(config).unwrap();
    let daemon = Reconciler::new(pool, client, &settings.reconcile);
    let request = PassRequest {
        organizations: vec![orgs[0].clone()],
        leads: true,
        messages: false,
    };
    let stuck = tokio::spawn(async move {
        daemon
            .run_pass(&request, &CancellationToken::new())
            .await
            .map(|summary| summary.id)
    });
    // Its first request arrives only once its leases are taken.
    let (_held_open, _) = stalled.accept().await.unwrap();
    let holders = held(&app).await;
    assert_eq!(holders.len(), 1, "{holders:?}");
    assert_eq!(holders[0].0, format!("reconcile:leads:{}", orgs[0]));

    let refused = reconcile_by_hand(settings, &sandbox, &orgs[0]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("another reconciliation pass is running") && stderr.contains(&holders[0].1),
        "the refusal names the running pass: {stderr}"
    );

    // Another organization is not held up.
    let other = reconcile_by_hand(settings, &sandbox, &orgs[1]);
    assert!(
        other.status.success(),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );

    // The stuck pass dies without giving its lease back; once the lease lapses (here: made
    // to lapse), a pass by hand takes over.
    stuck.abort();
    assert!(stuck.await.unwrap_err().is_cancelled());
    let refused_again = reconcile_by_hand(settings, &sandbox, &orgs[0]);
    assert_eq!(refused_again.status.code(), Some(1));
    app.execute("UPDATE leases SET expires_ms = expires_ms - 3600000")
        .await;
    let took_over = reconcile_by_hand(settings, &sandbox, &orgs[0]);
    assert!(
        took_over.status.success(),
        "{}",
        String::from_utf8_lossy(&took_over.stderr)
    );
    let mirrored = app
        .count(&format!(
            "SELECT COUNT(*) FROM leads WHERE organization_id = '{}'",
            orgs[0]
        ))
        .await;
    assert!(
        mirrored > 0,
        "the pass that took over mirrored the organization"
    );
    assert!(
        held(&app).await.is_empty(),
        "a finished pass gives its leases back"
    );
}

/// The reconciliation leases held now, by name; the daemon's own `leader` is not one.
async fn held(app: &TestApp) -> Vec<(String, String)> {
    app.rows("SELECT name, holder FROM leases WHERE name <> 'leader' ORDER BY name")
        .await
}

#[tokio::test]
async fn a_second_pass_in_the_same_process_is_refused_and_runs_once_the_first_is_done() {
    let sandbox = two_organizations().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = settings_in(dir.path());
    let pool = migrated_pool(&settings).await;
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    let reconciler = Reconciler::new(pool.clone(), client, &settings.reconcile);
    let other = reconciler.clone();
    let stop = CancellationToken::new();
    let request = PassRequest::default();
    let (first, second) = tokio::join!(
        reconciler.run_pass(&request, &stop),
        other.run_pass(&request, &stop)
    );
    let (ran, refused) = match (first, second) {
        (Ok(ran), Err(refused)) | (Err(refused), Ok(ran)) => (ran, refused),
        (first, second) => panic!("one pass runs, the other is refused: {first:?} {second:?}"),
    };
    assert!(matches!(refused, PassRefused::Running(_)), "{refused}");
    assert_eq!(ran.organizations.len(), 2);
    assert!(lease_holders(&pool).await.is_empty());
    assert!(reconciler.run_pass(&request, &stop).await.is_ok());
}
