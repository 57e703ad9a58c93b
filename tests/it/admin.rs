//! The admin listener over real HTTP: authentication, every route, JSON errors, and the
//! OpenAPI document against the router.

use crate::common;

use std::collections::BTreeSet;

use common::{
    ADMIN_TOKEN, Backend, TestApp, on_both_backends, spawn_app, spawn_app_on, with_admin_token,
};
use serde_json::{Value, json};

/// A path of the document with its parameters filled in.
fn concrete(path: &str) -> String {
    path.replace("{id}", "some-id")
}

/// A route of the generated document: its method, its path, and whether it is public
/// (`security: []`).
struct Route {
    method: reqwest::Method,
    path: String,
    public: bool,
}

/// Every operation of the document the daemon generates.
fn documented_routes() -> Vec<Route> {
    let document = serde_json::to_value(outreach_sync::admin::openapi_document()).unwrap();
    let mut routes = Vec::new();
    for (path, operations) in document["paths"].as_object().expect("paths") {
        for (method, operation) in operations.as_object().expect("operations") {
            routes.push(Route {
                method: reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap(),
                path: path.clone(),
                public: operation["security"] == json!([]),
            });
        }
    }
    routes
}

async fn json_of(response: reqwest::Response) -> Value {
    response.json().await.expect("a JSON body")
}

fn lead_event(id: &str, lead: &str, phone: &str, opted_out: bool) -> String {
    json!({
        "type": "consentUpdate-v1", "id": id, "createdAt": "2026-11-21T10:00:00Z",
        "data": {"id": lead, "type": "lead", "organizationId": "org_1", "phoneNumber": phone,
                 "activeGroupIds": ["grp_1"], "inactiveGroupIds": [], "customFields": {"city": "Oslo"},
                 "firstName": "Ada", "tagIds": [], "globalOptedOut": opted_out,
                 "createdAt": "2026-11-01T09:00:00Z"}
    })
    .to_string()
}

/// What `path` answers once everything received so far is applied; `expected` must hold.
async fn get_applied(app: &TestApp, path: &str, expected: impl Fn(&Value) -> bool) -> Value {
    app.drain().await;
    let body = json_of(app.admin_get(path).await).await;
    assert!(expected(&body), "{path} answered {body}");
    body
}

on_both_backends!(
    every_v1_route_refuses_a_missing_wrong_or_malformed_token_and_public_routes_need_none
);
async fn every_v1_route_refuses_a_missing_wrong_or_malformed_token_and_public_routes_need_none(
    backend: Backend,
) {
    // A wrong token on every route, more than the limit of failures per address allows
    // (the limit has its own tests in `guessing.rs` and `console.rs`).
    let Some(app) = spawn_app_on(backend, |s| {
        with_admin_token(s);
        s.admin.failed_auth_per_minute = 10_000;
    })
    .await
    else {
        return;
    };
    let headers: [Option<String>; 5] = [
        None,
        Some("Bearer wrong-token".into()),
        Some(format!("Basic {ADMIN_TOKEN}")),
        Some("Bearer".into()),
        Some(format!("Bearer{ADMIN_TOKEN}")),
    ];
    let routes = documented_routes();
    let public: BTreeSet<&str> = routes
        .iter()
        .filter(|r| r.public)
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(public, BTreeSet::from(["/healthz", "/metrics"]));
    for route in &routes {
        for header in &headers {
            let mut request = app
                .http
                .request(route.method.clone(), app.admin_url(&concrete(&route.path)));
            if let Some(value) = header {
                request = request.header("authorization", value);
            }
            let response = request.send().await.expect("request");
            if route.public {
                assert_eq!(response.status(), 200, "{} {}", route.method, route.path);
            } else {
                assert_eq!(
                    response.status(),
                    401,
                    "{} {} {header:?}",
                    route.method,
                    route.path
                );
                assert_eq!(response.headers()["www-authenticate"], "Bearer");
                let body = json_of(response).await;
                assert_eq!(body["code"], 401);
                assert!(
                    body["message"]
                        .as_str()
                        .is_some_and(|m| !m.contains(ADMIN_TOKEN))
                );
            }
        }
    }
    // Unknown paths need a token too: the listener does not map itself for strangers.
    let response = app
        .http
        .get(app.admin_url("/v1/nothing"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    app.stop().await;
}

#[tokio::test]
async fn with_no_token_configured_every_v1_request_is_refused() {
    let app = spawn_app(|_| {}).await;
    let response = app.admin_get("/v1/status").await;
    assert_eq!(response.status(), 401);
    let health = app
        .http
        .get(app.admin_url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    app.stop().await;
}

#[tokio::test]
async fn unknown_routes_and_wrong_methods_answer_json_errors() {
    let app = spawn_app(with_admin_token).await;
    let response = app.admin_get("/v1/nothing").await;
    assert_eq!(response.status(), 404);
    assert_eq!(
        json_of(response).await,
        json!({"code": 404, "message": "no such route"})
    );
    let response = app
        .http
        .delete(app.admin_url("/v1/consent"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    assert_eq!(json_of(response).await["code"], 405);
    app.stop().await;
}

#[tokio::test]
async fn the_openapi_document_lists_exactly_the_routes_the_router_serves() {
    let app = spawn_app(with_admin_token).await;
    let document = json_of(app.admin_get("/v1/openapi.json").await).await;
    assert!(document["openapi"].as_str().unwrap().starts_with("3."));
    let mut documented = BTreeSet::new();
    for (path, operations) in document["paths"].as_object().expect("paths") {
        for method in operations.as_object().expect("operations").keys() {
            documented.insert((method.to_uppercase(), path.clone()));
        }
    }
    let generated: BTreeSet<(String, String)> = documented_routes()
        .iter()
        .map(|r| (r.method.to_string(), r.path.clone()))
        .collect();
    assert_eq!(documented, generated);
    assert_eq!(documented.len(), 26, "{documented:?}");
    // Every documented operation is routed: whatever it answers, it is not the router's
    // "no such route" nor a 405.
    for (method, path) in &documented {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let response = app
            .http
            .request(method.clone(), app.admin_url(&concrete(path)))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let status = response.status();
        assert_ne!(status, 405, "{method} {path}");
        if status == 404 {
            let body = json_of(response).await;
            assert_ne!(body["message"], "no such route", "{method} {path}");
        }
    }
    app.stop().await;
}

on_both_backends!(consent_is_read_one_number_at_a_time_and_in_batches_of_up_to_ten_thousand);
async fn consent_is_read_one_number_at_a_time_and_in_batches_of_up_to_ten_thousand(
    backend: Backend,
) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    for (i, phone) in ["+15550000001", "+15550000002"].iter().enumerate() {
        let response = app
            .post_signed(&common::consent_event(&format!("evt_{i}"), phone, true))
            .await;
        assert_eq!(response.status(), 200);
    }
    let body = get_applied(&app, "/v1/consent?phoneNumber=%2B15550000002", |b| {
        b["items"].as_array().is_some_and(|i| !i.is_empty())
    })
    .await;
    let record = &body["items"][0];
    assert_eq!(record["organizationId"], "org_1");
    assert_eq!(record["phoneNumber"], "+15550000002");
    assert_eq!(record["optedOut"], true);
    assert_eq!(record["source"], "webhook");
    for key in ["leadId", "changedAt"] {
        assert!(record.get(key).is_some(), "{key}");
    }
    let unknown = json_of(
        app.admin_get("/v1/consent?phoneNumber=%2B15559999999")
            .await,
    )
    .await;
    assert_eq!(unknown, json!({"items": [], "suppressed": false}));
    let other_org = app
        .admin_get("/v1/consent?phoneNumber=%2B15550000002&organizationId=org_2")
        .await;
    assert_eq!(
        json_of(other_org).await,
        json!({"items": [], "suppressed": false})
    );
    assert_eq!(app.admin_get("/v1/consent").await.status(), 400);
    assert_eq!(
        app.admin_get("/v1/consent?phoneNumber=5550000002x")
            .await
            .status(),
        400
    );

    let batch =
        json!({"phoneNumbers": ["+15550000001", "+15559999999", "+15550000002", "+15550000001"]});
    let body = json_of(app.admin_post("/v1/consent/lookup", &batch).await).await;
    let phones: Vec<&str> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["phoneNumber"].as_str().unwrap())
        .collect();
    assert_eq!(phones, ["+15550000001", "+15550000002"]);
    assert_eq!(body["unknown"], json!(["+15559999999"]));

    let full: Vec<String> = (0..10_000).map(|i| format!("+1666{i:07}")).collect();
    let response = app
        .admin_post("/v1/consent/lookup", &json!({"phoneNumbers": full}))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        json_of(response).await["unknown"].as_array().unwrap().len(),
        10_000
    );
    let too_many: Vec<String> = (0..10_001).map(|i| format!("+1666{i:07}")).collect();
    let response = app
        .admin_post("/v1/consent/lookup", &json!({"phoneNumbers": too_many}))
        .await;
    assert_eq!(response.status(), 413);
    assert_eq!(json_of(response).await["code"], 413);
    let invalid = app
        .admin_post(
            "/v1/consent/lookup",
            &json!({"phoneNumbers": ["+1555", "nope"]}),
        )
        .await;
    assert_eq!(invalid.status(), 400);
    let not_json = app
        .http
        .post(app.admin_url("/v1/consent/lookup"))
        .bearer_auth(ADMIN_TOKEN)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), 400);
    assert_eq!(json_of(not_json).await["code"], 400);
    app.stop().await;
}

on_both_backends!(a_local_change_is_accepted_recorded_as_local_and_shown_as_a_pending_push);
async fn a_local_change_is_accepted_recorded_as_local_and_shown_as_a_pending_push(
    backend: Backend,
) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    let change = json!({"phoneNumber": "+15550000003", "organizationId": "org_1", "optedOut": true,
                        "reason": "asked by phone"});
    let response = app.admin_post("/v1/consent", &change).await;
    assert_eq!(response.status(), 202);
    let recorded = json_of(response).await;
    assert_eq!(recorded["push"], "pending");
    assert!(recorded["eventRef"].as_str().unwrap().starts_with("local:"));
    let current = json_of(
        app.admin_get("/v1/consent?phoneNumber=%2B15550000003")
            .await,
    )
    .await;
    assert_eq!(current["items"][0]["source"], "local");
    assert_eq!(current["items"][0]["optedOut"], true);
    let feed = json_of(app.admin_get("/v1/consent/changes").await).await;
    let entry = &feed["items"][0];
    assert_eq!(entry["seq"], recorded["seq"]);
    assert_eq!(entry["source"], "local");
    assert_eq!(entry["push"], "pending");
    let status = json_of(app.admin_get("/v1/status").await).await;
    assert_eq!(status["pushes"]["pending"], 1);

    for bad in [
        json!({"phoneNumber": "555 0003", "organizationId": "org_1", "optedOut": true}),
        json!({"phoneNumber": "+15550000003", "organizationId": "", "optedOut": true}),
        json!({"phoneNumber": "+15550000003", "organizationId": "org_1", "optedOut": false, "tagId": "tag_1"}),
        json!({"phoneNumber": "+15550000003", "organizationId": "org_1"}),
        json!({"phoneNumber": "+15550000003", "organizationId": "org_1", "optedOut": true, "extra": 1}),
    ] {
        let response = app.admin_post("/v1/consent", &bad).await;
        assert_eq!(response.status(), 400, "{bad}");
        assert_eq!(json_of(response).await["code"], 400);
    }
    app.stop().await;
}

on_both_backends!(the_change_feed_pages_in_seq_order_and_checks_its_limit);
async fn the_change_feed_pages_in_seq_order_and_checks_its_limit(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    for i in 0..5 {
        let phone = format!("+1555000010{i}");
        app.post_signed(&common::consent_event(
            &format!("evt_{i}"),
            &phone,
            i % 2 == 0,
        ))
        .await;
    }
    get_applied(&app, "/v1/consent/changes?limit=10", |b| {
        b["items"].as_array().unwrap().len() == 5
    })
    .await;
    let first = json_of(app.admin_get("/v1/consent/changes?limit=2").await).await;
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    let next = first["next"].as_i64().unwrap();
    assert_eq!(next, first["items"][1]["seq"].as_i64().unwrap());
    let rest = json_of(
        app.admin_get(&format!("/v1/consent/changes?after={next}"))
            .await,
    )
    .await;
    let seqs: Vec<i64> = rest["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs.len(), 3);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]) && seqs[0] > next);
    let last = rest["next"].as_i64().unwrap();
    let empty = json_of(
        app.admin_get(&format!("/v1/consent/changes?after={last}"))
            .await,
    )
    .await;
    assert_eq!(empty, json!({"items": [], "next": last}));
    for bad in ["limit=0", "limit=10001", "after=x", "limit=-1"] {
        let response = app.admin_get(&format!("/v1/consent/changes?{bad}")).await;
        assert_eq!(response.status(), 400, "{bad}");
    }
    app.stop().await;
}

on_both_backends!(leads_and_messages_come_from_the_mirror_in_the_service_shape);
async fn leads_and_messages_come_from_the_mirror_in_the_service_shape(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    app.post_signed(&lead_event("evt_l", "lead_1", "+15550000200", true))
        .await;
    let message = json!({"type": "messageStatus-v1", "id": "evt_m", "createdAt": "2026-11-21T10:00:00Z",
        "data": {"id": "msg_1", "threadId": "thr_1", "status": "delivered", "type": "SMS",
                 "createdAt": "2026-11-21T09:59:00Z", "leadId": "lead_1", "organizationId": "org_1"}});
    app.post_signed(&message.to_string()).await;
    let lead = get_applied(&app, "/v1/leads/lead_1", |b| b["id"] == "lead_1").await;
    assert_eq!(lead["type"], "lead");
    assert_eq!(lead["phoneNumber"], "+15550000200");
    assert_eq!(lead["organizationId"], "org_1");
    assert_eq!(lead["activeGroupIds"], json!(["grp_1"]));
    assert_eq!(lead["customFields"], json!({"city": "Oslo"}));
    assert_eq!(lead["firstName"], "Ada");
    assert_eq!(lead["globalOptedOut"], true);
    assert!(
        lead.get("lastName").is_none(),
        "absent fields are left out, not null"
    );
    let found = json_of(
        app.admin_get("/v1/leads?phoneNumber=%2B15550000200&organizationId=org_1")
            .await,
    )
    .await;
    assert_eq!(found["items"][0], lead);
    assert_eq!(
        app.admin_get("/v1/leads?organizationId=org_1")
            .await
            .status(),
        400
    );
    let message = get_applied(&app, "/v1/messages/msg_1", |b| b["id"] == "msg_1").await;
    assert_eq!(message["status"], "delivered");
    assert_eq!(message["terminal"], true);
    assert_eq!(message["leadId"], "lead_1");
    for path in ["/v1/leads/nobody", "/v1/messages/nothing"] {
        let response = app.admin_get(path).await;
        assert_eq!(response.status(), 404);
        assert_eq!(json_of(response).await["code"], 404);
    }
    app.stop().await;
}

on_both_backends!(metrics_are_prometheus_text_with_delivery_counts_and_database_gauges);
async fn metrics_are_prometheus_text_with_delivery_counts_and_database_gauges(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    let scrape = || async {
        let response = app
            .http
            .get(app.admin_url("/metrics"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        response.text().await.unwrap()
    };
    let value = |text: &str, line: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{line} missing in {text}"))
    };
    // The counters are this daemon's own; the gauges read its database.
    app.post_signed(&common::consent_event("evt_metrics", "+15550000300", true))
        .await;
    let unknown = r#"{"type": "somethingNew-v9", "id": "evt_new", "data": {}}"#;
    assert_eq!(app.post_signed(unknown).await.status(), 200);
    assert_eq!(app.post_signed(unknown).await.status(), 200);
    app.post_with("{}", &[("x-signature".into(), "00".into())])
        .await;
    let change =
        json!({"phoneNumber": "+15550000301", "organizationId": "org_1", "optedOut": true});
    assert_eq!(app.admin_post("/v1/consent", &change).await.status(), 202);
    app.drain().await;
    let text = scrape().await;
    assert_eq!(value(&text, "outreach_sync_outbox_backlog"), 0.0);
    assert_eq!(value(&text, "outreach_sync_quarantined"), 1.0);
    assert_eq!(value(&text, "outreach_sync_pushes_pending"), 1.0);
    assert_eq!(value(&text, "outreach_sync_apply_lag_seconds"), 0.0);
    for (series, count) in [
        (
            "outreach_sync_deliveries_total{account=\"default\",outcome=\"accepted\"}",
            2.0,
        ),
        (
            "outreach_sync_deliveries_total{account=\"default\",outcome=\"duplicate\"}",
            1.0,
        ),
        (
            "outreach_sync_deliveries_total{account=\"default\",outcome=\"rejected\"}",
            1.0,
        ),
        (
            "outreach_sync_deliveries_total{account=\"default\",outcome=\"not_json\"}",
            0.0,
        ),
        ("outreach_sync_events_applied_total", 1.0),
        ("outreach_sync_events_quarantined_total", 1.0),
        (
            "outreach_sync_upstream_responses_total{account=\"default\",status=\"error\"}",
            0.0,
        ),
        (
            "outreach_sync_reconcile_passes_total{account=\"default\"}",
            0.0,
        ),
    ] {
        assert_eq!(value(&text, series), count, "{series} in {text}");
    }
    for counter in [
        "outreach_sync_deliveries_total",
        "outreach_sync_upstream_responses_total",
        "outreach_sync_reconcile_passes_total",
    ] {
        assert!(
            text.contains(&format!("# TYPE {counter} counter")),
            "{counter}"
        );
    }
    app.stop().await;
}
