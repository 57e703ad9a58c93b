//! The fake VAN: authentication, committees, people, canvass responses, phone status.

use outreach_sync_sandbox::{DEFAULT_VAN_KEY, DEFAULT_VAN_KEY_2, SandboxConfig, VanCommittee};
use serde_json::{Value, json};

use super::common::*;

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
