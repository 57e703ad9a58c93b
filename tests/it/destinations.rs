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

pub(crate) mod once;

/// Leads in the sandbox: about 5% start opted out, and about 90% have a VAN ID.
const LEADS: usize = 300;

pub(crate) fn van(sandbox: &RunningSandbox) -> DestinationSettings {
    let mut van = DestinationSettings::new(
        "van-main",
        DestinationKind::Van,
        &sandbox.van_url(),
        DEFAULT_VAN_KEY,
    );
    van.requests_per_second = 1_000;
    van
}

pub(crate) fn action_network(sandbox: &RunningSandbox) -> DestinationSettings {
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
    // The daemon's own passes stay off: the test's one pass fills the mirror.
    settings.service.base_url = sandbox.base_url();
    settings.service.client_id = sandbox.config().client_id.clone();
    settings.service.client_secret =
        Some(SecretString::from(sandbox.config().client_secret.clone()));
    settings.service.requests_per_second = 1000;
    settings.reconcile.schedule = "".into();
    settings.reconcile.on_start = false;
    with_admin_token(settings);
}

/// A sandbox and a daemon on it whose mirror one reconciliation pass filled (recording
/// the leads that start opted out), with no destination yet.
pub(crate) async fn campaign(backend: Backend) -> Option<(RunningSandbox, TestApp)> {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: LEADS,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let app = spawn_app_on(backend, |s| point_at(s, &sandbox)).await?;
    let client =
        outreach_sync::client::ServiceClient::new(common::client_config(&sandbox)).expect("client");
    Reconciler::new(app.pool.clone(), client, &app.settings.reconcile)
        .run_pass(&PassRequest::default(), &CancellationToken::new())
        .await
        .expect("a pass");
    Some((sandbox, app))
}

/// The daemon again, writing to `destinations`: what they are sent starts now, after the
/// test set the scene.
pub(crate) async fn writing_to(
    mut app: TestApp,
    destinations: Vec<DestinationSettings>,
) -> TestApp {
    app.settings.destination = destinations;
    app.restart().await
}

/// Sets the custom field `VanID` of the mirror's lead `lead` to `value`.
async fn set_van_id(app: &TestApp, lead: &str, value: &str) {
    use outreach_sync::store::Pool;
    let done = match &app.pool {
        Pool::Sqlite(pool) => {
            sqlx::query("UPDATE leads SET custom_fields = json_set(custom_fields, '$.VanID', $2) WHERE id = $1")
                .bind(lead)
                .bind(value)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        }
        Pool::Postgres(pool) => {
            sqlx::query("UPDATE leads SET custom_fields = jsonb_set(custom_fields, '{VanID}', to_jsonb($2::text)) WHERE id = $1")
                .bind(lead)
                .bind(value)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        }
    };
    assert_eq!(done.expect("update"), 1, "{lead}");
}

/// The opt-outs the ledger holds: (seq, lead id, number).
async fn opt_outs(app: &TestApp) -> Vec<(i64, Option<String>, String)> {
    app.rows("SELECT seq, lead_id, phone_number FROM ledger WHERE opted_out ORDER BY seq")
        .await
}

pub(crate) async fn view(app: &TestApp, name: &str) -> Value {
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
pub(crate) fn van_ids(sandbox: &RunningSandbox) -> std::collections::HashMap<String, u64> {
    sandbox
        .van_truth()
        .people
        .into_iter()
        .filter_map(|p| Some((p.lead_id?, p.van_id)))
        .collect()
}

/// The mirror's leads that are opted out and have a person in the sandbox's VAN.
async fn opted_out_with_van_id(app: &TestApp, sandbox: &RunningSandbox) -> Vec<String> {
    let ids = van_ids(sandbox);
    opt_outs(app)
        .await
        .into_iter()
        .filter_map(|(_, lead, _)| lead.filter(|l| ids.contains_key(l)))
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
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    let app = writing_to(app, vec![van(&sandbox), action_network(&sandbox)]).await;
    let http = outreach_sync::subscribers::http_client().expect("client");
    let checked =
        outreach_sync::subscribers::destinations::check(&app.settings.destination, None, &http)
            .await
            .expect("checked");
    assert!(checked.iter().all(|c| c.problem.is_none()), "{checked:?}");
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
    assert_eq!(
        canvassed, expected,
        "one canvass response per opted-out person"
    );
    assert_eq!(
        truth.canvass_responses.len(),
        matched.len(),
        "none repeated"
    );
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
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    let with_id = opted_out_with_van_id(&app, &sandbox).await;
    assert!(with_id.len() >= 3, "{with_id:?}");
    // VAN knows no one by the first ID; the second is not an ID at all.
    set_van_id(&app, &with_id[0], "987654321").await;
    set_van_id(&app, &with_id[1], "12ab").await;
    let app = writing_to(app, vec![van(&sandbox)]).await;
    app.settle().await;
    let view = view(&app, "van-main").await;
    assert_eq!(view["refused"], 1, "{view}");
    assert_eq!(view["state"], "active", "{view}");
    let sent = view["sent"].as_i64().expect("sent");
    assert_eq!(sent as usize, with_id.len() - 2, "the rest went: {view}");
    let refused = app
        .pool
        .outcomes("van-main", Some(OutcomeKind::Refused), 0, 10)
        .await
        .expect("outcomes");
    assert_eq!(refused[0].lead_id.as_deref(), Some(with_id[0].as_str()));
    let reason = refused[0].reason.as_deref().expect("a reason");
    assert!(reason.starts_with("answered 404"), "{reason}");
    let unmatched = app
        .pool
        .outcomes("van-main", Some(OutcomeKind::Unmatched), 0, 100)
        .await
        .expect("outcomes");
    let not_an_id = unmatched
        .iter()
        .find(|o| o.lead_id.as_deref() == Some(with_id[1].as_str()))
        .expect("unmatched");
    let reason = not_an_id.reason.as_deref().expect("a reason");
    assert!(reason.contains("not a VAN ID"), "{reason}");
    assert_eq!(sandbox.van_truth().canvass_responses.len() as i64, sent);
    app.stop().await;
    sandbox.shutdown().await;
}

/// Records `leads` in the mirror as a reconciliation page would (opted out when the lead
/// says so).
async fn mirror(app: &TestApp, leads: &[outreach_sync::model::Lead]) {
    let mut conn = app
        .pool
        .bulk_connection(1024, 1000)
        .await
        .expect("a connection");
    let mut tx = conn.begin_write().await.expect("begin");
    outreach_sync::apply::lead_page(
        &mut tx,
        &outreach_sync::model::AccountId::default_account(),
        "pass_test",
        leads,
        chrono::Utc::now(),
    )
    .await
    .expect("a page");
    tx.commit().await.expect("commit");
}

on_both_backends!(
    a_lead_gone_from_the_mirror_is_unmatched_and_a_number_outside_plus_one_keeps_its_prefix,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_lead_gone_from_the_mirror_is_unmatched_and_a_number_outside_plus_one_keeps_its_prefix(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    let with_id = opted_out_with_van_id(&app, &sandbox).await;
    assert!(with_id.len() >= 2, "{with_id:?}");
    // The mirror no longer holds the first opted-out lead.
    let organization: Vec<(String,)> = app
        .rows(&format!(
            "SELECT organization_id FROM leads WHERE id = '{}'",
            with_id[0]
        ))
        .await;
    assert_eq!(organization.len(), 1);
    app.execute(&format!("DELETE FROM leads WHERE id = '{}'", with_id[0]))
        .await;
    // A person in London, in VAN and in the mirror, opted out.
    let london = "+442071838750";
    let van_id = sandbox.van_add_person(london);
    let lead: outreach_sync::model::Lead = serde_json::from_value(serde_json::json!({
        "id": "lead_london", "phoneNumber": london,
        "organizationId": organization[0].0,
        "globalOptedOut": true, "firstName": "Ada",
        "customFields": {"VanID": van_id.to_string()},
    }))
    .expect("a lead");
    mirror(&app, &[lead]).await;
    let app = writing_to(app, vec![van(&sandbox)]).await;
    app.settle().await;

    let view = view(&app, "van-main").await;
    assert_eq!(view["state"], "active", "{view}");
    assert_eq!(view["refused"], 0, "{view}");
    let unmatched = app
        .pool
        .outcomes("van-main", Some(OutcomeKind::Unmatched), 0, 1000)
        .await
        .expect("outcomes");
    let gone = unmatched
        .iter()
        .find(|o| o.lead_id.as_deref() == Some(with_id[0].as_str()))
        .expect("the lead gone from the mirror is unmatched");
    assert_eq!(gone.reason.as_deref(), Some("no lead in the mirror"));
    // The rest went, London with its own prefix.
    let truth = sandbox.van_truth();
    let response = truth
        .canvass_responses
        .iter()
        .find(|r| r.van_id == van_id)
        .expect("London's canvass response");
    let phone = response.phone.as_ref().expect("its phone");
    assert_eq!(phone.dialing_prefix.as_deref(), Some("44"));
    assert_eq!(phone.phone_number, "2071838750");
    let person = truth
        .people
        .iter()
        .find(|p| p.van_id == van_id)
        .expect("the person");
    assert_eq!(
        person.phones[0].phone_opt_in_status.as_deref(),
        Some("O"),
        "{person:?}"
    );
    assert_eq!(view["sent"], with_id.len(), "every other one went: {view}");
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    lookups_answered_with_garbage_ten_megabytes_or_nothing_are_retried_until_they_answer,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn lookups_answered_with_garbage_ten_megabytes_or_nothing_are_retried_until_they_answer(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    // The committee's lookups come first: the sender's own first attempt meets the hang,
    // each attempt asked for after it the next fault.
    for fault in [FakeFault::Hang, FakeFault::Garbage, FakeFault::Huge] {
        sandbox.fake_fail_next(Fake::Van, 1, fault);
    }
    let began = std::time::Instant::now();
    let app = writing_to(app, vec![van(&sandbox)]).await;
    app.senders.started("van-main").await;
    let mut errors = Vec::new();
    while errors.len() < 2 {
        match app.senders.try_now("van-main").await.expect("an attempt") {
            Attempt::Failed { error, .. } => errors.push(error),
            other => panic!("a failed lookup, not {other:?} (after {errors:?})"),
        }
    }
    assert!(
        began.elapsed() >= outreach_sync::subscribers::REQUEST_TIMEOUT,
        "the hanging lookup held the first attempt until it timed out"
    );
    let view_after = view(&app, "van-main").await;
    assert_eq!(view_after["state"], "retrying", "{view_after}");
    assert!(errors[0].contains("not the JSON expected"), "{errors:?}");
    assert!(errors[1].contains("over 1048576 bytes"), "{errors:?}");
    assert!(errors.iter().all(|e| !e.contains(DEFAULT_VAN_KEY)));
    // Then the fake answers, and everything goes.
    app.settle().await;
    let view = view(&app, "van-main").await;
    assert_eq!(view["state"], "active", "{view}");
    assert_eq!(sandbox.van_truth().requests.injected_faults, 3);
    let sent = view["sent"].as_u64().expect("sent");
    assert!(sent > 0, "{view}");
    assert_eq!(sandbox.van_truth().canvass_responses.len() as u64, sent);
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    credentials_refused_stop_the_destination_and_lose_nothing_until_retried,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn credentials_refused_stop_the_destination_and_lose_nothing_until_retried(backend: Backend) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    assert!(sandbox.van_revoke(DEFAULT_VAN_KEY, Some(401)));
    let app = writing_to(app, vec![van(&sandbox)]).await;
    // Stopped by the sender's first attempt, or by the settle's.
    let settled = app.settle().await;
    assert!(
        matches!(
            &settled[..],
            [(_, Attempt::Stopped(_) | Attempt::Waiting(_))]
        ),
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
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    assert!(sandbox.van_set_sms_text(DEFAULT_VAN_KEY, false));
    let app = writing_to(app, vec![van(&sandbox)]).await;
    app.settle().await;
    let view = view(&app, "van-main").await;
    assert_eq!(view["state"], "error", "{view}");
    let error = view["lastError"].as_str().expect("an error");
    assert!(
        error.contains("no contact type named \"SMS Text\""),
        "{error}"
    );
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
    let Some((sandbox, app)) = campaign(backend).await else {
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
        FakeFault::Redirect {
            location: Some(format!("{}/people", sandbox.action_network_url())),
        },
        FakeFault::Garbage,
    ] {
        sandbox.fake_fail_next(Fake::ActionNetwork, 1, fault);
    }
    let app = writing_to(app, vec![action_network(&sandbox)]).await;
    let total = opt_outs(&app).await.len();
    // Each attempt, the sender's own or a settle's, meets the next fault until none is left.
    let done = common::eventually(
        "every opt-out in Action Network",
        std::time::Duration::from_secs(30),
        async || {
            app.settle().await;
            let view = view(&app, "action-network").await;
            (view["sent"] == total).then_some(view)
        },
    )
    .await;
    assert_eq!(done["state"], "active", "{done}");
    assert_eq!(sandbox.action_network_truth().requests.injected_faults, 4);
    // 429, 503 and the redirect were retried: followed, the redirect would have been
    // refused (a GET of the collection). A 200 of garbage is a success: its body is not read.
    let metrics = app.metrics.render(Default::default());
    let count = |outcome: &str| {
        let series = format!(
            "outreach_sync_destination_requests_total{{destination=\"action-network\",outcome=\"{outcome}\"}}"
        );
        common::series_value(&metrics, &series).map_or(0, |n| n.parse::<u64>().expect("a count"))
    };
    assert_eq!(count("failed"), 3, "{metrics}");
    assert_eq!(count("refused"), 0, "{metrics}");
    assert_eq!(count("sent") as usize, total, "{metrics}");
    let error = done["lastError"].as_str().unwrap_or_default();
    assert!(!error.contains(DEFAULT_ACTION_NETWORK_KEY));
    app.stop().await;
    sandbox.shutdown().await;
}

/// A `serve` configuration (for a child process) on `sandbox`'s service, writing to its VAN
/// with `key`; `extra` is added as it is (a section of the test's own).
fn process_config(sandbox: &RunningSandbox, key: &str, extra: &str) -> String {
    format!(
        r#"
[webhook]
secrets = ["{secret}"]
{extra}
[service]
base_url = "{service}"
client_id = "{client_id}"
client_secret = "{client_secret}"
requests_per_second = 1000
[[destination]]
name = "van-main"
kind = "van"
base_url = "{van}"
api_key = "{key}"
requests_per_second = 1000
"#,
        secret = crate::daemon_process::SECRET,
        service = sandbox.base_url(),
        client_id = sandbox.config().client_id,
        client_secret = sandbox.config().client_secret,
        van = sandbox.van_url(),
    )
}

/// SIGKILLs of `serve` while it writes to VAN, before a last run.
const KILLS: usize = 3;

/// VAN has no idempotency key: `serve` killed while writing to it, again and again, and
/// started again on the same database, writes every opt-out, and repeats at most the one
/// action in flight at each kill (an answered action is recorded before the next is sent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_writing_to_van_it_repeats_at_most_the_action_in_flight() {
    use crate::daemon_process::{Daemon, config_file, open_database};
    use std::time::Duration;

    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: LEADS,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    // Slow enough that a kill lands between entries or inside one.
    sandbox.fake_latency(Fake::Van, Duration::from_millis(40));
    let dir = tempfile::tempdir().expect("dir");
    // A killed leader's lease ends soon: the next run leads within two periods.
    let config = process_config(&sandbox, DEFAULT_VAN_KEY, "[replica]\nlease_secs = 2");
    std::fs::write(config_file(dir.path()), config).expect("config");
    // The first run's pass records the leads that start opted out.
    let reconcile = [(
        "OUTREACH_SYNC__RECONCILE__ON_START".to_owned(),
        "true".to_owned(),
    )];
    let canvassed = || sandbox.van_truth().canvass_responses.len();
    for run in 0..KILLS {
        let env = if run == 0 { &reconcile[..] } else { &[] };
        let mut daemon = Daemon::start(dir.path(), &format!("run-{run}"), env).await;
        let before = canvassed();
        // Another process: its progress is looked at in VAN, not signalled.
        let moved =
            common::within(Duration::from_secs(30), async || canvassed() >= before + 2).await;
        assert!(moved.is_some(), "run {run} wrote to VAN: {}", daemon.logs());
        daemon.kill();
    }
    let mut daemon = Daemon::start(dir.path(), "final", &[]).await;
    let pool = open_database(dir.path()).await;
    let count = |sql: &'static str| crate::daemon_process::count(&pool, sql);
    let opted_out = count("SELECT COUNT(*) FROM ledger WHERE opted_out").await;
    let finished = common::within(Duration::from_secs(60), async || {
        count("SELECT COUNT(*) FROM destination_outcomes WHERE outcome IS NOT NULL").await
            == opted_out
    })
    .await;
    assert!(
        finished.is_some(),
        "every opt-out has its outcome: {}",
        daemon.logs()
    );
    daemon.signal(libc::SIGTERM);
    let _ = daemon.exit_within(Duration::from_secs(10)).await;

    let truth = sandbox.van_truth();
    let sent = count("SELECT COUNT(*) FROM destination_outcomes WHERE outcome = 'sent'").await;
    assert!(sent > KILLS as i64 * 2, "the runs wrote: {sent}");
    let mut per_person = std::collections::HashMap::<u64, usize>::new();
    for response in &truth.canvass_responses {
        *per_person.entry(response.van_id).or_default() += 1;
    }
    assert_eq!(per_person.len() as i64, sent, "one person per entry sent");
    let repeated: usize = per_person.values().map(|n| n - 1).sum();
    assert!(
        repeated <= KILLS,
        "at most the action in flight at each of {KILLS} kills is repeated: {per_person:?}"
    );
    for person in truth
        .people
        .iter()
        .filter(|p| per_person.contains_key(&p.van_id))
    {
        assert!(
            person
                .phones
                .iter()
                .any(|p| p.phone_opt_in_status.as_deref() == Some("O")),
            "{person:?}"
        );
    }
    sandbox.shutdown().await;
}

/// `destinations check`: exit 1 naming what a committee lacks, the key never shown; exit 0
/// once it is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destinations_check_exits_1_naming_what_the_committee_lacks() {
    use crate::daemon_process::{command, config_file};

    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 20,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let dir = tempfile::tempdir().expect("dir");
    let config = format!(
        r#"
[webhook]
secrets = ["{secret}"]
[[destination]]
name = "van-main"
kind = "van"
base_url = "{van}"
api_key = "{van_key}"
[[destination]]
name = "action-network"
kind = "action_network"
base_url = "{an}"
api_key = "{an_key}"
"#,
        secret = crate::daemon_process::SECRET,
        van = sandbox.van_url(),
        van_key = DEFAULT_VAN_KEY,
        an = sandbox.action_network_url(),
        an_key = DEFAULT_ACTION_NETWORK_KEY,
    );
    std::fs::write(config_file(dir.path()), config).expect("config");
    let check = || {
        let mut command = command(dir.path(), &["destinations", "check"], &[]);
        async move {
            tokio::task::spawn_blocking(move || command.output().expect("runs"))
                .await
                .expect("joined")
        }
    };
    assert!(sandbox.van_set_sms_text(DEFAULT_VAN_KEY, false));
    let failing = check().await;
    let stdout = String::from_utf8_lossy(&failing.stdout);
    let stderr = String::from_utf8_lossy(&failing.stderr);
    assert_eq!(failing.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("van-main: FAILING: lookup: no contact type named \"SMS Text\""),
        "{stdout}"
    );
    assert!(stdout.contains("action-network: ok"), "{stdout}");
    for shown in [&stdout, &stderr] {
        assert!(!shown.contains(DEFAULT_VAN_KEY) && !shown.contains(DEFAULT_ACTION_NETWORK_KEY));
    }
    assert!(sandbox.van_set_sms_text(DEFAULT_VAN_KEY, true));
    let passing = check().await;
    assert_eq!(
        passing.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&passing.stdout)
    );
    sandbox.shutdown().await;
}

/// A key VAN refuses stops the destination with `error: credentials`; the right key put in
/// the file and reloaded (SIGHUP) sends everything that waited, with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_key_ends_the_credentials_error_and_everything_waiting_goes() {
    use crate::daemon_process::{Daemon, config_file};
    use std::time::Duration;

    const TOKEN: &str = "reload-destination-token-0123";
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 100,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let dir = tempfile::tempdir().expect("dir");
    let config = |key: &str| {
        process_config(
            &sandbox,
            key,
            &format!("[admin]\ntokens = [\"ops:{TOKEN}\"]"),
        )
    };
    std::fs::write(config_file(dir.path()), config("a-key-van-does-not-know")).expect("config");
    let reconcile = [(
        "OUTREACH_SYNC__RECONCILE__ON_START".to_owned(),
        "true".to_owned(),
    )];
    let mut daemon = Daemon::start(dir.path(), "reload", &reconcile).await;
    let http = reqwest::Client::new();
    let view = || async {
        let list: Value = http
            .get(daemon.admin_url("/v1/destinations"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("admin")
            .json()
            .await
            .expect("json");
        list["items"][0].clone()
    };
    // Another process: its state is looked at, not signalled.
    let stopped = common::within(Duration::from_secs(20), async || {
        let view = view().await;
        (view["state"] == "error").then_some(view)
    })
    .await
    .expect("stopped by its key");
    let error = stopped["lastError"].as_str().expect("an error");
    assert!(error.starts_with("credentials: "), "{error}");
    assert!(!error.contains("a-key-van-does-not-know"), "{error}");

    std::fs::write(config_file(dir.path()), config(DEFAULT_VAN_KEY)).expect("config");
    daemon.signal(libc::SIGHUP);
    let opted_out = sandbox
        .leads()
        .iter()
        .filter(|l| l.global_opted_out)
        .count();
    let written = common::within(Duration::from_secs(20), async || {
        let view = view().await;
        let done = view["sent"].as_u64().unwrap_or(0) + view["unmatched"].as_u64().unwrap_or(0);
        (view["state"] == "active" && done as usize == opted_out).then_some(view)
    })
    .await;
    assert!(written.is_some(), "{}\n{}", view().await, daemon.logs());
    assert!(
        !daemon.logs().contains(DEFAULT_VAN_KEY),
        "the key is never logged"
    );
    daemon.signal(libc::SIGTERM);
    let _ = daemon.exit_within(Duration::from_secs(10)).await;
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_only_the_leader_writes_to_van_and_each_opt_out_goes_once() {
    let Some((sandbox, app)) = campaign(Backend::Postgres).await else {
        return;
    };
    // The first daemon leads; the second, on the same database, stands by.
    let app = writing_to(app, vec![van(&sandbox)]).await;
    app.senders.started("van-main").await;
    let second = app.replica("second").await;
    app.settle().await;
    let view = view(&app, "van-main").await;
    let sent = view["sent"].as_u64().expect("sent");
    assert!(sent > 0, "{view}");
    let truth = sandbox.van_truth();
    assert_eq!(truth.canvass_responses.len() as u64, sent, "none repeated");
    let people: BTreeSet<u64> = truth.canvass_responses.iter().map(|r| r.van_id).collect();
    assert_eq!(people.len() as u64, sent, "one canvass response a person");
    let scraped =
        common::metrics_text(&app.http, format!("http://{}/metrics", second.admin_addr)).await;
    assert!(
        scraped.contains("# TYPE outreach_sync_destination_requests_total counter"),
        "{scraped}"
    );
    let standby_requests: u64 = scraped
        .lines()
        .filter(|l| l.starts_with("outreach_sync_destination_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(standby_requests, 0, "the standby wrote nothing: {scraped}");
    second.stop().await;
    app.stop().await;
    sandbox.shutdown().await;
}
