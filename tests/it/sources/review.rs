//! Replies put to a person: a reply holding a revocation word among other words, posted to
//! a Twilio source over HTTP and signed as Twilio signs, is kept for review with its due
//! date; decided an opt-out through the admin API or the CLI, it reaches the service as of
//! the reply's receipt; decided not one, nothing is recorded; a decision is made once.

use serde_json::{Value, json};

use super::twilio::{text_from, texting};
use super::{WAIT, opted_out_at_service};
use crate::common::{ADMIN_TOKEN, Backend, TestApp, eventually, on_both_backends};
use crate::destinations::once::opted_in_with_van_id;

/// The replies `GET /v1/review` lists (with `all`, the decided ones too).
async fn listed(app: &TestApp, all: bool) -> Vec<Value> {
    let path = if all {
        "/v1/review?all=true"
    } else {
        "/v1/review"
    };
    let list: Value = app.admin_get(path).await.json().await.expect("json");
    list["items"].as_array().cloned().unwrap_or_default()
}

async fn decide(app: &TestApp, id: &Value, body: Value) -> reqwest::Response {
    app.http
        .post(app.admin_url(&format!("/v1/review/{id}")))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .expect("an answer")
}

on_both_backends!(
    a_reply_put_to_review_decided_an_opt_out_reaches_the_service_as_of_its_receipt,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_reply_put_to_review_decided_an_opt_out_reaches_the_service_as_of_its_receipt(
    backend: Backend,
) {
    let Some((sandbox, app)) = texting(backend, &[super::twilio::TOKEN]).await else {
        return;
    };
    let (lead, _) = opted_in_with_van_id(&sandbox);
    let before = chrono::Utc::now();
    let (status, _) = text_from(
        &app,
        "SMrev0001",
        &lead.phone_number,
        "please end these messages",
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = text_from(&app, "SMrev0002", "+15550107777", "cancel my order").await;
    assert_eq!(status, 200);
    let waiting = eventually("two replies wait", WAIT, async || {
        let items = listed(&app, false).await;
        (items.len() == 2).then_some(items)
    })
    .await;
    let end = &waiting[0];
    assert_eq!(end["text"], "please end these messages", "{end}");
    assert_eq!(end["matched"], json!(["end"]), "{end}");
    assert_eq!(end["source"], "twilio-main", "{end}");
    assert_eq!(end["phoneNumber"], lead.phone_number.as_str(), "{end}");
    assert!(end["due"].as_str() > end["receivedAt"].as_str(), "{end}");
    assert!(
        outreach_sync::ledger::history(&app.pool, &lead.phone_number, None)
            .await
            .expect("history")
            .iter()
            .all(|e| e.source.as_str() != "twilio"),
        "nothing recorded before a decision"
    );
    let metrics = app.admin_get("/metrics").await.text().await.expect("text");
    assert!(
        metrics.contains("outreach_sync_review_waiting 2"),
        "{metrics}"
    );

    // Decided an opt-out: recorded as of the reply's receipt, pushed to the service.
    let decided = decide(
        &app,
        &end["id"],
        json!({"decision": "opt_out", "by": "organizer", "reason": "asked to end"}),
    )
    .await;
    assert_eq!(decided.status(), 200);
    let decided: Value = decided.json().await.expect("json");
    assert_eq!(decided["decision"], "opt_out", "{decided}");
    assert_eq!(decided["decidedBy"], "organizer", "{decided}");
    opted_out_at_service(&sandbox, &lead).await;
    let history = outreach_sync::ledger::history(&app.pool, &lead.phone_number, None)
        .await
        .expect("history");
    let entry = history
        .iter()
        .find(|e| e.source.as_str() == "twilio" && e.opted_out)
        .expect("the opt-out decided");
    assert_eq!(
        entry.occurred_at.0.timestamp_millis(),
        chrono::DateTime::parse_from_rfc3339(end["receivedAt"].as_str().expect("received"))
            .expect("a time")
            .timestamp_millis(),
        "as of the reply's receipt, not the decision"
    );
    assert!(entry.occurred_at.0 >= before - chrono::Duration::seconds(1));
    let evidence: Vec<(String,)> = app
        .rows(&format!(
            "SELECT CAST(evidence AS TEXT) FROM ledger WHERE seq = {}",
            entry.seq
        ))
        .await;
    let evidence: Value = serde_json::from_str(&evidence[0].0).expect("evidence");
    let stands_on = &evidence["standsOn"];
    assert_eq!(stands_on["decision"]["by"], "organizer", "{evidence}");
    assert_eq!(
        stands_on["decision"]["reason"], "asked to end",
        "{evidence}"
    );
    assert_eq!(
        stands_on["reply"], "please end these messages",
        "{evidence}"
    );

    // Once only.
    let again = decide(
        &app,
        &end["id"],
        json!({"decision": "not_opt_out", "by": "x"}),
    )
    .await;
    assert_eq!(again.status(), 409);
    let unknown = decide(
        &app,
        &json!(999_999),
        json!({"decision": "opt_out", "by": "x"}),
    )
    .await;
    assert_eq!(unknown.status(), 404);
    let nobody = decide(
        &app,
        &waiting[1]["id"],
        json!({"decision": "opt_out", "by": " "}),
    )
    .await;
    assert_eq!(nobody.status(), 400);

    // Decided not an opt-out: kept with its decision, nothing recorded.
    let order = &waiting[1];
    let kept = decide(
        &app,
        &order["id"],
        json!({"decision": "not_opt_out", "by": "organizer", "reason": "an order"}),
    )
    .await;
    assert_eq!(kept.status(), 200);
    assert!(listed(&app, false).await.is_empty());
    let all = listed(&app, true).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(
        outreach_sync::ledger::history(&app.pool, "+15550107777", None)
            .await
            .expect("history")
            .is_empty(),
        "not an opt-out: nothing recorded"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_reply_is_listed_and_decided_from_the_command_line,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_reply_is_listed_and_decided_from_the_command_line(backend: Backend) {
    let Some((sandbox, app)) = texting(backend, &[super::twilio::TOKEN]).await else {
        return;
    };
    let (lead, _) = opted_in_with_van_id(&sandbox);
    let (status, _) = text_from(
        &app,
        "SMcli0001",
        &lead.phone_number,
        "stop texting me about the rally",
    )
    .await;
    assert_eq!(status, 200);
    eventually("a reply waits", WAIT, async || {
        listed(&app, false).await.len() == 1
    })
    .await;
    let config = app.dir.path().join("review.toml");
    std::fs::write(
        &config,
        format!(
            "[[source]]\nname = \"twilio-main\"\nkind = \"twilio\"\nauth_token = \"{}\"\npublic_url = {:?}\n",
            super::twilio::TOKEN,
            super::twilio::PUBLIC_URL
        ),
    )
    .expect("config");
    let cli = |args: &[&str]| super::cli_on(&app, &config, args);
    let out = cli(&["review"]);
    let text = crate::cli::text(&out.stdout);
    assert!(text.contains("stop texting me about the rally"), "{text}");
    assert!(text.contains("due "), "{text}");
    let out = cli(&["review", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).expect("json");
    let id = list["items"][0]["id"].as_i64().expect("an id");
    let missing = cli(&["review", "decide", "999999", "--opt-out", "--by", "me"]);
    assert_eq!(
        missing.status.code(),
        Some(3),
        "{}",
        crate::cli::text(&missing.stderr)
    );
    let out = cli(&[
        "review",
        "decide",
        &id.to_string(),
        "--opt-out",
        "--by",
        "phone bank lead",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::cli::text(&out.stderr)
    );
    assert!(crate::cli::text(&out.stdout).contains("decided opt_out by phone bank lead"));
    opted_out_at_service(&sandbox, &lead).await;
    let again = cli(&[
        "review",
        "decide",
        &id.to_string(),
        "--not-opt-out",
        "--by",
        "me",
    ]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "{}",
        crate::cli::text(&again.stderr)
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    the_compliance_report_counts_replies_waiting_and_decided_and_times_a_decided_opt_out_from_the_reply,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn the_compliance_report_counts_replies_waiting_and_decided_and_times_a_decided_opt_out_from_the_reply(
    backend: Backend,
) {
    let Some((sandbox, app)) = texting(backend, &[super::twilio::TOKEN]).await else {
        return;
    };
    let (lead, _) = opted_in_with_van_id(&sandbox);
    for (sid, from, said) in [
        (
            "SMrep0001",
            lead.phone_number.as_str(),
            "please end these messages",
        ),
        ("SMrep0002", "+15550107777", "cancel my order"),
        ("SMrep0003", "+15550108888", "wrong number"),
    ] {
        assert_eq!(text_from(&app, sid, from, said).await.0, 200);
    }
    let waiting = eventually("three replies wait", WAIT, async || {
        let items = listed(&app, false).await;
        (items.len() == 3).then_some(items)
    })
    .await;
    let by_text = |text: &str| {
        waiting
            .iter()
            .find(|i| i["text"] == text)
            .cloned()
            .unwrap_or_else(|| panic!("{text} in {waiting:?}"))
    };
    let (end, order, wrong) = (
        by_text("please end these messages"),
        by_text("cancel my order"),
        by_text("wrong number"),
    );
    // Decided a while after the reply: the opt-out is still timed from the reply.
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let decided = decide(
        &app,
        &end["id"],
        json!({"decision": "opt_out", "by": "lead"}),
    )
    .await;
    assert_eq!(decided.status(), 200);
    let decided = decide(
        &app,
        &order["id"],
        json!({"decision": "not_opt_out", "by": "lead"}),
    )
    .await;
    assert_eq!(decided.status(), 200);
    opted_out_at_service(&sandbox, &lead).await;

    let report: Value = app
        .admin_get("/v1/compliance")
        .await
        .json()
        .await
        .expect("json");
    let review = &report["review"];
    assert_eq!(review["waiting"], 1, "{review}");
    assert_eq!(review["decidedOptOut"], 1, "{review}");
    assert_eq!(review["decidedNotOptOut"], 1, "{review}");
    assert_eq!(review["oldestDue"], wrong["due"], "{review}");
    assert_eq!(review["overdue"], false, "{review}");
    let items = report["items"].as_array().expect("items");
    let item = items
        .iter()
        .find(|i| i["phoneNumber"] == lead.phone_number.as_str() && i["source"] == "twilio")
        .unwrap_or_else(|| panic!("the decided opt-out among {items:?}"));
    let millis = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().expect("a time"))
            .expect("a time")
            .timestamp_millis()
    };
    assert_eq!(
        millis(&item["occurredAt"]),
        millis(&end["receivedAt"]),
        "measured from the reply: {item}"
    );
    assert_eq!(
        millis(&item["deadline"]),
        millis(&end["due"]),
        "due as the reply was: {item}"
    );

    // The text and the printable file say the same.
    let config = app.dir.path().join("report.toml");
    std::fs::write(&config, "").expect("config");
    let text = super::cli_on(&app, &config, &["report", "compliance"]);
    let text = crate::cli::text(&text.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("Replies to review"))
        .unwrap_or_else(|| panic!("no line of the replies in {text}"));
    assert!(
        line.contains("1 waiting")
            && line.contains(wrong["due"].as_str().expect("due"))
            && line.contains("1 an opt-out, 1 not"),
        "{line}"
    );
    let html = super::cli_on(&app, &config, &["report", "compliance", "--format", "html"]);
    let html = crate::cli::text(&html.stdout);
    let table = html
        .split("id=\"report-review\"")
        .nth(1)
        .and_then(|rest| rest.split("</table>").next())
        .unwrap_or_else(|| panic!("no table of the replies in {html}"));
    assert!(table.contains("<td>1</td>"), "{table}");
    app.stop().await;
    sandbox.shutdown().await;
}
