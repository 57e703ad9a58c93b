//! Local changes of a daemon configured with `[service] api_version = "v2"`: pushed as
//! `PUT /v2/leads/{id}` to every lead with the number (the reads and repairs through /v2
//! are in `v2.rs`).

use crate::common;
use crate::common::{Backend, on_both_backends, spawn_app_on};
use crate::v2::{daemon_client, leads_path, v2_service};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::TryStreamExt;
use outreach_sync::client::ServiceClient;
use outreach_sync::client::models::{AgentVisibility, LeadOperation, ListTags};
use outreach_sync::pusher::{Attempted, Pusher};
use outreach_sync_sandbox::wire::{Lead, WebhookConfig};
use outreach_sync_sandbox::{Outcome, Sandbox, SandboxConfig};
use serde_json::{Value, json};
use tokio::sync::Notify;

on_both_backends!(
    a_local_opt_out_is_pushed_with_put_v2_leads_and_reaches_every_lead_with_the_number
);
async fn a_local_opt_out_is_pushed_with_put_v2_leads_and_reaches_every_lead_with_the_number(
    backend: Backend,
) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 60,
        organizations: 2,
        account_sync: true,
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    // One number with a lead in each organization, neither opted out.
    let leads = sandbox.leads();
    let (lead, twin) = leads
        .iter()
        .find_map(|a| {
            let twin = leads.iter().find(|b| {
                b.phone_number == a.phone_number && b.organization_id != a.organization_id
            })?;
            (!a.global_opted_out && !twin.global_opted_out).then(|| (a.clone(), twin.clone()))
        })
        .expect("a number with a lead in each organization");
    let Some(app) = spawn_app_on(backend, |s| {
        common::with_admin_token(s);
        v2_service(s, &sandbox, false);
    })
    .await
    else {
        return;
    };
    sandbox
        .register_webhook(
            &app.url(&app.settings.ingest.path),
            common::SECRET,
            WebhookConfig::all_consent(),
        )
        .unwrap();
    // The lead has a tag already; the opt-out adds the organization's OPT_OUT tag to it.
    let v3 = ServiceClient::new(common::client_config(&sandbox)).unwrap();
    let tags: Vec<_> = v3
        .tags(
            ListTags {
                organization_id: Some(lead.organization_id.clone()),
                ..ListTags::default()
            },
            None,
        )
        .try_collect()
        .await
        .unwrap();
    let tag_of = |visibility| {
        tags.iter()
            .find(|t| t.agent_visibility == visibility)
            .map(|t| t.id.clone())
            .unwrap()
    };
    let (volunteer, stop_tag) = (
        tag_of(AgentVisibility::LeadProfiles),
        tag_of(AgentVisibility::OptOut),
    );
    v3.patch_lead(
        &lead.id,
        LeadOperation::ApplyTag {
            tag_id: volunteer.clone(),
        },
    )
    .await
    .unwrap();
    let logged = sandbox.requests().len();

    let change = json!({"phoneNumber": lead.phone_number, "organizationId": lead.organization_id,
                        "optedOut": true, "tagId": stop_tag, "reason": "asked by phone"});
    let response = app.admin_post("/v1/consent", &change).await;
    assert_eq!(response.status(), 202);
    let seq = response.json::<Value>().await.unwrap()["seq"]
        .as_i64()
        .unwrap();
    let pusher = Pusher::new(
        app.pool.clone(),
        daemon_client(&app, &sandbox),
        Arc::new(Notify::new()),
    );
    assert_eq!(
        pusher.try_push(Utc::now()).await.unwrap(),
        Some(Attempted::Sent { seq })
    );

    let upstream: HashMap<String, Lead> = sandbox
        .leads()
        .into_iter()
        .map(|l| (l.id.clone(), l))
        .collect();
    assert!(
        upstream[&lead.id].global_opted_out,
        "the service has the opt-out"
    );
    let tags = &upstream[&lead.id].tag_ids;
    assert!(
        tags.contains(&stop_tag) && tags.contains(&volunteer),
        "the opt-out tag is added and the lead's other tags kept: {tags:?}"
    );
    assert!(
        upstream[&twin.id].global_opted_out,
        "account sync: the number's lead in the other organization follows"
    );
    // The mirror did not know the lead: v2 has no lookup by number, so the organization's
    // leads were read to find it, then the lead's tags, then the PUT.
    let requests = sandbox.requests()[logged..].to_vec();
    let calls: Vec<(String, String)> = requests
        .iter()
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    let lead_path = format!("/v2/leads/{}", lead.id);
    assert_eq!(
        calls,
        [
            ("GET".into(), leads_path(&lead.organization_id)),
            ("GET".into(), lead_path.clone()),
            ("PUT".into(), lead_path),
        ],
        "{requests:?}"
    );
    assert!(requests.iter().all(|r| r.status == 200));

    // The service announces both leads' change by webhook; the daemon stores and applies
    // them: its own change stays current, the other organization's is new to it.
    assert!(sandbox.settle(Duration::from_secs(30)).await);
    let delivered = sandbox
        .deliveries()
        .into_iter()
        .filter(|d| d.event_type == "consentUpdate-v1" && d.outcome == Outcome::Delivered)
        .count();
    assert_eq!(delivered, 2);
    app.drain().await;
    let path = format!(
        "/v1/consent?phoneNumber={}",
        lead.phone_number.replace('+', "%2B")
    );
    let current: Value = app.admin_get(&path).await.json().await.unwrap();
    let by_org: HashMap<String, (bool, String)> = current["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["organizationId"].as_str().unwrap().to_owned(),
                (
                    i["optedOut"].as_bool().unwrap(),
                    i["source"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect();
    assert_eq!(by_org[&lead.organization_id], (true, "local".to_owned()));
    assert_eq!(by_org[&twin.organization_id], (true, "webhook".to_owned()));
    let status: Value = app.admin_get("/v1/status").await.json().await.unwrap();
    assert_eq!(status["pushes"]["sent"], 1);
    assert_eq!(status["pushes"]["pending"], 0);

    // And back: an opt-in is `globalOptedOut: false`.
    let change = json!({"phoneNumber": lead.phone_number, "organizationId": lead.organization_id,
                        "optedOut": false});
    let seq = app
        .admin_post("/v1/consent", &change)
        .await
        .json::<Value>()
        .await
        .unwrap()["seq"]
        .as_i64()
        .unwrap();
    assert_eq!(
        pusher.try_push(Utc::now()).await.unwrap(),
        Some(Attempted::Sent { seq })
    );
    let upstream = sandbox.leads();
    assert!(
        upstream
            .iter()
            .all(|l| l.phone_number != lead.phone_number || !l.global_opted_out)
    );
    app.stop().await;
    sandbox.shutdown().await;
}
