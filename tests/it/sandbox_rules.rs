//! The sandbox's rules, one by one against the v3 document, over raw HTTP so the wire shape
//! (status codes, error bodies, the list envelope) is what is checked.

use outreach_sync::client::models::AgentVisibility;
use outreach_sync_sandbox::wire::{Lead, MessageType};
use outreach_sync_sandbox::{RunningSandbox, Sandbox, SandboxConfig};
use serde_json::{Value, json};

struct Api {
    sandbox: RunningSandbox,
    http: reqwest::Client,
    token: String,
}

impl Api {
    async fn start(config: SandboxConfig) -> Api {
        let sandbox = Sandbox::spawn(config).await.expect("sandbox starts");
        let http = reqwest::Client::new();
        let (status, body) = post_raw(
            &http,
            &format!("{}/v3/oauth/token", sandbox.base_url()),
            json!({"grant_type": "client_credentials", "client_id": "sandbox@example.org", "client_secret": "sandbox-secret"}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let token = body["access_token"].as_str().expect("a token").to_owned();
        Api {
            sandbox,
            http,
            token,
        }
    }

    async fn seeded(leads: usize) -> Api {
        Self::start(SandboxConfig {
            leads,
            ..SandboxConfig::default()
        })
        .await
    }

    fn url(&self, path: &str) -> String {
        format!("{}/v3{path}", self.sandbox.base_url())
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, self.url(path))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("answer");
        let status = response.status().as_u16();
        let bytes = response.bytes().await.expect("body");
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).expect("JSON")
        };
        (status, value)
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    async fn patch(&self, lead: &str, operation: Value) -> (u16, Value) {
        self.send(
            reqwest::Method::PATCH,
            "/leads",
            Some(json!({"id": lead, "operation": operation})),
        )
        .await
    }

    fn org(&self, n: usize) -> String {
        self.sandbox.truth().organizations[n].id.clone()
    }

    async fn groups(&self, org: &str) -> Vec<String> {
        let (_, page) = self.get(&format!("/groups?organizationId={org}")).await;
        page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|g| g["id"].as_str().expect("id").to_owned())
            .collect()
    }

    fn lead(&self, id: &str) -> Lead {
        self.sandbox
            .leads()
            .into_iter()
            .find(|l| l.id == id)
            .expect("lead")
    }
}

async fn post_raw(http: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let response = http.post(url).json(&body).send().await.expect("answer");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn assert_error_body(body: &Value, code: u16) {
    assert_eq!(body["code"], json!(code), "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

#[tokio::test]
async fn the_token_endpoint_answers_the_documented_shape_and_refuses_wrong_credentials() {
    let api = Api::seeded(1).await;
    let url = api.url("/oauth/token");
    let grant = |secret: &str| json!({"grant_type": "client_credentials", "client_id": "sandbox@example.org", "client_secret": secret});
    let (status, body) = post_raw(&api.http, &url, grant("sandbox-secret")).await;
    assert_eq!(status, 200);
    assert_eq!(body["token_type"], "Bearer");
    assert!(body["scope"].is_string() && body["expires_in"].as_f64() == Some(7200.0));
    let (status, body) = post_raw(&api.http, &url, grant("nope")).await;
    assert_eq!(status, 401);
    assert_error_body(&body, 401);
    let (status, body) =
        post_raw(&api.http, &url, json!({"grant_type": "client_credentials"})).await;
    assert_eq!(status, 400);
    assert_error_body(&body, 400);
    assert_eq!(api.sandbox.stats().token_requests, 4);
    assert_eq!(api.sandbox.stats().token_failures, 2);
}

#[tokio::test]
async fn every_resource_endpoint_requires_a_valid_bearer_token() {
    let api = Api::seeded(1).await;
    for path in [
        "/leads",
        "/organizations",
        "/tags",
        "/messages/x",
        "/webhook_registrations",
    ] {
        let response = api.http.get(api.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 401, "{path}");
        assert_error_body(&response.json().await.unwrap(), 401);
        let response = api
            .http
            .get(api.url(path))
            .bearer_auth("forged")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{path}");
    }
}

#[tokio::test]
async fn a_list_answers_the_envelope_and_a_cursor_after_the_end_is_null() {
    let api = Api::seeded(6).await;
    let (status, page) = api.get("/leads?limit=4").await;
    assert_eq!(status, 200);
    assert_eq!(page["items"].as_array().unwrap().len(), 4);
    assert_eq!(page["hasMore"], json!(true));
    let cursor = page["cursor"].as_str().unwrap().to_owned();
    let (_, rest) = api.get(&format!("/leads?limit=4&cursor={cursor}")).await;
    assert_eq!(rest["hasMore"], json!(false));
    let last = rest["cursor"].as_str().unwrap().to_owned();
    let (_, empty) = api.get(&format!("/leads?limit=4&cursor={last}")).await;
    assert_eq!(
        empty,
        json!({"items": [], "cursor": null, "hasMore": false})
    );
    let (status, body) = api.get("/leads?cursor=not-ours").await;
    assert_eq!(status, 400);
    assert_error_body(&body, 400);
}

#[tokio::test]
async fn limits_of_zero_and_above_a_thousand_are_refused_with_an_error_body() {
    let api = Api::seeded(1).await;
    for limit in ["0", "1001", "2.5", "-1"] {
        let (status, body) = api.get(&format!("/organizations?limit={limit}")).await;
        assert_eq!(status, 422, "limit {limit}");
        assert_error_body(&body, 422);
        assert_eq!(body["serviceErrorCode"], "INVALID_LIMIT");
    }
    let (status, _) = api.get("/organizations?limit=ten").await;
    assert_eq!(status, 400);
    for limit in ["1", "1000"] {
        assert_eq!(
            api.get(&format!("/organizations?limit={limit}")).await.0,
            200
        );
    }
}

#[tokio::test]
async fn an_upsert_creates_with_201_then_updates_the_same_lead_with_200() {
    let api = Api::seeded(1).await;
    let org = api.org(0);
    let body = json!({"phoneNumber": "+15550100001", "organizationId": org, "firstName": "Ida"});
    let (status, created) = api.post("/leads", body.clone()).await;
    assert_eq!(status, 201);
    assert_eq!(created["type"], "lead");
    for field in [
        "activeGroupIds",
        "inactiveGroupIds",
        "customFields",
        "tagIds",
        "globalOptedOut",
        "createdAt",
    ] {
        assert!(
            created.get(field).is_some(),
            "{field} is required in a Lead"
        );
    }
    let (status, updated) = api
        .post(
            "/leads",
            json!({"phoneNumber": "+15550100001", "organizationId": org, "lastName": "Wells"}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(updated["id"], created["id"]);
    assert_eq!(updated["firstName"], "Ida");
    assert_eq!(updated["lastName"], "Wells");
    let (status, body) = api
        .post(
            "/leads",
            json!({"phoneNumber": "5551234", "organizationId": org}),
        )
        .await;
    assert_eq!(status, 400);
    assert_error_body(&body, 400);
}

#[tokio::test]
async fn inactive_group_ids_are_ignored_for_groups_the_lead_is_not_in() {
    let api = Api::seeded(4).await;
    let org = api.org(0);
    let groups = api.groups(&org).await;
    let (status, lead) = api
        .post("/leads", json!({"phoneNumber": "+15550100002", "organizationId": org, "inactiveGroupIds": [groups[0]]}))
        .await;
    assert_eq!(status, 201);
    assert_eq!(lead["activeGroupIds"], json!([]));
    assert_eq!(
        lead["inactiveGroupIds"],
        json!([]),
        "not added and deactivated"
    );
    // A member is made inactive; omitting a group leaves it as it was.
    api.post("/leads", json!({"phoneNumber": "+15550100002", "organizationId": org, "activeGroupIds": [groups[0], groups[1]]}))
        .await;
    let (status, lead) = api
        .post("/leads", json!({"phoneNumber": "+15550100002", "organizationId": org, "inactiveGroupIds": [groups[1]]}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(lead["activeGroupIds"], json!([groups[0]]));
    assert_eq!(lead["inactiveGroupIds"], json!([groups[1]]));
}

#[tokio::test]
async fn groups_of_another_organization_are_rejected() {
    let api = Api::seeded(6).await;
    let (org, other) = (api.org(0), api.org(1));
    let foreign = api.groups(&other).await[0].clone();
    let (status, body) = api
        .post("/leads", json!({"phoneNumber": "+15550100003", "organizationId": org, "activeGroupIds": [foreign]}))
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["serviceErrorCode"], "GROUP_NOT_IN_ORGANIZATION");
    let lead = api
        .sandbox
        .leads()
        .into_iter()
        .find(|l| l.organization_id == org)
        .unwrap();
    let (status, _) = api
        .patch(
            &lead.id,
            json!({"type": "makeActiveInGroup", "groupId": foreign}),
        )
        .await;
    assert_eq!(status, 422);
}

#[tokio::test]
async fn group_membership_moves_between_active_and_inactive_and_is_never_lost() {
    let api = Api::seeded(4).await;
    let org = api.org(0);
    let group = api.groups(&org).await[1].clone();
    let lead = api
        .sandbox
        .leads()
        .into_iter()
        .find(|l| l.organization_id == org && !l.inactive_group_ids.contains(&group))
        .unwrap();
    let (status, body) = api
        .patch(
            &lead.id,
            json!({"type": "makeActiveInGroup", "groupId": group}),
        )
        .await;
    assert_eq!((status, body), (204, Value::Null));
    assert!(api.lead(&lead.id).active_group_ids.contains(&group));
    api.patch(
        &lead.id,
        json!({"type": "makeInactiveInGroup", "groupId": group}),
    )
    .await;
    let after = api.lead(&lead.id);
    assert!(!after.active_group_ids.contains(&group) && after.inactive_group_ids.contains(&group));
    api.patch(
        &lead.id,
        json!({"type": "makeActiveInGroup", "groupId": group}),
    )
    .await;
    let after = api.lead(&lead.id);
    assert!(after.active_group_ids.contains(&group) && !after.inactive_group_ids.contains(&group));
}

#[tokio::test]
async fn an_opt_out_tag_must_have_opt_out_visibility() {
    let api = Api::seeded(4).await;
    let org = api.org(0);
    let (_, tags) = api.get(&format!("/tags?organizationId={org}")).await;
    let tag_with = |visibility: &str| {
        tags["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["agentVisibility"] == visibility)
            .unwrap()["id"]
            .clone()
    };
    let lead = api
        .sandbox
        .leads()
        .into_iter()
        .find(|l| l.organization_id == org && !l.global_opted_out)
        .unwrap();
    let (status, body) = api
        .patch(
            &lead.id,
            json!({"type": "optOut", "tagId": tag_with("LEAD_PROFILES")}),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["serviceErrorCode"], "TAG_NOT_OPT_OUT");
    assert!(!api.lead(&lead.id).global_opted_out);
    let (status, _) = api
        .patch(
            &lead.id,
            json!({"type": "optOut", "tagId": tag_with("OPT_OUT")}),
        )
        .await;
    assert_eq!(status, 204);
    let after = api.lead(&lead.id);
    assert!(after.global_opted_out);
    assert!(
        after
            .tag_ids
            .contains(&tag_with("OPT_OUT").as_str().unwrap().to_owned())
    );
    let (_, only) = api
        .get(&format!(
            "/tags?organizationId={org}&agentVisibility=OPT_OUT"
        ))
        .await;
    let visibilities: Vec<_> = only["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["agentVisibility"].clone())
        .collect();
    assert_eq!(visibilities, vec![json!(AgentVisibility::OptOut)]);
}

#[tokio::test]
async fn set_custom_field_needs_an_existing_field_name() {
    let api = Api::seeded(2).await;
    let lead = api.sandbox.leads().remove(0);
    let (status, body) = api
        .patch(
            &lead.id,
            json!({"type": "setCustomField", "customFieldName": "nope", "value": "1"}),
        )
        .await;
    assert_eq!(status, 422);
    assert_error_body(&body, 422);
    assert_eq!(body["serviceErrorCode"], "CUSTOM_FIELD_NOT_FOUND");
    // An account-scoped field applies to every organization.
    let (status, _) = api
        .patch(
            &lead.id,
            json!({"type": "setCustomField", "customFieldName": "source", "value": "fair"}),
        )
        .await;
    assert_eq!(status, 204);
    assert_eq!(
        api.lead(&lead.id)
            .custom_fields
            .get("source")
            .map(String::as_str),
        Some("fair")
    );
}

async fn same_number_in_two_orgs(api: &Api) -> (String, String) {
    let (a, b) = (api.org(0), api.org(1));
    for org in [&a, &b] {
        let (status, _) = api
            .post(
                "/leads",
                json!({"phoneNumber": "+15550177777", "organizationId": org}),
            )
            .await;
        assert_eq!(status, 201);
    }
    let ids: Vec<String> = api
        .sandbox
        .leads()
        .into_iter()
        .filter(|l| l.phone_number == "+15550177777")
        .map(|l| l.id)
        .collect();
    (ids[0].clone(), ids[1].clone())
}

#[tokio::test]
async fn with_account_sync_an_opt_out_changes_every_lead_with_the_number() {
    let api = Api::seeded(2).await;
    let (first, second) = same_number_in_two_orgs(&api).await;
    assert_eq!(api.patch(&first, json!({"type": "optOut"})).await.0, 204);
    assert!(api.lead(&first).global_opted_out && api.lead(&second).global_opted_out);
    assert_eq!(api.patch(&second, json!({"type": "optIn"})).await.0, 204);
    assert!(!api.lead(&first).global_opted_out && !api.lead(&second).global_opted_out);
}

#[tokio::test]
async fn without_account_sync_an_opt_out_changes_only_that_lead() {
    let api = Api::start(SandboxConfig {
        leads: 2,
        account_sync: false,
        ..SandboxConfig::default()
    })
    .await;
    let (first, second) = same_number_in_two_orgs(&api).await;
    api.patch(&first, json!({"type": "optOut"})).await;
    assert!(api.lead(&first).global_opted_out && !api.lead(&second).global_opted_out);
}

#[tokio::test]
async fn unknown_leads_and_endpoints_answer_404_with_an_error_body() {
    let api = Api::seeded(1).await;
    let (status, body) = api.patch("lead_missing", json!({"type": "optIn"})).await;
    assert_eq!(status, 404);
    assert_error_body(&body, 404);
    let (status, body) = api.get("/no_such_thing").await;
    assert_eq!(status, 404);
    assert_error_body(&body, 404);
    let (status, body) = api
        .send(
            reqwest::Method::PATCH,
            "/leads",
            Some(json!({"id": "x", "operation": {"type": "explode"}})),
        )
        .await;
    assert_eq!(status, 400);
    assert_error_body(&body, 400);
}

impl Api {
    /// Every lead the API lists, page after page.
    async fn all_leads(&self) -> Vec<Value> {
        let mut leads = Vec::new();
        let mut path = "/leads?limit=1000".to_owned();
        loop {
            let (status, page) = self.get(&path).await;
            assert_eq!(status, 200, "{page}");
            leads.extend(page["items"].as_array().expect("items").iter().cloned());
            match page["cursor"].as_str() {
                Some(cursor) if page["hasMore"] == json!(true) => {
                    path = format!("/leads?limit=1000&cursor={cursor}");
                }
                _ => return leads,
            }
        }
    }
}

#[tokio::test]
async fn the_api_lists_exactly_the_leads_asked_for_whatever_the_seed_and_size() {
    // `--leads 60 --organizations 2` used to give 53: a number drawn twice in one
    // organization was skipped instead of drawn again.
    for (leads, organizations) in [(60, 2), (1, 1), (40, 1), (301, 3)] {
        for seed in [1, 2, 3, 42] {
            let api = Api::start(SandboxConfig {
                leads,
                organizations,
                seed,
                ..SandboxConfig::default()
            })
            .await;
            let listed = api.all_leads().await;
            assert_eq!(
                listed.len(),
                leads,
                "--leads {leads} --organizations {organizations} --seed {seed}"
            );
            let distinct: std::collections::HashSet<(String, String)> = listed
                .iter()
                .map(|l| {
                    let field = |name: &str| l[name].as_str().expect("string").to_owned();
                    (field("organizationId"), field("phoneNumber"))
                })
                .collect();
            assert_eq!(
                distinct.len(),
                leads,
                "one lead per number and organization"
            );
            api.sandbox.shutdown().await;
        }
    }
}

#[tokio::test]
async fn more_leads_than_an_organization_has_numbers_is_refused_at_start() {
    let refused = Sandbox::spawn(SandboxConfig {
        leads: 20_000_001,
        organizations: 2,
        ..SandboxConfig::default()
    })
    .await;
    let message = refused.err().expect("refused").to_string();
    assert!(message.contains("numbers per organization"), "{message}");
}

#[tokio::test]
async fn the_same_seed_gives_the_same_account_and_another_seed_another() {
    let config = |seed| SandboxConfig {
        leads: 25,
        seed,
        ..SandboxConfig::default()
    };
    let a = Sandbox::spawn(config(7)).await.unwrap();
    let b = Sandbox::spawn(config(7)).await.unwrap();
    let c = Sandbox::spawn(config(8)).await.unwrap();
    assert_eq!(a.leads(), b.leads());
    assert_ne!(a.leads(), c.leads());
    assert!(a.leads().iter().any(|l| l.global_opted_out));
}

#[tokio::test]
async fn messages_progress_to_a_terminal_status_with_error_codes_on_failures() {
    let api = Api::seeded(30).await;
    let reachable: Vec<Lead> = api
        .sandbox
        .leads()
        .into_iter()
        .filter(|l| !l.global_opted_out)
        .collect();
    for lead in &reachable {
        let first = api
            .sandbox
            .send_message(&lead.id, MessageType::SMS)
            .unwrap();
        assert!(matches!(first.status.as_str(), "queued" | "pending_lookup"));
    }
    for _ in 0..4 {
        api.sandbox.advance_messages(&[]);
    }
    let messages = api.sandbox.messages();
    assert_eq!(messages.len(), reachable.len());
    for message in &messages {
        assert!(
            matches!(
                message.status.as_str(),
                "delivered" | "failed" | "undelivered"
            ),
            "{message:?}"
        );
        assert_eq!(
            message.error_code.is_some(),
            message.status != "delivered",
            "{message:?}"
        );
        let (status, read) = api.get(&format!("/messages/{}", message.id)).await;
        assert_eq!(status, 200);
        assert_eq!(read["status"], json!(message.status));
    }
    let opted_out = api.sandbox.leads().into_iter().find(|l| l.global_opted_out);
    if let Some(lead) = opted_out {
        let refused = api
            .sandbox
            .send_message(&lead.id, MessageType::SMS)
            .unwrap_err();
        assert_eq!(refused.status, 422);
    }
}

#[tokio::test]
async fn the_control_endpoints_make_a_person_text_stop_and_show_the_truth() {
    let api = Api::seeded(10).await;
    let lead = api
        .sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .unwrap();
    let base = api.sandbox.base_url();
    let (status, changed) = post_raw(
        &api.http,
        &format!("{base}/_control/stop"),
        json!({"organizationId": lead.organization_id, "phoneNumber": lead.phone_number}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        changed["changed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["id"] == json!(lead.id))
    );
    let truth: Value = api
        .http
        .get(format!("{base}/_control/truth"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let found = truth["leads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == json!(lead.id))
        .unwrap()
        .clone();
    assert_eq!(found["globalOptedOut"], json!(true));
    let (status, message) = post_raw(&api.http, &format!("{base}/_control/messages"), json!({"leadId": api.sandbox.leads().into_iter().find(|l| !l.global_opted_out).unwrap().id})).await;
    assert_eq!(status, 201, "{message}");
    let (status, advanced) = post_raw(
        &api.http,
        &format!("{base}/_control/messages/advance"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(advanced["changed"].as_array().unwrap().len(), 1);
    let faults = api
        .http
        .put(format!("{base}/_control/faults"))
        .json(&json!({"api": {"rate429": 1.0}}))
        .send()
        .await
        .unwrap();
    assert_eq!(faults.status(), 200);
    assert_eq!(api.get("/organizations").await.0, 429);
}

#[tokio::test(start_paused = true)]
async fn background_activity_sends_and_advances_messages_on_its_own() {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 10,
        activity_interval: Some(std::time::Duration::from_millis(10)),
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    assert!(sandbox.messages().is_empty());
    // Paused time: a second of activity, at most, passes at once.
    let advanced = |m: &outreach_sync_sandbox::SandboxMessage| {
        m.status != "queued" && m.status != "pending_lookup"
    };
    crate::common::within(std::time::Duration::from_secs(1), async || {
        let messages = sandbox.messages();
        messages.len() >= 3 && messages.iter().any(advanced)
    })
    .await;
    let messages = sandbox.messages();
    assert!(messages.len() >= 3, "{} messages", messages.len());
    assert!(messages.iter().any(advanced), "some advanced past queued");
    sandbox.shutdown().await;
}
