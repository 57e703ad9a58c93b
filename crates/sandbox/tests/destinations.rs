//! The fake VAN and Action Network, rule by rule over raw HTTP, so what is checked is the
//! wire: statuses, error bodies, headers, and what each fake recorded.

use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use outreach_sync_sandbox::destinations::{Fake, FakeFault, HUGE_BODY_BYTES, REDIRECT_ELSEWHERE};
use outreach_sync_sandbox::{
    DEFAULT_ACTION_NETWORK_KEY, DEFAULT_VAN_KEY, DEFAULT_VAN_KEY_2, RunningSandbox, Sandbox,
    SandboxConfig, VanCommittee,
};
use serde_json::{Value, json};

struct Fakes {
    sandbox: RunningSandbox,
    http: reqwest::Client,
}

/// The answer, its body as JSON (null when empty) and its headers.
struct Answer {
    status: u16,
    body: Value,
    headers: reqwest::header::HeaderMap,
}

fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{user}:{password}")))
}

impl Fakes {
    async fn start(config: SandboxConfig) -> Fakes {
        let sandbox = Sandbox::spawn(config).await.expect("sandbox starts");
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        Fakes { sandbox, http }
    }

    async fn default() -> Fakes {
        Self::start(SandboxConfig::default()).await
    }

    async fn answer(request: reqwest::RequestBuilder) -> Answer {
        let response = request.send().await.expect("an answer");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.expect("a body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::String("<not JSON>".into()))
        };
        Answer {
            status,
            body,
            headers,
        }
    }

    /// A VAN request with `authorization` as given (none when `None`).
    fn van_request(
        &self,
        method: reqwest::Method,
        path: &str,
        authorization: Option<String>,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.sandbox.van_url()));
        if let Some(value) = authorization {
            request = request.header("Authorization", value);
        }
        request
    }

    async fn van_get_as(&self, path: &str, key: &str) -> Answer {
        let auth = basic("outreach-sync", &format!("{key}|1"));
        Self::answer(self.van_request(reqwest::Method::GET, path, Some(auth))).await
    }

    async fn van_get(&self, path: &str) -> Answer {
        self.van_get_as(path, DEFAULT_VAN_KEY).await
    }

    async fn van_post_as(&self, path: &str, key: &str, body: Value) -> Answer {
        let auth = basic("outreach-sync", &format!("{key}|1"));
        Self::answer(
            self.van_request(reqwest::Method::POST, path, Some(auth))
                .json(&body),
        )
        .await
    }

    async fn van_post(&self, path: &str, body: Value) -> Answer {
        self.van_post_as(path, DEFAULT_VAN_KEY, body).await
    }

    /// The id of a result code or contact type of the committee of `key`, by name.
    async fn van_id_of(&self, key: &str, list: &str, name: &str) -> u64 {
        let (path, field) = match list {
            "resultCodes" => ("/canvassResponses/resultCodes", "resultCodeId"),
            _ => ("/canvassResponses/contactTypes", "contactTypeId"),
        };
        let answer = self.van_get_as(path, key).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer
            .body
            .as_array()
            .expect("a list")
            .iter()
            .find(|item| item["name"] == name)
            .and_then(|item| item[field].as_u64())
            .unwrap_or_else(|| panic!("{name} in {list}: {}", answer.body))
    }

    /// A seeded person's VAN ID and national number.
    fn a_van_person(&self) -> (u64, String) {
        let truth = self.sandbox.van_truth();
        let person = truth.people.first().expect("seeded VAN people");
        (person.van_id, person.phones[0].phone_number.clone())
    }

    async fn an_post(&self, token: Option<&str>, body: Value) -> Answer {
        let mut request = self
            .http
            .post(format!("{}/people", self.sandbox.action_network_url()));
        if let Some(token) = token {
            request = request.header("OSDI-API-Token", token);
        }
        Self::answer(request.json(&body)).await
    }

    async fn an_signup(&self, number: &str, status: &str) -> Answer {
        self.an_post(
            Some(DEFAULT_ACTION_NETWORK_KEY),
            json!({"person": {"phone_numbers": [{"number": number, "number_type": "Mobile", "status": status}]}}),
        )
        .await
    }

    async fn control(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Answer {
        let mut request = self.http.request(
            method,
            format!("{}/_control{path}", self.sandbox.base_url()),
        );
        if let Some(body) = body {
            request = request.json(&body);
        }
        Self::answer(request).await
    }
}

/// A canvass response as the daemon sends it.
fn do_not_text(result_code: u64, contact_type: u64, phone: &str) -> Value {
    json!({
        "canvassContext": {
            "contactTypeId": contact_type,
            "inputTypeId": 11,
            "dateCanvassed": "2026-11-26T12:00:00Z",
            "phone": {"dialingPrefix": "1", "phoneNumber": phone}
        },
        "resultCodeId": result_code,
        "responses": null
    })
}

fn first_error(answer: &Answer) -> &Value {
    &answer.body["errors"][0]
}

fn properties(answer: &Answer) -> Vec<String> {
    answer.body["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|e| e["properties"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn van_takes_basic_auth_with_the_application_name_and_the_mode_suffix() {
    let fakes = Fakes::default().await;
    let path = "/canvassResponses/resultCodes";
    for (what, auth) in [
        ("no credentials", None),
        ("no mode", Some(basic("app", DEFAULT_VAN_KEY))),
        (
            "mode 2",
            Some(basic("app", &format!("{DEFAULT_VAN_KEY}|2"))),
        ),
        ("unknown key", Some(basic("app", "not-a-key|1"))),
        (
            "no application name",
            Some(basic("", &format!("{DEFAULT_VAN_KEY}|1"))),
        ),
        ("bearer", Some("Bearer sandbox-van-key".to_owned())),
    ] {
        let answer = Fakes::answer(fakes.van_request(reqwest::Method::GET, path, auth)).await;
        assert_eq!(answer.status, 401, "{what}: {}", answer.body);
        assert!(
            first_error(&answer)["code"].is_string() && first_error(&answer)["text"].is_string(),
            "{what}: VAN's error body: {}",
            answer.body
        );
        assert!(
            !answer.body.to_string().contains(DEFAULT_VAN_KEY),
            "{what}: the key is never echoed: {}",
            answer.body
        );
    }
    for mode in ["0", "1"] {
        let auth = basic("app", &format!("{DEFAULT_VAN_KEY}|{mode}"));
        let answer = Fakes::answer(fakes.van_request(reqwest::Method::GET, path, Some(auth))).await;
        assert_eq!(answer.status, 200, "mode {mode}: {}", answer.body);
    }
}

#[tokio::test]
async fn each_committee_has_its_own_ids_and_none_is_a_common_default() {
    let fakes = Fakes::default().await;
    let codes = fakes.van_get("/canvassResponses/resultCodes").await;
    assert_eq!(codes.status, 200);
    for field in ["resultCodeId", "name", "shortName", "mediumName"] {
        assert!(
            codes.body[0].get(field).is_some(),
            "{field} in a result code: {}",
            codes.body
        );
    }
    let types = fakes.van_get("/canvassResponses/contactTypes").await;
    for field in ["contactTypeId", "name", "channelTypeName"] {
        assert!(
            types.body[0].get(field).is_some(),
            "{field} in a contact type: {}",
            types.body
        );
    }
    let dnt = [
        fakes
            .van_id_of(DEFAULT_VAN_KEY, "resultCodes", "Do Not Text")
            .await,
        fakes
            .van_id_of(DEFAULT_VAN_KEY_2, "resultCodes", "Do Not Text")
            .await,
    ];
    let sms = [
        fakes
            .van_id_of(DEFAULT_VAN_KEY, "contactTypes", "SMS Text")
            .await,
        fakes
            .van_id_of(DEFAULT_VAN_KEY_2, "contactTypes", "SMS Text")
            .await,
    ];
    assert_ne!(dnt[0], dnt[1], "Do Not Text differs per committee");
    assert_ne!(sms[0], sms[1], "SMS Text differs per committee");
    assert!(!dnt.contains(&130), "{dnt:?}");
    assert!(!sms.contains(&37), "{sms:?}");
}

#[tokio::test]
async fn a_committee_can_lack_sms_text_by_configuration_or_by_switch() {
    let mut committees = outreach_sync_sandbox::default_van_committees();
    committees[1].sms_text = false;
    let fakes = Fakes::start(SandboxConfig {
        van_committees: committees,
        ..SandboxConfig::default()
    })
    .await;
    let names = |answer: &Answer| -> Vec<String> {
        answer
            .body
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    };
    let second = fakes
        .van_get_as("/canvassResponses/contactTypes", DEFAULT_VAN_KEY_2)
        .await;
    assert!(
        !names(&second).contains(&"SMS Text".to_owned()),
        "{}",
        second.body
    );
    assert!(names(&second).contains(&"Phone".to_owned()));

    let sms = fakes
        .van_id_of(DEFAULT_VAN_KEY, "contactTypes", "SMS Text")
        .await;
    let dnt = fakes
        .van_id_of(DEFAULT_VAN_KEY, "resultCodes", "Do Not Text")
        .await;
    let switched = fakes
        .control(
            reqwest::Method::POST,
            "/van/sms_text",
            Some(json!({"apiKey": DEFAULT_VAN_KEY, "present": false})),
        )
        .await;
    assert_eq!(switched.status, 204);
    let first = fakes.van_get("/canvassResponses/contactTypes").await;
    assert!(
        !names(&first).contains(&"SMS Text".to_owned()),
        "{}",
        first.body
    );
    let (van_id, phone) = fakes.a_van_person();
    let refused = fakes
        .van_post(
            &format!("/people/{van_id}/canvassResponses"),
            do_not_text(dnt, sms, &phone),
        )
        .await;
    assert_eq!(refused.status, 400, "a contact type it lacks is unknown");
    assert!(fakes.sandbox.van_set_sms_text(DEFAULT_VAN_KEY, true));
    let back = fakes.van_get("/canvassResponses/contactTypes").await;
    assert!(names(&back).contains(&"SMS Text".to_owned()));
}

#[tokio::test]
async fn most_seeded_leads_carry_a_van_id_that_a_van_person_with_their_number_has() {
    let fakes = Fakes::start(SandboxConfig {
        leads: 44,
        ..SandboxConfig::default()
    })
    .await;
    let leads = fakes.sandbox.leads();
    let with: Vec<_> = leads
        .iter()
        .filter_map(|l| l.custom_fields.get("VanID").map(|id| (l, id.clone())))
        .collect();
    assert_eq!(with.len(), 40, "ten in eleven");
    let people = fakes.sandbox.van_truth().people;
    for (lead, van_id) in &with {
        let van_id: u64 = van_id.parse().expect("an integer");
        let person = people
            .iter()
            .find(|p| p.van_id == van_id)
            .expect("a VAN person");
        assert_eq!(
            format!(
                "+{}{}",
                person.phones[0].dialing_prefix, person.phones[0].phone_number
            ),
            lead.phone_number
        );
        assert_eq!(person.lead_id.as_deref(), Some(lead.id.as_str()));
    }

    // And the service lists it among the lead's custom fields.
    let token = fakes
        .http
        .post(format!("{}/v3/oauth/token", fakes.sandbox.base_url()))
        .json(&json!({"grant_type": "client_credentials", "client_id": "sandbox@example.org", "client_secret": "sandbox-secret"}))
        .send()
        .await
        .expect("token")
        .json::<Value>()
        .await
        .expect("JSON");
    let listed: Value = fakes
        .http
        .get(format!("{}/v3/leads?limit=100", fakes.sandbox.base_url()))
        .bearer_auth(token["access_token"].as_str().expect("token"))
        .send()
        .await
        .expect("leads")
        .json()
        .await
        .expect("JSON");
    let listed_with = listed["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|l| l["customFields"]["VanID"].is_string())
        .count();
    assert_eq!(listed_with, 40);
}

#[tokio::test]
async fn a_canvass_response_is_answered_204_and_recorded_with_its_committee() {
    let fakes = Fakes::default().await;
    let (van_id, phone) = fakes.a_van_person();
    let dnt = fakes
        .van_id_of(DEFAULT_VAN_KEY_2, "resultCodes", "Do Not Text")
        .await;
    let sms = fakes
        .van_id_of(DEFAULT_VAN_KEY_2, "contactTypes", "SMS Text")
        .await;
    let answer = fakes
        .van_post_as(
            &format!("/people/{van_id}/canvassResponses"),
            DEFAULT_VAN_KEY_2,
            do_not_text(dnt, sms, &phone),
        )
        .await;
    assert_eq!(answer.status, 204, "{}", answer.body);
    assert_eq!(answer.body, Value::Null, "no content");
    let truth = fakes.sandbox.van_truth();
    let [recorded] = truth.canvass_responses.as_slice() else {
        panic!("one canvass response: {:?}", truth.canvass_responses);
    };
    assert_eq!(recorded.van_id, van_id);
    assert_eq!(recorded.committee, "Sandbox Party");
    assert_eq!(recorded.database_mode, 1);
    assert_eq!(recorded.result_code_id.map(u64::from), Some(dnt));
    assert_eq!(recorded.contact_type_id.map(u64::from), Some(sms));
    assert_eq!(recorded.input_type_id, Some(11));
    let recorded_phone = recorded.phone.as_ref().expect("the phone");
    assert_eq!(recorded_phone.phone_number, phone);
    assert_eq!(recorded_phone.dialing_prefix.as_deref(), Some("1"));
    assert_eq!(
        recorded.date_canvassed.as_deref(),
        Some("2026-11-26T12:00:00Z")
    );
    assert!(!recorded.at.is_empty());

    // The same truth over HTTP.
    let over_http = fakes.control(reqwest::Method::GET, "/van", None).await;
    assert_eq!(over_http.status, 200);
    assert_eq!(over_http.body["canvassResponses"][0]["vanId"], van_id);
    assert_eq!(over_http.body["requests"]["byStatus"]["204"], 1);
}

#[tokio::test]
async fn a_canvass_response_for_an_unknown_van_id_is_404_with_errors() {
    let fakes = Fakes::default().await;
    let dnt = fakes
        .van_id_of(DEFAULT_VAN_KEY, "resultCodes", "Do Not Text")
        .await;
    let sms = fakes
        .van_id_of(DEFAULT_VAN_KEY, "contactTypes", "SMS Text")
        .await;
    for id in ["999", "not-a-number"] {
        let answer = fakes
            .van_post(
                &format!("/people/{id}/canvassResponses"),
                do_not_text(dnt, sms, "2025550143"),
            )
            .await;
        assert_eq!(answer.status, 404, "{id}: {}", answer.body);
        assert!(first_error(&answer)["text"].is_string(), "{}", answer.body);
    }
    assert!(fakes.sandbox.van_truth().canvass_responses.is_empty());
}

#[tokio::test]
async fn each_bad_canvass_response_is_a_400_naming_its_properties() {
    let fakes = Fakes::default().await;
    let (van_id, phone) = fakes.a_van_person();
    let path = format!("/people/{van_id}/canvassResponses");
    let dnt = fakes
        .van_id_of(DEFAULT_VAN_KEY, "resultCodes", "Do Not Text")
        .await;
    let sms = fakes
        .van_id_of(DEFAULT_VAN_KEY, "contactTypes", "SMS Text")
        .await;
    let phone_type = fakes
        .van_id_of(DEFAULT_VAN_KEY, "contactTypes", "Phone")
        .await;
    let other_dnt = fakes
        .van_id_of(DEFAULT_VAN_KEY_2, "resultCodes", "Do Not Text")
        .await;
    let mut both = do_not_text(dnt, sms, &phone);
    both["responses"] = json!([{"type": "ActivistCode", "activistCodeId": 1, "action": "Apply"}]);
    let mut neither = do_not_text(dnt, sms, &phone);
    neither["resultCodeId"] = Value::Null;
    let mut no_phone = do_not_text(dnt, sms, &phone);
    no_phone["canvassContext"]
        .as_object_mut()
        .expect("object")
        .remove("phone");
    for (what, body, property) in [
        ("both", both, "responses"),
        ("neither", neither, "resultCodeId"),
        (
            "unknown contact type",
            do_not_text(dnt, 37, &phone),
            "canvassContext.contactTypeId",
        ),
        (
            "unknown result code",
            do_not_text(130, sms, &phone),
            "resultCodeId",
        ),
        (
            "another committee's result code",
            do_not_text(other_dnt, sms, &phone),
            "resultCodeId",
        ),
        (
            "an SMS contact type without a phone",
            no_phone,
            "canvassContext.phone",
        ),
    ] {
        let answer = fakes.van_post(&path, body).await;
        assert_eq!(answer.status, 400, "{what}: {}", answer.body);
        assert_eq!(first_error(&answer)["code"], "INVALID_PARAMETER", "{what}");
        assert!(first_error(&answer)["text"].is_string(), "{what}");
        assert!(
            properties(&answer).contains(&property.to_owned()),
            "{what}: {property} in {}",
            answer.body
        );
    }
    // A phone contact type needs no phone.
    let mut by_phone = do_not_text(dnt, phone_type, &phone);
    by_phone["canvassContext"]
        .as_object_mut()
        .expect("object")
        .remove("phone");
    assert_eq!(fakes.van_post(&path, by_phone).await.status, 204);

    let auth = basic("app", &format!("{DEFAULT_VAN_KEY}|1"));
    let malformed = Fakes::answer(
        fakes
            .van_request(reqwest::Method::POST, &path, Some(auth))
            .header("Content-Type", "application/json")
            .body("{\"resultCodeId\": "),
    )
    .await;
    assert_eq!(malformed.status, 400);
    assert!(
        first_error(&malformed)["code"].is_string(),
        "{}",
        malformed.body
    );
    assert_eq!(
        fakes.sandbox.van_truth().canvass_responses.len(),
        1,
        "only the good one is recorded"
    );
}

#[tokio::test]
async fn a_phone_status_update_answers_the_match_response_and_sets_the_opt_in() {
    let fakes = Fakes::default().await;
    let (van_id, phone) = fakes.a_van_person();
    let answer = fakes
        .van_post(
            &format!("/people/{van_id}"),
            json!({"vanId": van_id, "phones": [{"phoneNumber": phone, "phoneType": "C", "phoneOptInStatus": "O"}]}),
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        answer.body,
        json!({"vanId": van_id, "status": "UpdatedExistingRecord"})
    );
    let truth = fakes.sandbox.van_truth();
    let person = truth
        .people
        .iter()
        .find(|p| p.van_id == van_id)
        .expect("the person");
    assert_eq!(person.phones.len(), 1, "the same phone, updated");
    assert_eq!(person.phones[0].phone_opt_in_status.as_deref(), Some("O"));

    let expanded = fakes
        .van_get(&format!("/people/{van_id}?$expand=phones"))
        .await;
    assert_eq!(expanded.body["phones"][0]["phoneOptInStatus"], "O");

    let unknown = fakes
        .van_post(
            "/people/999",
            json!({"vanId": 999, "phones": [{"phoneNumber": phone, "phoneOptInStatus": "O"}]}),
        )
        .await;
    assert_eq!(unknown.status, 404);
    assert!(first_error(&unknown)["text"].is_string());
    for (what, body, property) in [
        (
            "a bad status",
            json!({"vanId": van_id, "phones": [{"phoneNumber": phone, "phoneOptInStatus": "X"}]}),
            "phones[0].phoneOptInStatus",
        ),
        (
            "no number",
            json!({"vanId": van_id, "phones": [{"phoneOptInStatus": "O"}]}),
            "phones[0].phoneNumber",
        ),
        (
            "another person's id",
            json!({"vanId": van_id + 1, "phones": [{"phoneNumber": phone, "phoneOptInStatus": "O"}]}),
            "vanId",
        ),
    ] {
        let answer = fakes.van_post(&format!("/people/{van_id}"), body).await;
        assert_eq!(answer.status, 400, "{what}: {}", answer.body);
        assert!(
            properties(&answer).contains(&property.to_owned()),
            "{what}: {}",
            answer.body
        );
    }
}

#[tokio::test]
async fn a_revoked_key_is_refused_until_restored() {
    let fakes = Fakes::default().await;
    let path = "/canvassResponses/resultCodes";
    assert!(fakes.sandbox.van_revoke(DEFAULT_VAN_KEY, Some(403)));
    let forbidden = fakes.van_get(path).await;
    assert_eq!(forbidden.status, 403);
    assert!(first_error(&forbidden)["text"].is_string());
    assert_eq!(
        fakes.van_get_as(path, DEFAULT_VAN_KEY_2).await.status,
        200,
        "the other committee is untouched"
    );
    let over_http = fakes
        .control(
            reqwest::Method::POST,
            "/van/revoke",
            Some(json!({"apiKey": DEFAULT_VAN_KEY, "status": 401})),
        )
        .await;
    assert_eq!(over_http.status, 204);
    assert_eq!(fakes.van_get(path).await.status, 401);
    assert!(fakes.sandbox.van_revoke(DEFAULT_VAN_KEY, None));
    assert_eq!(fakes.van_get(path).await.status, 200);
    assert!(!fakes.sandbox.van_revoke("nobody's key", Some(401)));
}

#[tokio::test]
async fn queued_statuses_answer_in_order_then_the_fake_answers_again() {
    let fakes = Fakes::default().await;
    let path = "/canvassResponses/resultCodes";
    fakes.sandbox.fake_fail_next(
        Fake::Van,
        2,
        FakeFault::Status {
            status: 500,
            retry_after_secs: None,
        },
    );
    fakes.sandbox.fake_fail_next(
        Fake::Van,
        1,
        FakeFault::Status {
            status: 429,
            retry_after_secs: Some(7),
        },
    );
    for status in [401, 403] {
        fakes.sandbox.fake_fail_next(
            Fake::Van,
            1,
            FakeFault::Status {
                status,
                retry_after_secs: None,
            },
        );
    }
    for expected in [500, 500, 429, 401, 403, 200] {
        let answer = fakes.van_get(path).await;
        assert_eq!(answer.status, expected, "{}", answer.body);
        if expected == 429 {
            assert_eq!(
                answer
                    .headers
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok()),
                Some("7")
            );
        }
        if expected != 200 {
            assert!(first_error(&answer)["code"].is_string(), "{}", answer.body);
        }
    }
    let counts = fakes.sandbox.van_truth().requests;
    assert_eq!(counts.total, 6);
    assert_eq!(counts.injected_faults, 5);
    assert_eq!(counts.by_status.get(&500), Some(&2));
}

#[tokio::test]
async fn garbage_a_redirect_and_a_huge_body_are_answered_when_asked() {
    let fakes = Fakes::default().await;
    let path = "/canvassResponses/resultCodes";
    for fault in [
        FakeFault::Garbage,
        FakeFault::Redirect { location: None },
        FakeFault::Huge,
    ] {
        fakes.sandbox.fake_fail_next(Fake::Van, 1, fault);
    }
    let auth = basic("app", &format!("{DEFAULT_VAN_KEY}|1"));
    let garbage = fakes
        .van_request(reqwest::Method::GET, path, Some(auth.clone()))
        .send()
        .await
        .expect("answer");
    assert_eq!(garbage.status(), 200);
    let bytes = garbage.bytes().await.expect("body");
    assert!(serde_json::from_slice::<Value>(&bytes).is_err(), "not JSON");

    let redirect = fakes
        .van_request(reqwest::Method::GET, path, Some(auth.clone()))
        .send()
        .await
        .expect("answer");
    assert_eq!(redirect.status(), 301);
    let location = redirect
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .expect("a location");
    assert!(location.starts_with(REDIRECT_ELSEWHERE), "{location}");
    assert!(!location.contains(&fakes.sandbox.addr().to_string()));

    let huge = fakes
        .van_request(reqwest::Method::GET, path, Some(auth))
        .send()
        .await
        .expect("answer");
    assert_eq!(huge.status(), 200);
    assert_eq!(huge.bytes().await.expect("body").len(), HUGE_BODY_BYTES);
    assert_eq!(fakes.van_get(path).await.status, 200, "then normal again");
}

#[tokio::test]
async fn a_hung_request_never_answers_and_does_not_hold_up_shutdown() {
    let fakes = Fakes::default().await;
    fakes
        .sandbox
        .fake_fail_next(Fake::ActionNetwork, 1, FakeFault::Hang);
    let hung = fakes
        .http
        .post(format!("{}/people", fakes.sandbox.action_network_url()))
        .header("OSDI-API-Token", DEFAULT_ACTION_NETWORK_KEY)
        .json(&json!({"person": {"phone_numbers": [{"number": "12025550143", "status": "unsubscribed"}]}}))
        .timeout(Duration::from_millis(300))
        .send()
        .await;
    assert!(hung.is_err_and(|e| e.is_timeout()), "no answer in time");
    let next = fakes.an_signup("12025550143", "unsubscribed").await;
    assert_eq!(next.status, 200, "the next request is answered");
    assert_eq!(fakes.sandbox.action_network_truth().requests.total, 2);

    // One more hangs while the sandbox stops: the stop does not wait for it.
    fakes
        .sandbox
        .fake_fail_next(Fake::ActionNetwork, 1, FakeFault::Hang);
    let request = fakes
        .http
        .post(format!("{}/people", fakes.sandbox.action_network_url()))
        .header("OSDI-API-Token", DEFAULT_ACTION_NETWORK_KEY)
        .json(&json!({"person": {"phone_numbers": [{"number": "12025550143"}]}}))
        .send();
    let pending = tokio::spawn(request);
    let deadline = Instant::now() + Duration::from_secs(5);
    while fakes.sandbox.action_network_truth().requests.total < 3 {
        assert!(Instant::now() < deadline, "the request arrives");
        tokio::task::yield_now().await;
    }
    tokio::time::timeout(Duration::from_secs(5), fakes.sandbox.shutdown())
        .await
        .expect("shutdown does not wait on a hung request");
    pending.abort();
}

#[tokio::test]
async fn latency_delays_every_answer_until_cleared() {
    let fakes = Fakes::default().await;
    let path = "/canvassResponses/resultCodes";
    fakes
        .sandbox
        .fake_latency(Fake::Van, Duration::from_millis(250));
    let started = Instant::now();
    assert_eq!(fakes.van_get(path).await.status, 200);
    assert!(started.elapsed() >= Duration::from_millis(250));
    let set = fakes
        .control(reqwest::Method::PUT, "/van/latency", Some(json!({"ms": 0})))
        .await;
    assert_eq!(set.body["latencyMs"], 0);
    let started = Instant::now();
    assert_eq!(fakes.van_get(path).await.status, 200);
    assert!(started.elapsed() < Duration::from_millis(250));
}

#[tokio::test]
async fn action_network_wants_its_token() {
    let fakes = Fakes::default().await;
    for token in [None, Some("wrong-key")] {
        let answer = fakes
            .an_post(
                token,
                json!({"person": {"phone_numbers": [{"number": "12025550143", "status": "unsubscribed"}]}}),
            )
            .await;
        assert_eq!(answer.status, 401, "{token:?}");
        assert!(answer.body["error"].is_string(), "{}", answer.body);
    }
    assert!(fakes.sandbox.action_network_truth().people.is_empty());
}

#[tokio::test]
async fn the_signup_helper_creates_then_matches_by_number() {
    let fakes = Fakes::default().await;
    let created = fakes.an_signup("12025550143", "subscribed").await;
    assert_eq!(created.status, 200, "{}", created.body);
    let identifier = created.body["identifiers"][0]
        .as_str()
        .expect("an identifier")
        .to_owned();
    let uuid = identifier
        .strip_prefix("action_network:")
        .expect("action_network:<uuid>");
    assert_eq!(uuid.len(), 36, "{uuid}");
    for field in [
        "created_date",
        "modified_date",
        "phone_numbers",
        "email_addresses",
    ] {
        assert!(
            created.body.get(field).is_some(),
            "{field}: {}",
            created.body
        );
    }
    assert!(
        created.body["_links"]["self"]["href"]
            .as_str()
            .is_some_and(|href| href.ends_with(uuid)),
        "{}",
        created.body
    );
    assert_eq!(created.body["phone_numbers"][0]["status"], "subscribed");

    let matched = fakes.an_signup("12025550143", "unsubscribed").await;
    assert_eq!(matched.status, 200);
    assert_eq!(matched.body["identifiers"][0], identifier.as_str());
    assert_eq!(matched.body["phone_numbers"][0]["status"], "unsubscribed");
    assert_eq!(matched.body["phone_numbers"][0]["number"], "12025550143");

    let truth = fakes.sandbox.action_network_truth();
    assert_eq!(truth.people.len(), 1, "matched, not made twice");
    assert_eq!(truth.people[0].phone_numbers[0].status, "unsubscribed");
    let created_flags: Vec<bool> = truth.signups.iter().map(|s| s.created).collect();
    assert_eq!(created_flags, [true, false]);
    let over_http = fakes
        .control(reqwest::Method::GET, "/actionnetwork", None)
        .await;
    assert_eq!(
        over_http.body["signups"][1]["phoneNumbers"][0]["status"],
        "unsubscribed"
    );
    assert_eq!(over_http.body["requests"]["total"], 2);
}

#[tokio::test]
async fn a_signup_without_a_number_or_email_or_with_a_bad_status_is_400() {
    let fakes = Fakes::default().await;
    for (what, body) in [
        ("nothing", json!({"person": {"given_name": "Ida"}})),
        ("no person", json!({"add_tags": ["x"]})),
        (
            "a bad status",
            json!({"person": {"phone_numbers": [{"number": "12025550143", "status": "maybe"}]}}),
        ),
        (
            "a bad number",
            json!({"person": {"phone_numbers": [{"number": "call me", "status": "subscribed"}]}}),
        ),
    ] {
        let answer = fakes.an_post(Some(DEFAULT_ACTION_NETWORK_KEY), body).await;
        assert_eq!(answer.status, 400, "{what}: {}", answer.body);
        assert!(answer.body["error"].is_string(), "{what}: {}", answer.body);
    }
    let email_only = fakes
        .an_post(
            Some(DEFAULT_ACTION_NETWORK_KEY),
            json!({"person": {"email_addresses": [{"address": "ida@example.org"}]}}),
        )
        .await;
    assert_eq!(email_only.status, 200, "an email alone is enough");
    assert_eq!(fakes.sandbox.action_network_truth().people.len(), 1);
}

#[tokio::test]
async fn action_network_faults_are_set_over_http_too() {
    let fakes = Fakes::default().await;
    let queued = fakes
        .control(
            reqwest::Method::POST,
            "/actionnetwork/faults",
            Some(json!({"count": 1, "fault": {"kind": "status", "status": 429, "retryAfterSecs": 3}})),
        )
        .await;
    assert_eq!(queued.status, 200, "{}", queued.body);
    let garbage = fakes
        .control(
            reqwest::Method::POST,
            "/actionnetwork/faults",
            Some(json!({"fault": {"kind": "garbage"}})),
        )
        .await;
    assert_eq!(garbage.body["queued"].as_array().map(Vec::len), Some(2));
    let limited = fakes.an_signup("12025550143", "unsubscribed").await;
    assert_eq!(limited.status, 429);
    assert_eq!(
        limited
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("3")
    );
    assert!(limited.body["error"].is_string(), "{}", limited.body);
    let not_json = fakes.an_signup("12025550143", "unsubscribed").await;
    assert_eq!(not_json.body, Value::String("<not JSON>".into()));
    assert!(fakes.sandbox.action_network_truth().people.is_empty());
    let refused = fakes
        .control(
            reqwest::Method::POST,
            "/actionnetwork/faults",
            Some(json!({"fault": {"kind": "status", "status": 200}})),
        )
        .await;
    assert_eq!(refused.status, 400, "200 is not a fault");
    assert_eq!(
        fakes.an_signup("12025550143", "unsubscribed").await.status,
        200
    );
    // The VAN fake was never touched.
    assert_eq!(fakes.sandbox.van_truth().requests.total, 0);
}

#[tokio::test]
async fn committees_come_from_the_configuration() {
    let fakes = Fakes::start(SandboxConfig {
        van_committees: vec![VanCommittee::new("Only", "only-key")],
        ..SandboxConfig::default()
    })
    .await;
    assert_eq!(
        fakes
            .van_get_as("/canvassResponses/resultCodes", "only-key")
            .await
            .status,
        200
    );
    assert_eq!(
        fakes
            .van_get_as("/canvassResponses/resultCodes", DEFAULT_VAN_KEY)
            .await
            .status,
        401
    );
    let truth = fakes.sandbox.van_truth();
    assert_eq!(truth.committees.len(), 1);
    assert_eq!(truth.committees[0].name, "Only");
}

#[tokio::test]
async fn an_unknown_path_is_answered_in_each_fake_s_own_words() {
    let fakes = Fakes::default().await;
    let van = fakes.van_get("/nothing/here").await;
    assert_eq!(van.status, 404);
    assert!(first_error(&van)["text"].is_string(), "{}", van.body);
    let action_network = Fakes::answer(
        fakes
            .http
            .get(format!("{}/nothing", fakes.sandbox.action_network_url()))
            .header("OSDI-API-Token", DEFAULT_ACTION_NETWORK_KEY),
    )
    .await;
    assert_eq!(action_network.status, 404);
    assert!(
        action_network.body["error"].is_string(),
        "{}",
        action_network.body
    );
    // The service's own answer elsewhere is unchanged.
    let service = Fakes::answer(
        fakes
            .http
            .get(format!("{}/v9/nothing", fakes.sandbox.base_url())),
    )
    .await;
    assert_eq!(service.status, 404);
    assert_eq!(service.body["code"], 404, "{}", service.body);
}
