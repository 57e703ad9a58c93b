//! The daemon configured with `[service] api_version = "v2"` against the sandbox: the
//! reconciler reads and repairs through /v2 only, local changes go out as
//! `PUT /v2/leads/{id}`, and an organization v2 will not page through is reported, not
//! looped on. The pushes through /v2 are in `v2_push.rs`.

use crate::common;
use crate::common::{Backend, on_both_backends, spawn_app_on};

use std::collections::{BTreeMap, HashMap};

use outreach_sync::client::ServiceClient;
use outreach_sync::ledger;
use outreach_sync::reconcile::{PassRequest, Reconciler};
use outreach_sync::settings::{ApiVersion, Settings};
use outreach_sync_sandbox::wire::Lead;
use outreach_sync_sandbox::{ApiRequest, RunningSandbox, Sandbox, SandboxConfig};
use secrecy::SecretString;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The service settings of a v2 account on `sandbox`, schedule off. Without the secret the
/// daemon starts no reconciler or pusher of its own, and the test drives them.
pub(crate) fn v2_service(settings: &mut Settings, sandbox: &RunningSandbox, with_secret: bool) {
    settings.service.api_version = ApiVersion::V2;
    settings.service.base_url = sandbox.base_url();
    settings.service.client_id = sandbox.config().client_id.clone();
    settings.service.client_secret =
        with_secret.then(|| SecretString::from(sandbox.config().client_secret.clone()));
    settings.service.requests_per_second = 1000;
    settings.reconcile.schedule = "".into();
    settings.reconcile.on_start = false;
    settings.reconcile.message_stale_after_secs = 0;
}

/// The client the daemon builds from its settings, with the secret it was not given.
pub(crate) fn daemon_client(app: &common::TestApp, sandbox: &RunningSandbox) -> ServiceClient {
    let mut settings = app.settings.clone();
    v2_service(&mut settings, sandbox, true);
    let client = outreach_sync::upstream::service_client(
        &common::served(&settings, "default"),
        &app.pool,
        app.metrics.clone(),
    )
    .unwrap();
    assert_eq!(client.config().api_version, ApiVersion::V2);
    client
}

fn reconciler(app: &common::TestApp, sandbox: &RunningSandbox) -> Reconciler {
    Reconciler::new(
        app.pool.clone(),
        daemon_client(app, sandbox),
        &app.settings.reconcile,
    )
}

async fn pass(reconciler: &Reconciler) -> outreach_sync::reconcile::PassSummary {
    reconciler
        .run_pass(&PassRequest::default(), &CancellationToken::new())
        .await
        .expect("no other pass")
}

/// The sandbox's leads per organization, in id order (the order v2 pages them in).
fn leads_by_organization(sandbox: &RunningSandbox) -> BTreeMap<String, Vec<Lead>> {
    let mut by_org: BTreeMap<String, Vec<Lead>> = BTreeMap::new();
    for lead in sandbox.leads() {
        by_org
            .entry(lead.organization_id.clone())
            .or_default()
            .push(lead);
    }
    by_org
}

pub(crate) fn leads_path(organization: &str) -> String {
    format!("/v2/organizations/{organization}/leads")
}

fn reads_of<'a>(requests: &'a [ApiRequest], path: &str) -> Vec<&'a ApiRequest> {
    requests
        .iter()
        .filter(|r| r.method == "GET" && r.path == path)
        .collect()
}

/// The mirror's consent of every lead: lead id to opted out.
async fn mirrored_consent(app: &common::TestApp) -> HashMap<String, bool> {
    app.rows::<(String, bool)>(
        "SELECT l.id, s.opted_out FROM leads AS l
         JOIN consent_state AS s USING (organization_id, phone_number)",
    )
    .await
    .into_iter()
    .collect()
}

on_both_backends!(a_missed_opt_out_is_repaired_by_a_pass_that_reads_the_service_through_v2_only);
async fn a_missed_opt_out_is_repaired_by_a_pass_that_reads_the_service_through_v2_only(
    backend: Backend,
) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 2500,
        organizations: 2,
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let Some(app) = spawn_app_on(backend, |s| v2_service(s, &sandbox, false)).await else {
        return;
    };
    let reconciler = reconciler(&app, &sandbox);
    let total = sandbox.leads().len() as u64;

    let first = pass(&reconciler).await;
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    assert_eq!(first.leads_new, total, "the first pass mirrors every lead");

    // A message the daemon tracks, still queued: under v3 the pass would look it up.
    let message = json!({"type": "messageStatus-v1", "id": "evt_msg_1", "createdAt": "2026-11-21T10:00:00Z",
        "data": {"id": "msg_1", "threadId": "thr_1", "status": "queued", "type": "SMS",
                 "createdAt": "2026-11-21T10:00:00Z"}});
    assert_eq!(app.post_signed(&message.to_string()).await.status(), 200);
    app.drain().await;
    let tracked = app
        .count("SELECT COUNT(*) FROM messages WHERE NOT terminal")
        .await;
    assert_eq!(tracked, 1);

    // A person texts STOP; no webhook is registered, so the daemon never hears of it.
    let lead = sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .unwrap();
    let changed = sandbox
        .text_stop(&lead.organization_id, &lead.phone_number)
        .unwrap();
    assert!(!changed.is_empty());
    let before = mirrored_consent(&app).await;
    assert_eq!(before.get(&lead.id), Some(&false), "the mirror missed it");
    let logged_before = sandbox.requests().len();

    let second = pass(&reconciler).await;
    assert!(second.errors.is_empty(), "{:?}", second.errors);
    assert_eq!(second.leads_scanned, total);
    assert_eq!(
        second.repaired,
        changed.len() as u64,
        "the missed change (with account sync, each lead it reached) is repaired, nothing else"
    );
    let current = ledger::current(&app.pool, &lead.phone_number, Some(&lead.organization_id))
        .await
        .unwrap();
    assert!(current[0].opted_out, "{current:?}");
    assert_eq!(current[0].source, "reconcile");
    let after = mirrored_consent(&app).await;
    for upstream in sandbox.leads() {
        assert_eq!(
            after.get(&upstream.id),
            Some(&upstream.global_opted_out),
            "lead {}",
            upstream.id
        );
    }

    // Messages: v2.1 has no message endpoint, and the summary says why none was checked.
    assert_eq!(second.messages_checked, 0);
    let skipped = second.messages_skipped.as_deref().unwrap_or_default();
    assert!(
        skipped.contains("v2") && skipped.contains("message"),
        "{skipped}"
    );

    // Every read went through /v2: organizations once, then each organization's leads
    // page by page (1000 a page), following the v2 cursor.
    let requests = sandbox.requests();
    let v3: Vec<_> = requests
        .iter()
        .filter(|r| !r.path.starts_with("/v2/"))
        .collect();
    assert!(v3.is_empty(), "requests outside /v2: {v3:?}");
    let pass_requests = &requests[logged_before..];
    assert_eq!(reads_of(pass_requests, "/v2/organizations").len(), 1);
    for (organization, leads) in leads_by_organization(&sandbox) {
        let reads = reads_of(pass_requests, &leads_path(&organization));
        assert_eq!(reads.len(), leads.len().div_ceil(1000), "{organization}");
        assert!(reads.len() > 1, "more than one page, so the cursor is used");
        assert!(reads.iter().all(
            |r| r.status == 200 && r.query.as_deref().is_some_and(|q| q.contains("limit=1000"))
        ));
        assert!(
            reads[0]
                .query
                .as_deref()
                .is_some_and(|q| !q.contains("cursor="))
        );
        assert!(
            reads[1..]
                .iter()
                .all(|r| r.query.as_deref().is_some_and(|q| q.contains("cursor=")))
        );
    }
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(an_interrupted_v2_pass_resumes_from_its_saved_v2_cursor);
async fn an_interrupted_v2_pass_resumes_from_its_saved_v2_cursor(backend: Backend) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 2500,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let Some(app) = spawn_app_on(backend, |s| v2_service(s, &sandbox, false)).await else {
        return;
    };
    let reconciler = reconciler(&app, &sandbox);
    let leads_only = PassRequest {
        messages: false,
        ..PassRequest::default()
    };
    let stopped = CancellationToken::new();
    stopped.cancel();
    let first = reconciler.run_pass(&leads_only, &stopped).await.unwrap();
    assert!(first.interrupted);
    assert_eq!(first.leads_scanned, 1000);
    let logged = sandbox.requests().len();

    let second = reconciler
        .run_pass(&leads_only, &CancellationToken::new())
        .await
        .unwrap();
    let total = sandbox.leads().len() as u64;
    assert!(!second.interrupted);
    assert_eq!(
        second.leads_scanned,
        total - 1000,
        "it starts where the first stopped"
    );
    let resumed = &sandbox.requests()[logged..];
    let org = &sandbox.truth().organizations[0].id;
    let reads = reads_of(resumed, &leads_path(org));
    assert!(
        reads[0]
            .query
            .as_deref()
            .is_some_and(|q| q.contains("cursor="))
            && reads[0].status == 200,
        "the saved v2 cursor is sent as it was issued: {reads:?}"
    );
    let status = ledger::status(&app.pool).await.unwrap();
    assert!(status.reconciliation_in_progress.is_empty());
    assert_eq!(status.leads as u64, total);
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(an_organization_past_the_v2_paging_depth_is_reported_and_the_pass_ends);
async fn an_organization_past_the_v2_paging_depth_is_reported_and_the_pass_ends(backend: Backend) {
    // The service's depth is 100,000 objects, a multiple of the 1000-lead page; here 1000,
    // so two organizations of over 1000 leads each meet it after one full page.
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 2400,
        organizations: 2,
        v2_cursor_depth: 1000,
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let by_org = leads_by_organization(&sandbox);
    assert!(by_org.values().all(|leads| leads.len() > 1000));
    let Some(app) = spawn_app_on(backend, |s| v2_service(s, &sandbox, false)).await else {
        return;
    };
    let reconciler = reconciler(&app, &sandbox);

    for round in 0..2 {
        let logged = sandbox.requests().len();
        let summary = pass(&reconciler).await;
        assert!(!summary.interrupted);
        assert_eq!(summary.organizations.len(), 2);
        assert_eq!(summary.leads_scanned, 2000, "the first 1000 of each");
        assert_eq!(summary.errors.len(), 2, "{:?}", summary.errors);
        for (organization, error) in by_org.keys().zip(&summary.errors) {
            assert!(error.starts_with(&format!("{organization}: ")), "{error}");
            assert!(
                error.contains("no further than 100,000 leads")
                    && error.contains("422")
                    && error.contains("not reconciled")
                    && error.contains("api_version = \"v3\""),
                "{error}"
            );
        }
        // One refused request per organization: nothing asked twice, nothing looped.
        let requests = &sandbox.requests()[logged..];
        for organization in by_org.keys() {
            let reads = reads_of(requests, &leads_path(organization));
            let statuses: Vec<u16> = reads.iter().map(|r| r.status).collect();
            assert_eq!(statuses, [200, 422], "round {round}: {organization}");
            assert!(
                reads[0]
                    .query
                    .as_deref()
                    .is_some_and(|q| !q.contains("cursor=")),
                "round {round}: every pass starts from the first page"
            );
        }
    }

    // What a user sees: the error per organization, and the leads past the depth missing.
    let status = ledger::status(&app.pool).await.unwrap();
    assert!(status.reconciliation_in_progress.is_empty());
    assert_eq!(status.reconciliation.len(), 2);
    for organization in &status.reconciliation {
        assert_eq!(organization.leads_scanned, 1000);
        let error = organization.error.as_deref().unwrap_or_default();
        assert!(error.contains("100,000"), "{error}");
    }
    let mirrored = mirrored_consent(&app).await;
    assert_eq!(mirrored.len(), 2000);
    for leads in by_org.values() {
        assert!(leads[..1000].iter().all(|l| mirrored.contains_key(&l.id)));
        assert!(leads[1000..].iter().all(|l| !mirrored.contains_key(&l.id)));
    }
    app.stop().await;
    sandbox.shutdown().await;
}
