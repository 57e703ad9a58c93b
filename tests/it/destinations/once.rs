//! Each person's opt-out told once: an entry that does not change what a destination was
//! last told of the person (the service's echo, an organization's entry beside an
//! account-wide one) sends nothing and is honoured when the entry that told it was; an
//! account-wide opt-out reaches VAN through its lead's entry; a request VAN acts on but
//! answers too late is sent once more at most.

use std::time::Duration;

use outreach_sync::sender::Attempt;
use outreach_sync_sandbox::RunningSandbox;
use outreach_sync_sandbox::destinations::{Fake, FakeFault};
use outreach_sync_sandbox::wire::{Lead, WebhookConfig};
use serde_json::{Value, json};

use super::{action_network, campaign, van, van_ids, writing_to};
use crate::common::{self, ADMIN_TOKEN, Backend, TestApp, eventually, on_both_backends};

/// Longest wait for what the daemon does by itself (the pusher's requests).
const WAIT: Duration = Duration::from_secs(30);

/// A lead of the sandbox that is not opted out and has a person in its VAN, with that
/// person's VAN ID.
pub(crate) fn opted_in_with_van_id(sandbox: &RunningSandbox) -> (Lead, u64) {
    let ids = van_ids(sandbox);
    sandbox
        .leads()
        .into_iter()
        .filter(|l| !l.global_opted_out)
        .find_map(|l| Some((ids.get(&l.id).copied()?, l)))
        .map(|(id, lead)| (lead, id))
        .expect("an opted-in lead with a VAN ID")
}

/// What VAN and Action Network were sent about one person: (canvass responses, phone
/// updates at VAN, POSTs of the number at Action Network).
pub(crate) fn writes_of(
    sandbox: &RunningSandbox,
    van_id: u64,
    phone: &str,
) -> (usize, usize, usize) {
    let van = sandbox.van_truth();
    let canvassed = van
        .canvass_responses
        .iter()
        .filter(|r| r.van_id == van_id)
        .count();
    let person = format!("/van/v4/people/{van_id}");
    let phone_updates = van
        .requests
        .recent
        .iter()
        .filter(|r| r.method == "POST" && r.path == person)
        .count();
    let number = phone.trim_start_matches('+');
    let posted = sandbox
        .action_network_truth()
        .signups
        .iter()
        .filter(|s| s.phone_numbers.iter().any(|n| n.number == number))
        .count();
    (canvassed, phone_updates, posted)
}

/// The outcomes `name` shows for `state`.
pub(crate) async fn outcomes(app: &TestApp, name: &str, state: &str) -> Vec<Value> {
    let listed: Value = app
        .admin_get(&format!("/v1/destinations/{name}/outcomes?state={state}"))
        .await
        .json()
        .await
        .expect("json");
    listed["items"].as_array().expect("items").clone()
}

/// Records a local opt-out of `lead`'s number in its organization; returns its seq.
async fn opt_out(app: &TestApp, lead: &Lead) -> i64 {
    opt_out_in(app, &lead.phone_number, &lead.organization_id).await
}

/// Records a local opt-out of `phone` in `organization`; returns its seq.
pub(crate) async fn opt_out_in(app: &TestApp, phone: &str, organization: &str) -> i64 {
    let change = json!({"phoneNumber": phone, "organizationId": organization, "optedOut": true});
    let response = app.admin_post("/v1/consent", &change).await;
    assert_eq!(response.status(), 202);
    let recorded: Value = response.json().await.expect("json");
    recorded["seq"].as_i64().expect("seq")
}

on_both_backends!(
    an_opt_out_and_the_services_echo_of_it_are_written_once,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn an_opt_out_and_the_services_echo_of_it_are_written_once(backend: Backend) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    let app = writing_to(app, vec![van(&sandbox), action_network(&sandbox)]).await;
    app.settle().await;
    let (lead, van_id) = opted_in_with_van_id(&sandbox);
    sandbox
        .register_webhook(
            &app.url(&app.settings.ingest.path),
            common::SECRET,
            WebhookConfig::all_consent(),
        )
        .expect("registration");
    let seq = opt_out(&app, &lead).await;
    // The daemon's pusher sends it to the service, whose webhook comes back: the echo.
    let echo = format!(
        "SELECT seq FROM ledger WHERE phone_number = '{}' AND source = 'webhook' AND seq > {seq}",
        lead.phone_number
    );
    let echo = common::eventually("the service's echo", Duration::from_secs(30), async || {
        app.drain().await;
        let rows: Vec<(i64,)> = app.rows(&echo).await;
        rows.first().map(|(seq,)| *seq)
    })
    .await;
    app.settle().await;

    assert_eq!(
        writes_of(&sandbox, van_id, &lead.phone_number),
        (1, 1, 1),
        "one canvass response and one phone update at VAN, one POST at Action Network"
    );
    // The echo sent nothing, and says which entry told the destination.
    for name in ["van-main", "action-network"] {
        let already = outcomes(&app, name, "already").await;
        let item = already
            .iter()
            .find(|o| o["seq"] == echo)
            .unwrap_or_else(|| panic!("{name}: the echo is `already`: {already:?}"));
        assert_eq!(item["follows"], seq, "{item}");
        let sent = outcomes(&app, name, "sent").await;
        let told = sent
            .iter()
            .find(|o| o["seq"] == seq)
            .expect("the opt-out was sent");
        assert_eq!(item["at"], told["at"], "honoured when that one was: {item}");
    }
    let metrics = app.metrics.render(Default::default());
    assert!(
        metrics.contains(
            "outreach_sync_destination_requests_total{destination=\"van-main\",outcome=\"already\"} 1"
        ),
        "{metrics}"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_request_van_acts_on_but_answers_after_the_timeout_is_sent_once_more_at_most,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_request_van_acts_on_but_answers_after_the_timeout_is_sent_once_more_at_most(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    let mut slow = van(&sandbox);
    slow.timeout_secs = 1;
    slow.feed.max_backoff_secs = 1;
    let app = writing_to(app, vec![slow]).await;
    app.settle().await;
    let (lead, van_id) = opted_in_with_van_id(&sandbox);
    // VAN keeps what the next two requests write, and answers each after the daemon gave
    // up waiting.
    sandbox.fake_fail_next(Fake::Van, 2, FakeFault::Late { after_ms: 2_500 });
    let seq = opt_out(&app, &lead).await;
    app.drain().await;
    // The sender's own first attempt (at once, on the new entry) or this one's.
    let mut attempts = Vec::new();
    loop {
        let attempt = app.senders.try_now("van-main").await.expect("an attempt");
        attempts.push(attempt.clone());
        if attempt == Attempt::Idle {
            break;
        }
        assert!(attempts.len() < 6, "{attempts:?}");
    }
    let (canvassed, phone_updates, _) = writes_of(&sandbox, van_id, &lead.phone_number);
    assert_eq!(canvassed, 2, "sent once more, never a third time");
    assert_eq!(phone_updates, 1);
    let unconfirmed = outcomes(&app, "van-main", "unconfirmed").await;
    let item = unconfirmed
        .iter()
        .find(|o| o["seq"] == seq)
        .unwrap_or_else(|| panic!("unconfirmed: {unconfirmed:?}"));
    let reason = item["reason"].as_str().expect("a reason");
    assert!(reason.contains("canvass_result: sent twice"), "{reason}");
    let metrics = app.metrics.render(Default::default());
    assert!(
        metrics.contains(
            "outreach_sync_destination_requests_total{destination=\"van-main\",outcome=\"repeated\"} 1"
        ),
        "{metrics}"
    );
    // Nothing more goes, however often it is tried.
    assert_eq!(
        app.senders.try_now("van-main").await.expect("an attempt"),
        Attempt::Idle
    );
    assert_eq!(writes_of(&sandbox, van_id, &lead.phone_number).0, 2);
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    an_account_wide_import_reaches_van_through_its_lead_and_nothing_is_unreachable,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn an_account_wide_import_reaches_van_through_its_lead_and_nothing_is_unreachable(
    backend: Backend,
) {
    let Some((sandbox, app)) = campaign(backend).await else {
        return;
    };
    let app = writing_to(app, vec![van(&sandbox), action_network(&sandbox)]).await;
    app.settle().await;
    let (lead, van_id) = opted_in_with_van_id(&sandbox);
    let response = app
        .http
        .post(app.admin_url("/v1/consent/import?account=true"))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "text/csv")
        .body(format!("phone\n{}\n", lead.phone_number))
        .send()
        .await
        .expect("import");
    assert_eq!(response.status(), 200);
    app.settle().await;

    assert_eq!(
        writes_of(&sandbox, van_id, &lead.phone_number),
        (1, 1, 1),
        "VAN wrote the lead's person once; Action Network took the number once"
    );
    // The service has the opt-out once the pusher's request for the lead's entry is answered:
    // the pusher is not a sender, so `settle` does not wait for it.
    let items: Vec<Value> = eventually("both items honoured", WAIT, async || {
        let report: Value = app
            .admin_get("/v1/compliance")
            .await
            .json()
            .await
            .expect("json");
        let items: Vec<Value> = report["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter(|i| i["phoneNumber"] == lead.phone_number.as_str())
            .cloned()
            .collect();
        (items.len() == 2 && items.iter().all(|i| i["state"] == "honoured")).then_some(items)
    })
    .await;
    let items: Vec<&Value> = items.iter().collect();
    let orgs: Vec<&str> = items
        .iter()
        .map(|i| i["organizationId"].as_str().expect("org"))
        .collect();
    assert_eq!(orgs, ["*", lead.organization_id.as_str()], "{items:?}");
    for item in &items {
        assert_eq!(item["state"], "honoured", "{item}");
    }
    let van_of = |item: &Value| {
        item["destinations"]
            .as_array()
            .expect("destinations")
            .iter()
            .find(|d| d["name"] == "van-main")
            .cloned()
            .expect("VAN is one of its destinations")
    };
    let (account_wide, of_lead) = (van_of(items[0]), van_of(items[1]));
    assert_eq!(account_wide["outcome"], "through_leads", "{account_wide}");
    assert_eq!(
        account_wide["honouredAt"], of_lead["honouredAt"],
        "had when its lead's entry was"
    );
    app.stop().await;
    sandbox.shutdown().await;
}
