//! Destinations: every opt-out written into the campaign's systems of record, the sandbox's
//! VAN and Action Network, in their own APIs, with the outcome of each entry kept.

use std::collections::BTreeSet;

use outreach_sync::model::OutcomeKind;
use outreach_sync::reconcile::{PassRequest, Reconciler};
use outreach_sync::settings::{DestinationKind, DestinationSettings, Settings};
use outreach_sync::store::DestinationStore as _;
use outreach_sync::subscribers::Attempt;
use outreach_sync_sandbox::destinations::{Fake, FakeFault};
use outreach_sync_sandbox::{
    DEFAULT_ACTION_NETWORK_KEY, DEFAULT_VAN_KEY, RunningSandbox, Sandbox, SandboxConfig,
};
use secrecy::SecretString;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::common::{self, Backend, TestApp, on_both_backends, spawn_app_on, with_admin_token};

/// Leads in the sandbox: about 5% start opted out, and about 90% have a VAN ID.
const LEADS: usize = 300;

fn van(sandbox: &RunningSandbox) -> DestinationSettings {
    let mut van = DestinationSettings::new(
        "van-main",
        DestinationKind::Van,
        &sandbox.van_url(),
        DEFAULT_VAN_KEY,
    );
    van.requests_per_second = 1_000;
    van
}

fn action_network(sandbox: &RunningSandbox) -> DestinationSettings {
    let mut an = DestinationSettings::new(
        "action-network",
        DestinationKind::ActionNetwork,
        &sandbox.action_network_url(),
        DEFAULT_ACTION_NETWORK_KEY,
    );
    an.requests_per_second = 1_000;
    an
}

fn point_at(settings: &mut Settings, sandbox: &RunningSandbox) {
    settings.service.base_url = sandbox.base_url();
    settings.service.client_id = sandbox.config().client_id.clone();
    settings.service.client_secret =
        Some(SecretString::from(sandbox.config().client_secret.clone()));
    settings.service.requests_per_second = 1000;
    settings.reconcile.schedule = "".into();
    settings.reconcile.on_start = false;
    with_admin_token(settings);
}

/// A sandbox and a daemon writing to its VAN and Action Network (as `configure` leaves
/// them), the mirror filled by one reconciliation pass, which records the leads that
/// start opted out.
async fn campaign(
    backend: Backend,
    configure: impl FnOnce(&mut Settings, &RunningSandbox),
) -> Option<(RunningSandbox, TestApp)> {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: LEADS,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let app = spawn_app_on(backend, |s| {
        point_at(s, &sandbox);
        s.destination.push(van(&sandbox));
        s.destination.push(action_network(&sandbox));
        configure(s, &sandbox);
    })
    .await?;
    let client = outreach_sync::client::ServiceClient::new(common::client_config(&sandbox))
        .expect("client");
    Reconciler::new(app.pool.clone(), client, &app.settings.reconcile)
        .run_pass(&PassRequest::default(), &CancellationToken::new())
        .await
        .expect("a pass");
    Some((sandbox, app))
}

/// The opt-outs the ledger holds: (seq, lead id, number).
async fn opt_outs(app: &TestApp) -> Vec<(i64, Option<String>, String)> {
    app.rows("SELECT seq, lead_id, phone_number FROM ledger WHERE opted_out ORDER BY seq")
        .await
}

async fn view(app: &TestApp, name: &str) -> Value {
    let list: Value = app
        .admin_get("/v1/destinations")
        .await
        .json()
        .await
        .expect("json");
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|d| d["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is listed: {list}"))
}

/// The VAN ID the sandbox gave each lead that has one.
fn van_ids(sandbox: &RunningSandbox) -> std::collections::HashMap<String, u64> {
    sandbox
        .van_truth()
        .people
        .into_iter()
        .filter_map(|p| Some((p.lead_id?, p.van_id)))
        .collect()
}

on_both_backends!(
    every_opt_out_reaches_van_and_action_network_and_each_entry_has_its_outcome,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn every_opt_out_reaches_van_and_action_network_and_each_entry_has_its_outcome(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend, |_, _| {}).await else {
        return;
    };
    app.settle().await;
    let opt_outs = opt_outs(&app).await;
    assert!(opt_outs.len() >= 5, "the sandbox starts some opted out");
    let ids = van_ids(&sandbox);
    let (matched, unmatched): (Vec<_>, Vec<_>) = opt_outs
        .iter()
        .partition(|(_, lead, _)| lead.as_ref().is_some_and(|l| ids.contains_key(l)));
    assert!(!matched.is_empty() && !unmatched.is_empty(), "{ids:?}");

    // VAN: a canvass response with this committee's own ids, and the phone's status O.
    let truth = sandbox.van_truth();
    let committee = &truth.committees[0];
    let code = committee
        .result_codes
        .iter()
        .find(|c| c.name == "Do Not Text")
        .expect("the committee has Do Not Text");
    let sms = committee
        .contact_types
        .iter()
        .find(|c| c.name == "SMS Text")
        .expect("the committee has SMS Text");
    assert_ne!(code.result_code_id, 130, "not VAN's common default");
    let canvassed: BTreeSet<u64> = truth
        .canvass_responses
        .iter()
        .map(|r| {
            assert_eq!(r.result_code_id, Some(code.result_code_id));
            assert_eq!(r.contact_type_id, Some(sms.contact_type_id));
            assert_eq!(r.database_mode, 1);
            r.van_id
        })
        .collect();
    let expected: BTreeSet<u64> = matched
        .iter()
        .map(|(_, lead, _)| ids[lead.as_ref().expect("a lead")])
        .collect();
    assert_eq!(canvassed, expected, "one canvass response per opted-out person");
    assert_eq!(truth.canvass_responses.len(), matched.len(), "none repeated");
    for (_, lead, phone) in &matched {
        let van_id = ids[lead.as_ref().expect("a lead")];
        let person = truth
            .people
            .iter()
            .find(|p| p.van_id == van_id)
            .expect("the person");
        let national = phone.trim_start_matches("+1");
        let status = person
            .phones
            .iter()
            .find(|p| p.phone_number == national)
            .and_then(|p| p.phone_opt_in_status.clone());
        assert_eq!(status.as_deref(), Some("O"), "{phone} opted out in VAN");
    }

    // Action Network: every opt-out, matched by the number itself.
    let an = sandbox.action_network_truth();
    for (_, _, phone) in &opt_outs {
        let number = phone.trim_start_matches('+');
        let unsubscribed = an.people.iter().any(|p| {
            p.phone_numbers
                .iter()
                .any(|n| n.number == number && n.status == "unsubscribed")
        });
        assert!(unsubscribed, "{phone} unsubscribed in Action Network");
    }

    // The outcomes, as shown.
    let van_view = view(&app, "van-main").await;
    assert_eq!(van_view["state"], "active", "{van_view}");
    assert_eq!(van_view["sent"], matched.len(), "{van_view}");
    assert_eq!(van_view["unmatched"], unmatched.len(), "{van_view}");
    assert_eq!(van_view["refused"], 0, "{van_view}");
    assert_eq!(van_view["kind"], "van");
    let an_view = view(&app, "action-network").await;
    assert_eq!(an_view["sent"], opt_outs.len(), "{an_view}");
    let listed: Value = app
        .admin_get("/v1/destinations/van-main/outcomes?state=unmatched")
        .await
        .json()
        .await
        .expect("json");
    let items = listed["items"].as_array().expect("items");
    assert_eq!(items.len(), unmatched.len(), "{listed}");
    for item in items {
        assert_eq!(item["outcome"], "unmatched");
        let reason = item["reason"].as_str().expect("a reason");
        assert!(reason.contains("no VAN ID"), "{reason}");
    }
    let requests = app.metrics.render(Default::default());
    assert!(
        requests.contains(&format!(
            "outreach_sync_destination_requests_total{{destination=\"van-main\",outcome=\"sent\"}} {}",
            2 * matched.len()
        )),
        "{requests}"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_refused_entry_is_kept_with_vans_words_and_never_holds_the_rest_back,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_refused_entry_is_kept_with_vans_words_and_never_holds_the_rest_back(backend: Backend) {
    let Some((sandbox, app)) = campaign(backend, |s, _| s.destination.truncate(1)).await else {
        return;
    };
    // The first canvass response is answered 404, as for a VAN ID VAN does not know.
    sandbox.fake_fail_next(
        Fake::Van,
        1,
        FakeFault::Status {
            status: 404,
            retry_after_secs: None,
        },
    );
    app.settle().await;
    let view = view(&app, "van-main").await;
    assert_eq!(view["refused"], 1, "{view}");
    assert_eq!(view["state"], "active", "{view}");
    let sent = view["sent"].as_i64().expect("sent");
    assert!(sent >= 1, "the rest went: {view}");
    let refused = app
        .pool
        .outcomes("van-main", Some(OutcomeKind::Refused), 0, 10)
        .await
        .expect("outcomes");
    let reason = refused[0].reason.as_deref().expect("a reason");
    assert!(reason.starts_with("answered 404"), "{reason}");
    assert_eq!(sandbox.van_truth().canvass_responses.len() as i64, sent);
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    credentials_refused_stop_the_destination_and_lose_nothing_until_retried,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn credentials_refused_stop_the_destination_and_lose_nothing_until_retried(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend, |s, _| s.destination.truncate(1)).await else {
        return;
    };
    assert!(sandbox.van_revoke(DEFAULT_VAN_KEY, Some(401)));
    let settled = app.settle().await;
    assert!(
        matches!(&settled[..], [(_, Attempt::Stopped(error))] if error.starts_with("credentials:")),
        "{settled:?}"
    );
    let stopped = view(&app, "van-main").await;
    assert_eq!(stopped["state"], "error", "{stopped}");
    assert_eq!(stopped["sent"], 0, "{stopped}");
    let error = stopped["lastError"].as_str().expect("an error");
    assert!(error.starts_with("credentials: "), "{error}");
    assert!(!error.contains(DEFAULT_VAN_KEY), "the key is never shown");
    assert!(sandbox.van_truth().canvass_responses.is_empty());

    // The key works again: everything waiting goes.
    assert!(sandbox.van_revoke(DEFAULT_VAN_KEY, None));
    let retried = app
        .admin_post("/v1/destinations/van-main/retry", &serde_json::json!({}))
        .await;
    assert_eq!(retried.status(), 200);
    app.settle().await;
    let after = view(&app, "van-main").await;
    assert_eq!(after["state"], "active", "{after}");
    let written = after["sent"].as_i64().unwrap_or(0) + after["unmatched"].as_i64().unwrap_or(0);
    assert_eq!(written as usize, opt_outs(&app).await.len(), "{after}");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_committee_without_sms_text_sends_nothing_and_says_what_is_missing,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_committee_without_sms_text_sends_nothing_and_says_what_is_missing(backend: Backend) {
    let Some((sandbox, app)) = campaign(backend, |s, sandbox| {
        s.destination.truncate(1);
        assert!(sandbox.van_set_sms_text(DEFAULT_VAN_KEY, false));
    })
    .await
    else {
        return;
    };
    app.settle().await;
    let view = view(&app, "van-main").await;
    assert_eq!(view["state"], "error", "{view}");
    let error = view["lastError"].as_str().expect("an error");
    assert!(error.contains("no contact type named \"SMS Text\""), "{error}");
    assert!(sandbox.van_truth().canvass_responses.is_empty());

    let http = outreach_sync::subscribers::http_client().expect("client");
    let checked =
        outreach_sync::subscribers::destinations::check(&app.settings.destination, None, &http)
            .await
            .expect("checked");
    let problem = checked[0].problem.as_deref().expect("a problem");
    assert!(problem.contains("SMS Text"), "{problem}");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    throttling_and_outages_are_retried_and_a_redirect_is_never_followed,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn throttling_and_outages_are_retried_and_a_redirect_is_never_followed(backend: Backend) {
    let Some((sandbox, app)) = campaign(backend, |s, _| {
        s.destination.remove(0);
    })
    .await
    else {
        return;
    };
    for fault in [
        FakeFault::Status {
            status: 429,
            retry_after_secs: Some(1),
        },
        FakeFault::Status {
            status: 503,
            retry_after_secs: None,
        },
        FakeFault::Redirect { location: None },
        FakeFault::Garbage,
    ] {
        sandbox.fake_fail_next(Fake::ActionNetwork, 1, fault);
    }
    // Each settle tries once past the backoff: the faults answer the first four tries.
    for _ in 0..3 {
        let settled = app.settle().await;
        let [(_, Attempt::Failed { error, .. })] = &settled[..] else {
            panic!("{settled:?}");
        };
        assert!(!error.contains(DEFAULT_ACTION_NETWORK_KEY), "{error}");
    }
    let view3 = view(&app, "action-network").await;
    let error = view3["lastError"].as_str().expect("an error");
    assert!(error.contains("redirects are not followed"), "{error}");
    app.settle().await;
    let done = view(&app, "action-network").await;
    assert_eq!(done["state"], "active", "{done}");
    assert_eq!(done["sent"], opt_outs(&app).await.len(), "{done}");
    // Garbage in a 200 is a success: Action Network's answer is not needed.
    app.stop().await;
    sandbox.shutdown().await;
}
