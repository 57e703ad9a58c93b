//! The compliance report as a compliance officer reads it: every opt-out against its
//! deadline, the service and each subscriber as destinations, and the messages sent after
//! one.

use chrono::{DateTime, TimeDelta, Utc};
use outreach_sync::settings::{Settings, SubscriberSettings};
use serde_json::{Value, json};

use crate::common::{Backend, TestApp, on_both_backends, spawn_app_on, with_admin_token};
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
            "seq,phoneNumber,organizationId,leadId,occurredAt,source,state,deadline,honouredAt,honouredAt:service,confirmation,sentAfterOptOut"
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
