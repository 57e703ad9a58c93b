//! Destinations: every opt-out written into the campaign's systems of record, the sandbox's
//! VAN, Action Network and Mobile Commons, in their own APIs, with the outcome of each entry
//! kept.

use std::collections::BTreeSet;

use outreach_sync::model::OutcomeKind;
use outreach_sync::reconcile::{PassRequest, Reconciler};
use outreach_sync::sender::Attempt;
use outreach_sync::settings::kinds::mobile_commons::MobileCommonsSettings;
use outreach_sync::settings::{DestinationSettings, Settings, SystemSettings};
use outreach_sync::store::DestinationStore as _;
use outreach_sync_sandbox::destinations::{Fake, FakeFault};
use outreach_sync_sandbox::{
    DEFAULT_ACTION_NETWORK_KEY, DEFAULT_MOBILE_COMMONS_PASSWORD, DEFAULT_MOBILE_COMMONS_USERNAME,
    DEFAULT_VAN_KEY, RunningSandbox, Sandbox, SandboxConfig,
};
use secrecy::SecretString;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::common::{self, Backend, TestApp, on_both_backends, spawn_app_on, with_admin_token};

mod faults;
mod mobile_commons;
pub(crate) mod once;
mod process;

/// Leads in the sandbox: about 5% start opted out, and about 90% have a VAN ID.
const LEADS: usize = 300;

pub(crate) fn van(sandbox: &RunningSandbox) -> DestinationSettings {
    let mut van = DestinationSettings::new(
        "van-main",
        SystemSettings::Van(Default::default()),
        &sandbox.van_url(),
        DEFAULT_VAN_KEY,
    );
    van.requests_per_second = Some(1_000);
    van
}

pub(crate) fn action_network(sandbox: &RunningSandbox) -> DestinationSettings {
    let mut an = DestinationSettings::new(
        "action-network",
        SystemSettings::ActionNetwork(Default::default()),
        &sandbox.action_network_url(),
        DEFAULT_ACTION_NETWORK_KEY,
    );
    an.requests_per_second = Some(1_000);
    an
}

/// The sandbox's Mobile Commons as destination `mc-dest`, with the login its source reads
/// with.
pub(crate) fn mobile_commons(sandbox: &RunningSandbox) -> DestinationSettings {
    let mut mc = DestinationSettings::new(
        "mc-dest",
        SystemSettings::MobileCommons(MobileCommonsSettings {
            username: DEFAULT_MOBILE_COMMONS_USERNAME.to_owned(),
            ..MobileCommonsSettings::default()
        }),
        &sandbox.mobile_commons_url(),
        DEFAULT_MOBILE_COMMONS_PASSWORD,
    );
    mc.requests_per_second = Some(1_000);
    mc
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
    campaign_of(
        backend,
        SandboxConfig {
            leads: LEADS,
            organizations: 1,
            ..SandboxConfig::default()
        },
    )
    .await
}

/// [`campaign`] on a sandbox of `config`.
pub(crate) async fn campaign_of(
    backend: Backend,
    config: SandboxConfig,
) -> Option<(RunningSandbox, TestApp)> {
    let sandbox = Sandbox::spawn(config).await.expect("sandbox");
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

/// `destinations check` of every destination of `app`: each key works and each lookup
/// finds what it needs.
pub(crate) async fn check_finds_nothing_wrong(app: &TestApp) {
    let http = outreach_sync::sender::http_client().expect("client");
    let checked =
        outreach_sync::sender::destinations::check(&app.settings.destination, None, &http)
            .await
            .expect("checked");
    assert!(checked.iter().all(|c| c.problem.is_none()), "{checked:?}");
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

/// VAN has a canvass response with its committee's own ids, and the phone's status `O`, for
/// each opt-out `matched` to a VAN ID (`ids`), once.
fn van_was_told(
    sandbox: &RunningSandbox,
    ids: &std::collections::HashMap<String, u64>,
    matched: &[&(i64, Option<String>, String)],
) {
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
    for (_, lead, phone) in matched {
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
    check_finds_nothing_wrong(&app).await;
    app.settle().await;
    let opt_outs = opt_outs(&app).await;
    assert!(opt_outs.len() >= 5, "the sandbox starts some opted out");
    let ids = van_ids(&sandbox);
    let (matched, unmatched): (Vec<_>, Vec<_>) = opt_outs
        .iter()
        .partition(|(_, lead, _)| lead.as_ref().is_some_and(|l| ids.contains_key(l)));
    assert!(!matched.is_empty() && !unmatched.is_empty(), "{ids:?}");

    // VAN: a canvass response with this committee's own ids, and the phone's status O.
    van_was_told(&sandbox, &ids, &matched);

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
