//! Reconciliation against the sandbox: lost, duplicated and reordered webhooks are repaired
//! by one pass; interrupted passes resume; the token guard survives a restart.

use crate::common;
use crate::common::{Backend, on_both_backends, spawn_app_on};

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use outreach_sync::client::ServiceClient;
use outreach_sync::ledger;
use outreach_sync::reconcile::{PassRequest, Reconciler, mirror_lead};
use outreach_sync::settings::Settings;
use outreach_sync_sandbox::wire::{MessageType, Scope, WebhookConfig};
use outreach_sync_sandbox::{DeliveryFaults, RunningSandbox, Sandbox, SandboxConfig};
use secrecy::SecretString;
use tokio_util::sync::CancellationToken;

fn point_at(settings: &mut Settings, sandbox: &RunningSandbox) {
    settings.service.base_url = sandbox.base_url();
    settings.service.client_id = sandbox.config().client_id.clone();
    settings.service.client_secret =
        Some(SecretString::from(sandbox.config().client_secret.clone()));
    settings.service.requests_per_second = 1000;
    settings.reconcile.schedule = "".into();
    settings.reconcile.on_start = false;
    settings.reconcile.message_stale_after_secs = 0;
}

fn subscribe(sandbox: &RunningSandbox, app: &common::TestApp) {
    let url = app.url("/webhooks");
    let consent = WebhookConfig::ConsentUpdate {
        scope: Scope::Account,
        include_opt_out: true,
        include_opt_in: true,
    };
    sandbox
        .register_webhook(&url, common::SECRET, consent)
        .expect("consent registration");
    let statuses = WebhookConfig::MessageStatus {
        scope: Scope::Account,
    };
    sandbox
        .register_webhook(&url, common::SECRET, statuses)
        .expect("status registration");
}

/// A sandbox with `leads` leads in one organization.
async fn one_organization(leads: usize) -> RunningSandbox {
    Sandbox::spawn(SandboxConfig {
        leads,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .unwrap()
}

fn reconciler(app: &common::TestApp, sandbox: &RunningSandbox) -> Reconciler {
    let client = ServiceClient::new(common::client_config(sandbox)).unwrap();
    Reconciler::new(app.pool.clone(), client, &app.settings.reconcile)
}

/// A mirrored lead as compared: organization, number, first name, active groups, inactive
/// groups, tags, custom fields (JSON text), opted out.
type MirrorLead = (
    String,
    String,
    Option<String>,
    String,
    String,
    String,
    String,
    bool,
);
/// The same with the lead id in front, as read from the database.
type LeadRow = (
    String,
    String,
    String,
    Option<String>,
    String,
    String,
    String,
    String,
    bool,
);

async fn mirror_leads(app: &common::TestApp) -> BTreeMap<String, MirrorLead> {
    // JSON columns as text, written the way `text` writes them (jsonb has its own spacing).
    let rows: Vec<LeadRow> = app
        .rows(
            "SELECT l.id, l.organization_id, l.phone_number, l.first_name,
                CAST(l.active_group_ids AS TEXT), CAST(l.inactive_group_ids AS TEXT),
                CAST(l.tag_ids AS TEXT), CAST(l.custom_fields AS TEXT), s.opted_out
         FROM leads AS l JOIN consent_state AS s USING (organization_id, phone_number)",
        )
        .await;
    let json = |column: String| text(&serde_json::from_str::<serde_json::Value>(&column).unwrap());
    rows.into_iter()
        .map(|(id, o, p, f, a, i, t, c, out)| {
            (id, (o, p, f, json(a), json(i), json(t), json(c), out))
        })
        .collect()
}

fn service_leads(sandbox: &RunningSandbox) -> BTreeMap<String, MirrorLead> {
    sandbox
        .leads()
        .iter()
        .map(|l| {
            let m = mirror_lead(&common::as_client(l)).expect("the sandbox's numbers are E.164");
            let row = (
                m.organization_id.clone(),
                m.phone_number.clone(),
                m.first_name.clone(),
                text(&m.active_group_ids),
                text(&m.inactive_group_ids),
                text(&m.tag_ids),
                text(&m.custom_fields),
                m.global_opted_out,
            );
            (m.id, row)
        })
        .collect()
}

fn text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap()
}

on_both_backends!(
    one_pass_after_lost_duplicated_and_reordered_webhooks_makes_the_mirror_equal_the_service,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn one_pass_after_lost_duplicated_and_reordered_webhooks_makes_the_mirror_equal_the_service(
    backend: Backend,
) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 5000,
        organizations: 3,
        seed: 42,
        delivery_faults: DeliveryFaults {
            drop_rate: 0.3,
            duplicate_rate: 0.1,
            reorder: true,
            max_delay_ms: 20,
        },
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let Some(app) = spawn_app_on(backend, |s| point_at(s, &sandbox)).await else {
        return;
    };
    subscribe(&sandbox, &app);

    // Consent churn and message traffic, deterministic.
    let leads = sandbox.leads();
    let mut changed: HashMap<(String, String), ()> = HashMap::new();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let mut next = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    for i in 0..1500 {
        let lead = &leads[next(leads.len())];
        let result = if i % 3 == 2 {
            sandbox.text_start(&lead.organization_id, &lead.phone_number)
        } else {
            sandbox.text_stop(&lead.organization_id, &lead.phone_number)
        };
        for l in result.unwrap_or_default() {
            changed.insert((l.organization_id.clone(), l.phone_number.clone()), ());
        }
    }
    let mut sent = 0;
    for _ in 0..400 {
        let lead = &leads[next(leads.len())];
        if sandbox.send_message(&lead.id, MessageType::SMS).is_ok() {
            sent += 1;
        }
    }
    for _ in 0..4 {
        sandbox.advance_messages(&[]);
    }
    assert!(
        sandbox.settle(Duration::from_secs(120)).await,
        "the sandbox never finished delivering"
    );
    app.drain().await;

    let before = mirror_leads(&app).await;
    let truth = service_leads(&sandbox);
    let wrong_before = truth
        .iter()
        .filter(|(id, t)| before.get(*id) != Some(t))
        .count();
    let consent_gaps = truth
        .iter()
        .filter(|(id, t)| before.get(*id).is_some_and(|b| b.7 != t.7))
        .count();
    assert!(
        consent_gaps > 0,
        "with 30% of deliveries dropped the mirror must have consent gaps before reconciling"
    );

    let summary = reconciler(&app, &sandbox)
        .run_pass(&PassRequest::default(), &CancellationToken::new())
        .await
        .expect("no other pass");
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    assert_eq!(summary.leads_scanned, truth.len() as u64);
    assert_eq!(
        summary.repaired, consent_gaps as u64,
        "every consent gap is repaired, and only those"
    );

    let after = mirror_leads(&app).await;
    assert_eq!(after.len(), truth.len());
    for (id, expected) in &truth {
        assert_eq!(after.get(id), Some(expected), "lead {id}");
    }
    let service_messages: HashMap<String, (String, Option<String>)> = sandbox
        .messages()
        .into_iter()
        .map(|m| (m.id, (m.status, m.error_code)))
        .collect();
    let tracked: Vec<(String, String, Option<String>)> = app
        .rows("SELECT id, status, error_code FROM messages")
        .await;
    assert!(!tracked.is_empty());
    for (id, status, error_code) in &tracked {
        assert_eq!(
            service_messages.get(id),
            Some(&(status.clone(), error_code.clone())),
            "message {id}"
        );
    }
    // The ledger has an entry for every change: each number whose consent changed upstream
    // has a ledger entry carrying its final state, and every current state points at one.
    for (org, phone) in changed.keys() {
        let final_state = truth
            .values()
            .find(|t| &t.0 == org && &t.1 == phone)
            .map(|t| t.7);
        let entries = ledger::history(&app.pool, phone, Some(org)).await.unwrap();
        assert!(
            entries.iter().any(|e| Some(e.opted_out) == final_state),
            "{org} {phone}: {entries:?}"
        );
    }
    let dangling = app
        .count(
            "SELECT COUNT(*) FROM consent_state s LEFT JOIN ledger l ON l.seq = s.seq
             WHERE l.seq IS NULL OR l.opted_out <> s.opted_out",
        )
        .await;
    assert_eq!(dangling, 0);
    let stats = sandbox.stats();
    println!(
        "e2e: {} leads, {} consent changes, {sent} messages ({} tracked); {wrong_before} leads missing or stale before the pass ({consent_gaps} with the wrong consent), {} new, {} repaired; {} ms; sandbox stats: {stats:?}",
        truth.len(),
        changed.len(),
        tracked.len(),
        summary.leads_new,
        summary.repaired,
        summary.duration_ms
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(an_interrupted_pass_resumes_from_its_saved_cursor);
async fn an_interrupted_pass_resumes_from_its_saved_cursor(backend: Backend) {
    let sandbox = one_organization(2500).await;
    let Some(app) = spawn_app_on(backend, |s| point_at(s, &sandbox)).await else {
        return;
    };
    let reconciler = reconciler(&app, &sandbox);
    let leads_only = PassRequest {
        messages: false,
        ..PassRequest::default()
    };

    // Stopped before it starts: the first page is written, then the pass stops.
    let stopped = CancellationToken::new();
    stopped.cancel();
    let first = reconciler.run_pass(&leads_only, &stopped).await.unwrap();
    assert!(first.interrupted);
    assert_eq!(first.leads_scanned, 1000);
    let status = ledger::status(&app.pool).await.unwrap();
    assert_eq!(status.reconciliation_in_progress.len(), 1);

    let second = reconciler
        .run_pass(&leads_only, &CancellationToken::new())
        .await
        .unwrap();
    assert!(!second.interrupted);
    let total = sandbox.leads().len() as u64;
    assert!(total > 2000, "three pages");
    assert_eq!(
        second.leads_scanned,
        total - 1000,
        "the second pass starts where the first stopped"
    );
    let status = ledger::status(&app.pool).await.unwrap();
    assert!(status.reconciliation_in_progress.is_empty());
    assert_eq!(status.reconciliation[0].leads_scanned as u64, total);
    assert_eq!(status.leads as u64, total);
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(a_webhook_newer_than_the_fetch_still_wins_over_the_observation);
async fn a_webhook_newer_than_the_fetch_still_wins_over_the_observation(backend: Backend) {
    let sandbox = one_organization(10).await;
    let Some(app) = spawn_app_on(backend, |s| point_at(s, &sandbox)).await else {
        return;
    };
    let lead = sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .unwrap();
    // A webhook dated in the future (as if it happened after the fetch) says opted out.
    let future = chrono::Utc::now() + chrono::Duration::minutes(5);
    let body = serde_json::json!({"type": "consentUpdate-v1", "id": "evt_future", "createdAt": future.to_rfc3339(),
        "data": {"organizationId": lead.organization_id, "phoneNumber": lead.phone_number, "globalOptedOut": true}})
    .to_string();
    assert_eq!(app.post_signed(&body).await.status(), 200);
    app.drain().await;

    reconciler(&app, &sandbox)
        .run_pass(&PassRequest::default(), &CancellationToken::new())
        .await
        .unwrap();

    let current = ledger::current(&app.pool, &lead.phone_number, Some(&lead.organization_id))
        .await
        .unwrap();
    assert!(current[0].opted_out && current[0].source == "webhook");
    let history = ledger::history(&app.pool, &lead.phone_number, Some(&lead.organization_id))
        .await
        .unwrap();
    assert!(
        history
            .iter()
            .any(|e| e.source == "reconcile" && !e.opted_out && e.superseded),
        "{history:?}"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(bad_credentials_stop_token_requests_after_three_even_across_a_restart);
async fn bad_credentials_stop_token_requests_after_three_even_across_a_restart(backend: Backend) {
    let sandbox = Sandbox::spawn(SandboxConfig::default()).await.unwrap();
    let Some(app) = spawn_app_on(backend, |s| {
        point_at(s, &sandbox);
        s.service.client_secret = Some(SecretString::from("wrong-secret"));
    })
    .await
    else {
        return;
    };
    let settings = app.settings.clone();
    for _ in 0..2 {
        // Each round is a fresh client over the same database, as after a restart.
        let client = outreach_sync::upstream::service_client(
            &common::served(&settings, "default"),
            &app.pool,
            app.metrics.clone(),
        )
        .unwrap();
        let reconciler = Reconciler::new(app.pool.clone(), client, &settings.reconcile);
        for _ in 0..3 {
            let summary = reconciler
                .run_pass(&PassRequest::default(), &CancellationToken::new())
                .await
                .unwrap();
            assert!(!summary.errors.is_empty());
        }
    }
    assert_eq!(sandbox.stats().token_requests, 3);
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_webhook_dated_2099_ranks_at_its_receipt_so_the_persons_later_stop_holds,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_webhook_dated_2099_ranks_at_its_receipt_so_the_persons_later_stop_holds(
    backend: Backend,
) {
    let sandbox = one_organization(10).await;
    let Some(app) = spawn_app_on(backend, |s| point_at(s, &sandbox)).await else {
        return;
    };
    subscribe(&sandbox, &app);
    let lead = sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .unwrap();
    // A service with a clock gone wrong (or one bad event) says opted in, in 2099.
    let body = serde_json::json!({"type": "consentUpdate-v1", "id": "evt_2099",
        "createdAt": "2099-01-01T00:00:00Z",
        "data": {"organizationId": lead.organization_id, "phoneNumber": lead.phone_number,
                 "globalOptedOut": false}})
    .to_string();
    let before = chrono::Utc::now();
    assert_eq!(app.post_signed(&body).await.status(), 200);
    app.drain().await;
    // Then the person texts STOP, now.
    sandbox
        .text_stop(&lead.organization_id, &lead.phone_number)
        .expect("stop");
    assert!(sandbox.settle(Duration::from_secs(10)).await);
    app.drain().await;

    let current = ledger::current(&app.pool, &lead.phone_number, Some(&lead.organization_id))
        .await
        .unwrap();
    assert!(current[0].opted_out, "the STOP holds: {current:?}");
    let history = ledger::history(&app.pool, &lead.phone_number, Some(&lead.organization_id))
        .await
        .unwrap();
    let future = history
        .iter()
        .find(|e| e.event_ref == "event:evt_2099")
        .expect("the 2099 event is in the ledger");
    assert!(
        future.occurred_at.0 >= before && future.occurred_at.0 <= chrono::Utc::now(),
        "it ranks at its receipt: {future:?}"
    );
    assert!(
        !history.iter().any(|e| e.opted_out && e.superseded),
        "the STOP is not superseded: {history:?}"
    );
    assert_eq!(app.metrics.future_times_counted("service"), 1);
    // The time as given stays in the evidence: the delivery as received.
    let kept: Vec<Vec<u8>> = app
        .blobs("SELECT body FROM outbox WHERE dedup_key = 'event:evt_2099'")
        .await;
    assert!(String::from_utf8_lossy(&kept[0]).contains("2099-01-01T00:00:00Z"));

    // A pass finds nothing to repair: the mirror is the service's.
    reconciler(&app, &sandbox)
        .run_pass(&PassRequest::default(), &CancellationToken::new())
        .await
        .unwrap();
    let mirror = mirror_leads(&app).await;
    let service = service_leads(&sandbox);
    assert_eq!(mirror.get(&lead.id), service.get(&lead.id));
    assert!(mirror[&lead.id].7, "opted out in the mirror");
    app.stop().await;
    sandbox.shutdown().await;
}
