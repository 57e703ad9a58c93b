//! The compliance report as a compliance officer reads it: every opt-out against its
//! deadline, the service, each subscriber and each system of record as destinations, and
//! the messages sent after one.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use outreach_sync::compliance::{self, Blocking, Items, Listing, Rules, Window};
use outreach_sync::model::{OutcomeKind, Timestamp};
use outreach_sync::settings::{DestinationSettings, Settings, SubscriberSettings, SystemSettings};
use outreach_sync::store::DestinationStore as _;
use serde_json::{Value, json};

use crate::common::{
    Backend, TestApp, eventually, on_both_backends, spawn_app_on, with_admin_token,
};
use crate::receiver::{Receiver, SUBSCRIBER_SECRET};

fn subscribe(settings: &mut Settings, url: &str) {
    with_admin_token(settings);
    settings
        .subscriber
        .push(SubscriberSettings::new("crm", url, SUBSCRIBER_SECRET));
}

/// The service's opt-out of `lead`, with the whole Lead resource as it sends it.
fn opt_out(lead: &str, phone: &str, at: DateTime<Utc>) -> String {
    json!({"type": "consentUpdate-v1", "id": format!("evt_{lead}"), "createdAt": at.to_rfc3339(),
           "data": {"id": lead, "organizationId": "org_1", "phoneNumber": phone,
                    "activeGroupIds": [], "inactiveGroupIds": [], "customFields": {},
                    "tagIds": [], "globalOptedOut": true}})
    .to_string()
}

/// The service's opt-out of `lead` as a consent subset (no whole Lead resource): the ledger
/// has the lead's id, the mirror does not have the lead.
fn opt_out_subset(lead: &str, phone: &str, at: DateTime<Utc>) -> String {
    json!({"type": "consentUpdate-v1", "id": format!("evt_{lead}"), "createdAt": at.to_rfc3339(),
           "data": {"id": lead, "organizationId": "org_1", "phoneNumber": phone,
                    "globalOptedOut": true}})
    .to_string()
}

fn message(id: &str, lead: &str, at: DateTime<Utc>) -> String {
    json!({"type": "messageStatus-v1", "id": format!("evt_{id}"), "createdAt": at.to_rfc3339(),
           "data": {"id": id, "threadId": "t1", "status": "delivered", "type": "text",
                    "createdAt": at.to_rfc3339(), "errorCode": null, "leadId": lead,
                    "organizationId": "org_1"}})
    .to_string()
}

/// The value of `series` in the daemon's `/metrics`, as a number.
async fn metric(app: &TestApp, series: &str) -> f64 {
    let text = crate::common::metrics_text(&app.http, app.admin_url("/metrics")).await;
    crate::common::series_value(&text, series)
        .unwrap_or_else(|| panic!("no {series} in {text}"))
        .parse()
        .expect("a number")
}

async fn report(app: &TestApp) -> Value {
    let response = app.admin_get("/v1/compliance").await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("JSON")
}

on_both_backends!(
    an_opt_out_is_pending_until_a_stopped_subscriber_has_it_and_messages_after_it_are_listed
);
async fn an_opt_out_is_pending_until_a_stopped_subscriber_has_it_and_messages_after_it_are_listed(
    backend: Backend,
) {
    // The subscriber's tool is down.
    let receiver = Receiver::start([]).await;
    let url = receiver.url();
    let addr: std::net::SocketAddr = url
        .trim_start_matches("http://")
        .trim_end_matches("/hooks")
        .parse()
        .expect("the receiver's address");
    receiver.stop();
    drop(receiver);
    let Some(app) = spawn_app_on(backend, |s| subscribe(s, &url)).await else {
        return;
    };
    let opted_out_at = Utc::now() - TimeDelta::hours(2);
    let sent_after = "outreach_sync_messages_after_optout_total";
    let counted_before = metric(&app, sent_after).await;
    assert_eq!(
        app.post_signed(&opt_out("lead_1", "+15550001001", opted_out_at))
            .await
            .status(),
        200
    );
    app.drain().await;
    for body in [
        message("m_confirm", "lead_1", opted_out_at + TimeDelta::minutes(2)),
        message("m_after", "lead_1", opted_out_at + TimeDelta::hours(1)),
        message("m_before", "lead_1", opted_out_at - TimeDelta::hours(1)),
    ] {
        assert_eq!(app.post_signed(&body).await.status(), 200);
    }
    app.settle().await;

    let pending = report(&app).await;
    assert_eq!(pending["deadlineBusinessDays"], 10);
    assert_eq!(pending["totals"]["optOuts"], 1, "{pending}");
    assert_eq!(pending["totals"]["pending"], 1, "{pending}");
    let item = &pending["items"][0];
    assert_eq!(item["state"], "pending");
    assert_eq!(item["honouredAt"], Value::Null);
    let destinations = item["destinations"].as_array().expect("destinations");
    assert_eq!(destinations.len(), 2, "{item}");
    assert_eq!(destinations[0]["name"], "service");
    // The service announced it: it had it at the event's own time.
    let occurred = item["occurredAt"].as_str().expect("occurredAt");
    assert_eq!(destinations[0]["honouredAt"], occurred);
    assert_eq!(destinations[1], json!({"name": "crm", "honouredAt": null}));
    assert_eq!(item["confirmation"]["id"], "m_confirm", "{item}");
    let after: Vec<&str> = item["sentAfterOptOut"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["id"].as_str().expect("id"))
        .collect();
    assert_eq!(after, ["m_after"]);
    assert_eq!(pending["totals"]["sentAfterOptOut"], 1);
    // Told at once: the subscriber's oldest opt-out not had is two hours old; the service
    // has them all; the message after the opt-out was counted as it arrived.
    let crm_behind = metric(
        &app,
        r#"outreach_sync_optout_oldest_pending_seconds{destination="crm"}"#,
    )
    .await;
    assert!((7000.0..8000.0).contains(&crm_behind), "{crm_behind}");
    let service_behind = metric(
        &app,
        r#"outreach_sync_optout_oldest_pending_seconds{destination="service"}"#,
    )
    .await;
    assert_eq!(service_behind, 0.0);
    assert_eq!(metric(&app, "outreach_sync_optouts_overdue").await, 0.0);
    assert!(metric(&app, sent_after).await >= counted_before + 1.0);

    // The tool is back: the next request carries the opt-out.
    let _back = Receiver::start_on(addr, []).await;
    app.settle().await;
    let honoured = report(&app).await;
    let crm_behind = metric(
        &app,
        r#"outreach_sync_optout_oldest_pending_seconds{destination="crm"}"#,
    )
    .await;
    assert_eq!(crm_behind, 0.0, "the subscriber has had it");
    let item = &honoured["items"][0];
    assert_eq!(item["state"], "honoured", "{item}");
    let had = item["destinations"][1]["honouredAt"]
        .as_str()
        .expect("crm had it");
    assert_eq!(item["honouredAt"], had, "the slowest destination");
    let crm = &honoured["destinations"][1];
    assert_eq!(
        (&crm["name"], &crm["honoured"], &crm["pending"]),
        (&json!("crm"), &json!(1), &json!(0))
    );
    assert!(crm["maxSecs"].as_f64().expect("seconds") >= 7000.0, "{crm}");
    app.stop().await;
}

on_both_backends!(an_opt_out_past_its_deadline_and_not_everywhere_is_overdue);
async fn an_opt_out_past_its_deadline_and_not_everywhere_is_overdue(backend: Backend) {
    // A subscriber whose tool never answers.
    let receiver = Receiver::start([]).await;
    let url = receiver.url();
    receiver.stop();
    let Some(app) = spawn_app_on(backend, |s| subscribe(s, &url)).await else {
        return;
    };
    // Three weeks ago: more than 10 business days whatever the holidays.
    let long_ago = Utc::now() - TimeDelta::days(21);
    assert_eq!(
        app.post_signed(&opt_out("lead_9", "+15550001009", long_ago))
            .await
            .status(),
        200
    );
    app.drain().await;
    let overdue = report(&app).await;
    assert_eq!(overdue["items"][0]["state"], "overdue", "{overdue}");
    assert_eq!(overdue["totals"]["overdue"], 1);
    assert_eq!(metric(&app, "outreach_sync_optouts_overdue").await, 1.0);
    // The window: an opt-out before it is not in the report.
    let since = (Utc::now() - TimeDelta::days(7))
        .format("%Y-%m-%d")
        .to_string();
    let recent: Value = app
        .admin_get(&format!("/v1/compliance?since={since}"))
        .await
        .json()
        .await
        .expect("JSON");
    assert_eq!(recent["totals"]["optOuts"], 0, "{recent}");
    let refused = app.admin_get("/v1/compliance?since=yesterday").await;
    assert_eq!(refused.status(), 400);
    // A window to the end of time holds it too (SQLite keeps times as text, where a year
    // past 9999 sorts before every other).
    let to_the_end: Value = app
        .admin_get("/v1/compliance?since=2000-01-01&until=9999-12-31")
        .await
        .json()
        .await
        .expect("JSON");
    assert_eq!(to_the_end["totals"]["optOuts"], 1, "{to_the_end}");
    app.stop().await;
}

on_both_backends!(the_report_prints_as_csv_and_as_one_self_contained_html_file);
async fn the_report_prints_as_csv_and_as_one_self_contained_html_file(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    let at = Utc::now() - TimeDelta::hours(1);
    assert_eq!(
        app.post_signed(&opt_out("lead_7", "+15550001007", at))
            .await
            .status(),
        200
    );
    app.drain().await;
    let dir = app.dir.path();
    let config = dir.join("report.toml");
    std::fs::write(&config, "").expect("config");
    let run = |format: &str| {
        let out = dir.join(format!("report.{format}"));
        let status = std::process::Command::new(crate::daemon_process::BIN)
            .arg("--config")
            .arg(&config)
            .args(["report", "compliance", "--format", format, "--output"])
            .arg(&out)
            .env("OUTREACH_SYNC__DATABASE__URL", &app.settings.database.url)
            .status()
            .expect("the binary runs");
        assert!(status.success(), "report --format {format}");
        std::fs::read_to_string(out).expect("the report")
    };
    let csv = run("csv");
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some(
            "seq,phoneNumber,organizationId,leadId,occurredAt,source,state,deadline,honouredAt,honouredAt:service,confirmation,sentAfterOptOut,accountId,readBy,seenAt"
        )
    );
    let row = lines.next().expect("the opt-out");
    assert!(row.starts_with("1,+15550001007,org_1,lead_7,"), "{row}");
    assert!(row.contains(",webhook,honoured,"), "{row}");
    let html = run("html");
    assert!(html.starts_with("<!doctype html>"));
    assert!(
        html.contains("<svg") && html.contains("id=\"totals\""),
        "{html}"
    );
    assert!(html.contains("None: every opt-out was had everywhere by its deadline."));
    for outside in ["<script", "src=", "<link", "http://", "https://"] {
        assert!(!html.contains(outside), "the file holds {outside}");
    }
    let json: Value = serde_json::from_str(&run("json")).expect("JSON");
    assert_eq!(json["totals"]["honoured"], 1);
    app.stop().await;
}

on_both_backends!(
    a_message_after_an_opt_out_is_counted_as_the_report_lists_it_before_any_reconciliation
);
async fn a_message_after_an_opt_out_is_counted_as_the_report_lists_it_before_any_reconciliation(
    backend: Backend,
) {
    // Never reconciled: the mirror holds no lead, only what the webhooks bring.
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    let sent_after = "outreach_sync_messages_after_optout_total";
    let opted_out_at = Utc::now() - TimeDelta::hours(3);
    let subset = opt_out_subset("lead_7", "+15550001007", opted_out_at);
    assert_eq!(app.post_signed(&subset).await.status(), 200);
    app.drain().await;

    // The counter is the process's, and other tests' daemons may add to it while this one
    // runs: it is read as rising, not to an exact value (a registry per daemon will make
    // it exact).
    let before = metric(&app, sent_after).await;
    // Within the confirmation window: the confirmation.
    let confirm = message("m7_confirm", "lead_7", opted_out_at + TimeDelta::minutes(2));
    assert_eq!(app.post_signed(&confirm).await.status(), 200);
    app.drain().await;

    // An hour after the opt-out: listed, and counted.
    let late = message("m7_after", "lead_7", opted_out_at + TimeDelta::hours(1));
    assert_eq!(app.post_signed(&late).await.status(), 200);
    app.drain().await;
    assert!(metric(&app, sent_after).await >= before + 1.0);
    let listed = report(&app).await;
    let item = &listed["items"][0];
    assert_eq!(item["confirmation"]["id"], "m7_confirm", "{listed}");
    let after: Vec<&str> = item["sentAfterOptOut"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["id"].as_str().expect("id"))
        .collect();
    assert_eq!(after, ["m7_after"], "{listed}");
    assert_eq!(listed["totals"]["sentAfterOptOut"], 1);

    // Its next status is the same message: not counted again.
    assert_eq!(
        app.post_signed(&late.replace("evt_m7_after", "evt_m7_again"))
            .await
            .status(),
        200
    );
    app.drain().await;
    assert_eq!(report(&app).await["totals"]["sentAfterOptOut"], 1);
    app.stop().await;
}

/// The report's rules with two systems of record beside the service: VAN and Action
/// Network. Built here rather than configured in the daemon, so that no sender writes an
/// outcome of its own: the test records them.
fn rules_with_destinations(settings: &Settings) -> Arc<Rules> {
    let mut settings = settings.clone();
    // Never reached: the report only reads the outcomes recorded.
    let nowhere = "http://127.0.0.1:9";
    settings.destination = vec![
        DestinationSettings::new(
            "van-main",
            SystemSettings::Van(Default::default()),
            nowhere,
            "van-key",
        ),
        DestinationSettings::new(
            "action-network",
            SystemSettings::ActionNetwork(Default::default()),
            nowhere,
            "an-key",
        ),
    ];
    Arc::new(Rules::of(&settings).expect("the rules"))
}

/// The report of the last 30 days in `form`, written as the CLI and the admin API write it.
async fn written(app: &TestApp, rules: &Arc<Rules>, form: Listing) -> String {
    let now = Utc::now();
    let window = Window::parse(None, None, None, &rules.calendar, now).expect("the window");
    let items = Items::new(app.pool.clone(), rules.clone(), window.clone(), now);
    let mut sink = Blocking(Vec::new());
    compliance::write(items, rules, &window, form, &mut sink)
        .await
        .expect("the report");
    String::from_utf8(sink.0).expect("UTF-8")
}

on_both_backends!(
    a_system_of_record_honours_an_opt_out_when_sent_and_one_it_cannot_find_is_unreachable
);
async fn a_system_of_record_honours_an_opt_out_when_sent_and_one_it_cannot_find_is_unreachable(
    backend: Backend,
) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    // Whole seconds: the times come back as they were recorded, on either backend.
    let at = DateTime::from_timestamp(Utc::now().timestamp() - 3 * 3600, 0).expect("a time");
    for (lead, phone, minutes) in [
        ("lead_21", "+15550002001", 0),
        ("lead_22", "+15550002002", 1),
        ("lead_23", "+15550002003", 2),
    ] {
        let body = opt_out(lead, phone, at + TimeDelta::minutes(minutes));
        assert_eq!(app.post_signed(&body).await.status(), 200);
        // One at a time: their seqs in this order on either backend.
        app.drain().await;
    }
    let rules = rules_with_destinations(&app.settings);
    let seqs: Vec<i64> = serde_json::from_str::<Value>(&written(&app, &rules, Listing::Json).await)
        .expect("JSON")["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| item["seq"].as_i64().expect("seq"))
        .collect();
    assert_eq!(seqs.len(), 3, "{seqs:?}");
    let time = |minutes| Timestamp(at + TimeDelta::minutes(minutes));
    let record = async |name: &str, seq, outcome, reason: Option<&str>, when| {
        let ending = outreach_sync::model::Ending {
            outcome,
            reason,
            follows: None,
            told: None,
        };
        app.pool
            .record_ending(name, seq, 3, ending, when)
            .await
            .expect("the outcome");
    };
    // The first: both systems of record had it, Action Network last.
    record("van-main", seqs[0], OutcomeKind::Sent, None, time(10)).await;
    record("action-network", seqs[0], OutcomeKind::Sent, None, time(20)).await;
    // The second: Action Network had it, VAN has no one to write it to.
    let no_van_id = "the lead has no VAN ID (custom field VanID)";
    record(
        "van-main",
        seqs[1],
        OutcomeKind::Unmatched,
        Some(no_van_id),
        time(11),
    )
    .await;
    record("action-network", seqs[1], OutcomeKind::Sent, None, time(21)).await;
    // The third: VAN refused it; Action Network has not had it yet.
    let refused = "=Person 101 not found";
    record(
        "van-main",
        seqs[2],
        OutcomeKind::Refused,
        Some(refused),
        time(12),
    )
    .await;

    let report: Value =
        serde_json::from_str(&written(&app, &rules, Listing::Json).await).expect("JSON");
    let totals = &report["totals"];
    assert_eq!(
        (
            &totals["optOuts"],
            &totals["honoured"],
            &totals["unreachable"],
            &totals["pending"],
            &totals["overdue"]
        ),
        (&json!(3), &json!(1), &json!(1), &json!(1), &json!(0)),
        "{report}"
    );
    let items = report["items"].as_array().expect("items");
    let honoured = &items[0];
    assert_eq!(honoured["state"], "honoured", "{honoured}");
    let slowest = time(20).to_string();
    assert_eq!(
        honoured["honouredAt"],
        slowest.as_str(),
        "the slowest destination"
    );
    assert_eq!(
        honoured["destinations"][1],
        json!({"name": "van-main", "honouredAt": time(10).to_string()})
    );
    assert_eq!(
        honoured["destinations"][2],
        json!({"name": "action-network", "honouredAt": slowest})
    );

    let unreachable = &items[1];
    assert_eq!(unreachable["state"], "unreachable", "{unreachable}");
    assert_eq!(unreachable["honouredAt"], Value::Null);
    assert_eq!(
        unreachable["destinations"][1],
        json!({"name": "van-main", "honouredAt": null, "outcome": "unmatched",
               "reason": no_van_id})
    );
    // Refused where another destination has not had it yet: still waiting, not unreachable.
    let waiting = &items[2];
    assert_eq!(waiting["state"], "pending", "{waiting}");
    assert_eq!(waiting["destinations"][1]["outcome"], "refused");
    assert_eq!(waiting["destinations"][2]["honouredAt"], Value::Null);

    let summaries = report["destinations"].as_array().expect("destinations");
    let van = summaries
        .iter()
        .find(|d| d["name"] == "van-main")
        .expect("van-main summed up");
    assert_eq!(
        (&van["honoured"], &van["pending"], &van["unreachable"]),
        (&json!(1), &json!(0), &json!(2)),
        "{van}"
    );
    let network = summaries
        .iter()
        .find(|d| d["name"] == "action-network")
        .expect("action-network summed up");
    assert_eq!(
        (
            &network["honoured"],
            &network["pending"],
            &network["unreachable"]
        ),
        (&json!(2), &json!(1), &json!(0)),
        "{network}"
    );

    let csv = written(&app, &rules, Listing::Csv).await;
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some(
            "seq,phoneNumber,organizationId,leadId,occurredAt,source,state,deadline,honouredAt,\
             honouredAt:service,honouredAt:van-main,honouredAt:action-network,\
             outcome:van-main,reason:van-main,outcome:action-network,reason:action-network,\
             confirmation,sentAfterOptOut,accountId,readBy,seenAt"
        )
    );
    let rows: Vec<&str> = lines.collect();
    assert!(rows[0].contains(",honoured,"), "{}", rows[0]);
    assert!(
        rows[0].contains(",sent,,sent,,,,default,,"),
        "both had the first: {}",
        rows[0]
    );
    assert!(rows[1].contains(",unreachable,"), "{}", rows[1]);
    assert!(
        rows[1].contains(&format!(",unmatched,{no_van_id},sent,,")),
        "the reason beside the outcome: {}",
        rows[1]
    );
    // The system's own words, kept from a spreadsheet's formulas.
    assert!(
        rows[2].contains(",refused,'=Person 101 not found,,,"),
        "{}",
        rows[2]
    );

    // The command line's text: the total, and a section of its own with the reason.
    let config = app.dir.path().join("destinations.toml");
    std::fs::write(
        &config,
        "[[destination]]\nname = \"van-main\"\nkind = \"van\"\n\
         base_url = \"http://127.0.0.1:9\"\napi_key = \"van-key\"\n\n\
         [[destination]]\nname = \"action-network\"\nkind = \"action_network\"\n\
         base_url = \"http://127.0.0.1:9\"\napi_key = \"an-key\"\n",
    )
    .expect("config");
    let output = std::process::Command::new(crate::daemon_process::BIN)
        .arg("--config")
        .arg(&config)
        .args(["report", "compliance"])
        .env("OUTREACH_SYNC__DATABASE__URL", &app.settings.database.url)
        .output()
        .expect("the binary runs");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(
        text.contains("1 pending, 0 overdue, 1 unreachable;"),
        "{text}"
    );
    let section = text
        .split("Unreachable in a system of record")
        .nth(1)
        .expect("a section of unreachable opt-outs");
    assert!(
        section.contains("+15550002002 in org_1")
            && section.contains(&format!("van-main unmatched: {no_van_id}")),
        "{text}"
    );

    // The printable file lists it in a section of its own, with its reason.
    let now = Utc::now();
    let window = Window::parse(None, None, None, &rules.calendar, now).expect("the window");
    let items = Items::new(app.pool.clone(), rules.clone(), window.clone(), now);
    let summary = compliance::summarize(items, &rules, &window)
        .await
        .expect("the summary");
    assert_eq!(summary.unreachable_total, 1);
    assert_eq!(summary.late_total, 1, "the pending one alone is waiting");
    let html = compliance::html(&compliance::View::of(&summary, &rules, now)).expect("HTML");
    let section = html
        .split("id=\"unreachable\"")
        .nth(1)
        .expect("a section of unreachable opt-outs");
    assert!(
        section.contains("+15550002002") && section.contains(no_van_id),
        "{section}"
    );
    app.stop().await;
}

/// A system of record's API that refuses every key.
async fn refusing_every_key() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = axum::Router::new().fallback(|| async {
        (
            axum::http::StatusCode::UNAUTHORIZED,
            axum::Json(json!({"errors": [{"code": "INVALID_KEY", "text": "Unauthorized"}]})),
        )
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v4")
}

on_both_backends!(a_destination_stopped_in_error_is_behind_on_its_opt_outs_in_the_gauges);
async fn a_destination_stopped_in_error_is_behind_on_its_opt_outs_in_the_gauges(backend: Backend) {
    let base_url = refusing_every_key().await;
    let Some(app) = spawn_app_on(backend, |s| {
        with_admin_token(s);
        s.destination = vec![DestinationSettings::new(
            "van-main",
            SystemSettings::Van(Default::default()),
            &base_url,
            "a-revoked-key",
        )];
    })
    .await
    else {
        return;
    };
    // Three weeks ago: past its deadline whatever the holidays.
    let long_ago = Utc::now() - TimeDelta::days(21);
    assert_eq!(
        app.post_signed(&opt_out("lead_31", "+15550003001", long_ago))
            .await
            .status(),
        200
    );
    app.drain().await;
    // Its key refused, the destination stops: nothing to wait on but its state.
    let error = r#"outreach_sync_destination_error{destination="van-main"}"#;
    eventually(
        "the destination to stop in error",
        Duration::from_secs(20),
        async || metric(&app, error).await == 1.0,
    )
    .await;
    assert_eq!(
        metric(
            &app,
            r#"outreach_sync_destination_lag_entries{destination="van-main"}"#
        )
        .await,
        1.0
    );
    let behind = metric(
        &app,
        r#"outreach_sync_optout_oldest_pending_seconds{destination="van-main"}"#,
    )
    .await;
    assert!(behind >= 21.0 * 86_400.0 - 60.0, "{behind}");
    // The service had it (it announced it): the destination alone makes it overdue.
    assert_eq!(
        metric(
            &app,
            r#"outreach_sync_optout_oldest_pending_seconds{destination="service"}"#
        )
        .await,
        0.0
    );
    assert_eq!(metric(&app, "outreach_sync_optouts_overdue").await, 1.0);
    let report = report(&app).await;
    assert_eq!(report["items"][0]["state"], "overdue", "{report}");
    assert_eq!(
        report["items"][0]["destinations"][1],
        json!({"name": "van-main", "honouredAt": null})
    );
    app.stop().await;
}
