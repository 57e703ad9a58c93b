//! The Mobilize fake over HTTP, as the daemon meets it: the key, the filter, the pages, the
//! opt-out and the hostile modes.

use serde_json::{Value, json};

use super::{MOBILIZE_ORGANIZATION_ID, Mobilize, OPT_IN, OPT_OUT};
use crate::destinations::{Fake, FakeFault};
use crate::{DEFAULT_MOBILIZE_KEY, RunningSandbox, Sandbox, SandboxConfig};

async fn sandbox(leads: usize) -> RunningSandbox {
    Sandbox::spawn(SandboxConfig {
        leads,
        ..SandboxConfig::default()
    })
    .await
    .expect("the sandbox starts")
}

/// The people listing's URL with `query`.
fn people(sandbox: &RunningSandbox, query: &str) -> String {
    format!(
        "{}/organizations/{MOBILIZE_ORGANIZATION_ID}/people{query}",
        sandbox.mobilize_url()
    )
}

/// GETs `url` with `key` as the bearer key (none if `None`): the status and the JSON body.
async fn get(url: &str, key: Option<&str>) -> (u16, Value) {
    let mut request = reqwest::Client::new().get(url);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("an answer");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

/// POSTs `body` to the sandbox's control `path`.
async fn control(sandbox: &RunningSandbox, path: &str, body: Value) -> (u16, Value) {
    let url = format!("{}/_control/mobilize{path}", sandbox.base_url());
    let response = reqwest::Client::new()
        .post(&url)
        .json(&body)
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

/// Every person of the listing from `url` on, following `next`; and the pages read.
async fn walk(url: String) -> (Vec<Value>, usize) {
    let mut people = Vec::new();
    let mut next = Some(url);
    let mut pages = 0;
    while let Some(url) = next {
        let (status, page) = get(&url, Some(DEFAULT_MOBILIZE_KEY)).await;
        assert_eq!(status, 200, "{page}");
        pages += 1;
        people.extend(page["data"].as_array().expect("data").iter().cloned());
        next = page["next"].as_str().map(str::to_owned);
    }
    (people, pages)
}

#[tokio::test]
async fn the_seeded_people_are_the_leads_numbers_opted_in() {
    let before = chrono::Utc::now().timestamp();
    let sandbox = sandbox(12).await;
    let mut numbers: Vec<String> = sandbox
        .leads()
        .into_iter()
        .map(|l| l.phone_number)
        .collect();
    numbers.sort();
    numbers.dedup();
    let truth = sandbox.mobilize_truth();
    assert_eq!(truth.organization_id, MOBILIZE_ORGANIZATION_ID);
    let mut seeded: Vec<String> = truth
        .people
        .iter()
        .map(|p| p.phone_numbers[0].number.clone())
        .collect();
    seeded.sort();
    assert_eq!(seeded, numbers);
    for person in &truth.people {
        assert_eq!(person.sms_opt_in_status, OPT_IN);
        assert_eq!(person.person_id, person.id);
        assert_eq!(person.created_date, person.modified_date);
        assert!(person.modified_date >= before, "{person:?}");
        assert!(person.email_addresses[0].address.contains('@'));
    }
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_missing_or_wrong_key_and_an_unknown_organization_are_refused() {
    let sandbox = sandbox(2).await;
    let url = people(&sandbox, "");
    for key in [None, Some("wrong-key")] {
        let (status, body) = get(&url, key).await;
        assert_eq!(status, 403, "{key:?}");
        assert_eq!(body["data"], Value::Null);
        assert!(body["error"]["detail"].is_string(), "{body}");
    }
    let other = format!("{}/organizations/1/people", sandbox.mobilize_url());
    let (status, body) = get(&other, Some(DEFAULT_MOBILIZE_KEY)).await;
    assert_eq!(
        (status, &body["error"]["detail"]),
        (404, &json!("Not found."))
    );
    let (status, body) = get(
        &people(&sandbox, "?per_page=101"),
        Some(DEFAULT_MOBILIZE_KEY),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body["error"]["per_page"][0].is_string(), "{body}");
    assert_eq!(sandbox.mobilize_listings_served(), 0);
    sandbox.shutdown().await;
}

#[tokio::test]
async fn next_walks_every_person_once_in_order_on_the_same_host() {
    let sandbox = sandbox(40).await;
    let (first_status, first) =
        get(&people(&sandbox, "?per_page=7"), Some(DEFAULT_MOBILIZE_KEY)).await;
    assert_eq!(first_status, 200);
    assert_eq!(first["previous"], Value::Null);
    let next = first["next"].as_str().expect("a next link");
    assert!(next.starts_with(&people(&sandbox, "?cursor=")), "{next}");
    let (walked, pages) = walk(people(&sandbox, "?per_page=7")).await;
    let mut expected = sandbox.mobilize_truth().people;
    expected.sort_by_key(|p| (p.modified_date, p.id));
    let ids: Vec<u64> = walked
        .iter()
        .map(|p| p["id"].as_u64().expect("id"))
        .collect();
    assert_eq!(ids, expected.iter().map(|p| p.id).collect::<Vec<_>>());
    assert_eq!(first["count"], json!(expected.len()));
    assert_eq!(pages, expected.len().div_ceil(7));
    assert_eq!(sandbox.mobilize_listings_served(), 1 + pages as u64);
    let (_, default) = get(&people(&sandbox, ""), Some(DEFAULT_MOBILIZE_KEY)).await;
    assert_eq!(default["data"].as_array().map(Vec::len), Some(25));
    sandbox.shutdown().await;
}

#[tokio::test]
async fn updated_since_keeps_the_people_modified_at_or_after_it() {
    let sandbox = sandbox(3).await;
    let old = sandbox.mobilize_add_person("+14155550101", OPT_IN, 1_000);
    let mid = sandbox.mobilize_add_person("+14155550102", OPT_IN, 2_000);
    let (walked, _) = walk(people(&sandbox, "?updated_since=2000")).await;
    let ids: Vec<u64> = walked
        .iter()
        .map(|p| p["id"].as_u64().expect("id"))
        .collect();
    assert!(!ids.contains(&old.id) && ids.contains(&mid.id), "{ids:?}");
    assert_eq!(ids.len(), sandbox.mobilize_truth().people.len() - 1);
    assert_eq!(ids[0], mid.id, "ordered by modified_date");
    let (status, body) = get(
        &people(&sandbox, "?updated_since=yesterday"),
        Some(DEFAULT_MOBILIZE_KEY),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body["error"]["updated_since"][0].is_string(), "{body}");
    sandbox.shutdown().await;
}

#[tokio::test]
async fn an_opt_out_bumps_modified_date_and_the_listing_since_then_shows_it() {
    let sandbox = sandbox(3).await;
    let typed = sandbox.mobilize_add_person("4155550100", OPT_IN, 1_000);
    let (status, body) =
        control(&sandbox, "/opt-out", json!({"phoneNumber": "+14155550100"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["created"], json!(false));
    assert_eq!(body["person"]["id"], json!(typed.id));
    assert_eq!(body["person"]["sms_opt_in_status"], json!(OPT_OUT));
    let modified = body["person"]["modified_date"]
        .as_i64()
        .expect("modified_date");
    assert!(modified > 1_000);
    let (walked, _) = walk(people(&sandbox, &format!("?updated_since={modified}"))).await;
    assert!(walked.iter().any(|p| p["id"] == json!(typed.id)));
    let (status, made) =
        control(&sandbox, "/opt-out", json!({"phoneNumber": "+12025550143"})).await;
    assert_eq!((status, &made["created"]), (200, &json!(true)));
    assert_eq!(
        made["person"]["phone_numbers"][0]["number"],
        json!("+12025550143")
    );
    let (status, _) = control(&sandbox, "/opt-out", json!({"phoneNumber": "call me"})).await;
    assert_eq!(status, 400);
    sandbox.shutdown().await;
}

#[test]
fn an_opt_out_sets_the_status_and_the_time() {
    let mut mobilize = Mobilize::new("k".into(), &[], 0);
    let person = mobilize.add_person("+14155550100", OPT_IN, 1_700_000_000);
    let (after, created) = mobilize
        .opt_out("(415) 555-0100", 1_800_000_000)
        .expect("a number");
    assert!(!created);
    assert_eq!((after.id, after.modified_date), (person.id, 1_800_000_000));
    assert_eq!(after.sms_opt_in_status, OPT_OUT);
    assert_eq!(after.created_date, person.created_date);
}

#[tokio::test]
async fn hostile_modes_a_foreign_next_a_future_date_a_national_number_and_faults() {
    let sandbox = sandbox(30).await;
    let (status, body) = control(
        &sandbox,
        "/person",
        json!({"number": "4155550100", "modifiedDate": 4_102_444_800_i64}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (walked, _) = walk(people(&sandbox, "?updated_since=4102444800")).await;
    assert_eq!(walked.len(), 1);
    assert_eq!(walked[0]["phone_numbers"][0]["number"], json!("4155550100"));
    assert_eq!(walked[0]["sms_opt_in_status"], json!(OPT_IN));
    let foreign = "http://elsewhere.invalid/mobilize/v1/organizations/4242/people?cursor=x";
    sandbox.mobilize_next_href(Some(foreign));
    let (_, first) = get(&people(&sandbox, "?per_page=5"), Some(DEFAULT_MOBILIZE_KEY)).await;
    assert_eq!(first["next"], json!(foreign));
    sandbox.mobilize_next_href(None);
    let (_, first) = get(&people(&sandbox, "?per_page=5"), Some(DEFAULT_MOBILIZE_KEY)).await;
    assert_ne!(first["next"], json!(foreign));
    sandbox.fake_fail_next(
        Fake::Mobilize,
        1,
        FakeFault::Status {
            status: 503,
            retry_after_secs: None,
        },
    );
    let (status, body) = get(&people(&sandbox, ""), Some(DEFAULT_MOBILIZE_KEY)).await;
    assert_eq!((status, &body["data"]), (503, &Value::Null));
    assert!(body["error"]["detail"].is_string());
    assert_eq!(sandbox.mobilize_truth().requests.injected_faults, 1);
    sandbox.shutdown().await;
}
