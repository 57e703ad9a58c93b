//! The Mobile Commons fake over HTTP, as the daemon meets it: the credentials, the pages, the
//! window, the opt-out and the hostile modes; every answer read back as XML.

use std::collections::HashMap;

use chrono::{TimeZone as _, Utc};
use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};
use serde_json::{Value, json};

use super::{
    ACTIVE_SUBSCRIBER, INVALID_PHONE_NUMBER, MobileCommons, NO_SUBSCRIPTIONS, OPT_OUT_FROM_API,
    TEXTED_STOP, UNDELIVERABLE,
};
use crate::destinations::{Fake, FakeFault};
use crate::{
    DEFAULT_MOBILE_COMMONS_PASSWORD, DEFAULT_MOBILE_COMMONS_USERNAME, RunningSandbox, Sandbox,
    SandboxConfig,
};

async fn sandbox(leads: usize) -> RunningSandbox {
    Sandbox::spawn(SandboxConfig {
        leads,
        ..SandboxConfig::default()
    })
    .await
    .expect("the sandbox starts")
}

/// An answer read as XML: `<response success>`, `<profiles num page>`, each profile's
/// fields (the `id` and each child element's text), `<error id message>`.
#[derive(Debug, Default)]
struct Answer {
    success: Option<bool>,
    num: Option<usize>,
    page: Option<usize>,
    profiles: Vec<HashMap<String, String>>,
    error: Option<(String, String)>,
}

/// The attributes of `element`, unescaped.
fn attributes(element: &BytesStart<'_>) -> HashMap<String, String> {
    element
        .attributes()
        .map(|a| {
            let a = a.expect("an attribute");
            let key = String::from_utf8_lossy(a.key.as_ref()).into_owned();
            (
                key,
                a.normalized_value(XmlVersion::Implicit1_0)
                    .expect("a value")
                    .into_owned(),
            )
        })
        .collect()
}

/// `text` read as XML, or a panic if it is not well-formed.
fn read(text: &str) -> Answer {
    let mut reader = Reader::from_str(text);
    let mut answer = Answer::default();
    let mut stack: Vec<String> = Vec::new();
    let mut buffer = String::new();
    loop {
        let event = reader.read_event().expect("well-formed XML");
        let (name, attrs, empty) = match &event {
            Event::Start(e) | Event::Empty(e) => (
                String::from_utf8_lossy(e.name().as_ref()).into_owned(),
                attributes(e),
                matches!(event, Event::Empty(_)),
            ),
            Event::Text(t) => {
                buffer.push_str(&t.decode().expect("UTF-8"));
                continue;
            }
            Event::GeneralRef(r) => {
                let c = match r.resolve_char_ref().expect("a character") {
                    Some(c) => c,
                    None => match &*r.decode().expect("UTF-8") {
                        "amp" => '&',
                        "lt" => '<',
                        "gt" => '>',
                        "quot" => '"',
                        "apos" => '\'',
                        other => panic!("unknown entity {other}"),
                    },
                };
                buffer.push(c);
                continue;
            }
            Event::End(_) => {
                let name = stack.pop().expect("an open element");
                if stack.last().map(String::as_str) == Some("profile")
                    && let Some(profile) = answer.profiles.last_mut()
                {
                    profile.insert(name, std::mem::take(&mut buffer));
                }
                buffer.clear();
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        match name.as_str() {
            "response" => answer.success = attrs.get("success").map(|s| s == "true"),
            "profiles" => {
                answer.num = attrs.get("num").and_then(|n| n.parse().ok());
                answer.page = attrs.get("page").and_then(|n| n.parse().ok());
            }
            "profile" if stack.last().map(String::as_str) != Some("profile") => {
                let id = attrs.get("id").cloned().unwrap_or_default();
                answer.profiles.push(HashMap::from([("id".to_owned(), id)]));
            }
            "error" => {
                answer.error = Some((
                    attrs.get("id").cloned().unwrap_or_default(),
                    attrs.get("message").cloned().unwrap_or_default(),
                ));
            }
            _ => {}
        }
        if empty {
            if stack.last().map(String::as_str) == Some("profile")
                && let Some(profile) = answer.profiles.last_mut()
            {
                profile.insert(name, String::new());
            }
        } else {
            stack.push(name);
            buffer.clear();
        }
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    answer
}

/// The credentials a request carries: the sandbox's, others, or none.
#[derive(Clone, Copy)]
enum Login<'a> {
    Sandbox,
    Other(&'a str, &'a str),
    /// The password as a bearer token: not the company's token.
    Bearer,
    /// The company's API token, as a bearer token.
    Token,
    None,
}

fn with_login(request: reqwest::RequestBuilder, login: Login<'_>) -> reqwest::RequestBuilder {
    match login {
        Login::Sandbox => request.basic_auth(
            DEFAULT_MOBILE_COMMONS_USERNAME,
            Some(DEFAULT_MOBILE_COMMONS_PASSWORD),
        ),
        Login::Other(user, password) => request.basic_auth(user, Some(password)),
        Login::Bearer => request.bearer_auth(DEFAULT_MOBILE_COMMONS_PASSWORD),
        Login::Token => request.bearer_auth(crate::DEFAULT_MOBILE_COMMONS_TOKEN),
        Login::None => request,
    }
}

/// GETs the profiles with `query`: the status, the headers and the body.
async fn profiles_raw(
    sandbox: &RunningSandbox,
    query: &str,
    login: Login<'_>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let url = format!("{}/profiles{query}", sandbox.mobile_commons_url());
    let response = with_login(reqwest::Client::new().get(&url), login)
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.expect("a body"))
}

/// GETs the profiles with `query` and the sandbox's login: 200, read as XML.
async fn profiles(sandbox: &RunningSandbox, query: &str) -> Answer {
    let (status, headers, body) = profiles_raw(sandbox, query, Login::Sandbox).await;
    assert_eq!(status, 200, "{body}");
    let kind = headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    assert!(kind.starts_with("application/xml"), "{kind}");
    read(&body)
}

/// Every profile from page 1 on, `limit` a page, until an empty page; and the pages read
/// (the empty one included).
async fn walk(
    sandbox: &RunningSandbox,
    query: &str,
    limit: usize,
) -> (Vec<HashMap<String, String>>, usize) {
    let mut seen = Vec::new();
    for page in 1.. {
        let answer = profiles(sandbox, &format!("?limit={limit}&page={page}{query}")).await;
        assert_eq!(answer.success, Some(true));
        assert_eq!(answer.page, Some(page));
        assert_eq!(answer.num, Some(answer.profiles.len()));
        if answer.profiles.is_empty() {
            return (seen, page);
        }
        seen.extend(answer.profiles);
        assert!(page < 10_000, "the listing never ends");
    }
    unreachable!()
}

/// POSTs `form` (form-encoded) to `profile_opt_out`: the status and the body read as XML.
async fn opt_out(sandbox: &RunningSandbox, form: &[(&str, &str)]) -> (u16, Answer) {
    let url = format!("{}/profile_opt_out", sandbox.mobile_commons_url());
    let response = with_login(reqwest::Client::new().post(&url), Login::Sandbox)
        .form(form)
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    (status, read(&response.text().await.expect("a body")))
}

/// POSTs `body` to the sandbox's control `path`.
async fn control(sandbox: &RunningSandbox, path: &str, body: Value) -> (u16, Value) {
    let url = format!("{}/_control/mobile_commons{path}", sandbox.base_url());
    let response = reqwest::Client::new()
        .post(&url)
        .json(&body)
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

#[tokio::test]
async fn the_seeded_profiles_are_the_leads_numbers_subscribed() {
    let before = Utc::now() - chrono::Duration::seconds(1);
    let sandbox = sandbox(12).await;
    let mut numbers: Vec<String> = sandbox
        .leads()
        .into_iter()
        .map(|l| l.phone_number.trim_start_matches('+').to_owned())
        .collect();
    numbers.sort();
    numbers.dedup();
    let truth = sandbox.mobile_commons_truth();
    let mut seeded: Vec<String> = truth
        .profiles
        .iter()
        .map(|p| p.phone_number.clone())
        .collect();
    seeded.sort();
    assert_eq!(seeded, numbers);
    for profile in &truth.profiles {
        assert_eq!(profile.status, ACTIVE_SUBSCRIBER);
        assert_eq!(profile.created_at, profile.updated_at);
        assert!(profile.updated_at >= before, "{profile:?}");
        assert!(profile.opted_out_at.is_none());
    }
    let answer = profiles(&sandbox, "").await;
    let first = &answer.profiles[0];
    assert_eq!(first["phone_number"], truth.profiles[0].phone_number);
    assert_eq!(first["status"], ACTIVE_SUBSCRIBER);
    assert!(first["created_at"].ends_with(" UTC"), "{first:?}");
    assert_eq!(first["opted_out_at"], "");
    sandbox.shutdown().await;
}

#[tokio::test]
async fn the_companys_api_token_is_taken_as_a_bearer_beside_the_login() {
    let sandbox = sandbox(2).await;
    for login in [Login::Token, Login::Sandbox] {
        let (status, _, body) = profiles_raw(&sandbox, "", login).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("<response success=\"true\">"), "{body}");
    }
    assert_eq!(sandbox.mobile_commons_listings_served(), 2);
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_missing_or_wrong_login_is_a_401_basic_challenge() {
    let sandbox = sandbox(2).await;
    for login in [
        Login::None,
        Login::Other(DEFAULT_MOBILE_COMMONS_USERNAME, "wrong"),
        Login::Other("someone@example.org", DEFAULT_MOBILE_COMMONS_PASSWORD),
        Login::Bearer,
    ] {
        let (status, headers, body) = profiles_raw(&sandbox, "", login).await;
        assert_eq!(status, 401, "{body}");
        let challenge = headers
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert!(challenge.starts_with("Basic "), "{challenge}");
        assert_eq!(body, "HTTP Basic: Access denied.\n");
    }
    assert_eq!(sandbox.mobile_commons_listings_served(), 0);
    let url = format!("{}/profile_opt_out", sandbox.mobile_commons_url());
    let refused = reqwest::Client::new()
        .post(&url)
        .form(&[("phone_number", "15555550100")])
        .send()
        .await
        .expect("an answer");
    assert_eq!(refused.status().as_u16(), 401);
    assert!(sandbox.mobile_commons_truth().opt_out_calls.is_empty());
    sandbox.shutdown().await;
}

#[tokio::test]
async fn pages_until_an_empty_one_see_every_profile_once_in_order() {
    let sandbox = sandbox(40).await;
    sandbox.mobile_commons_seed(23);
    let expected: Vec<String> = sandbox
        .mobile_commons_truth()
        .profiles
        .iter()
        .map(|p| p.id.to_string())
        .collect();
    let (walked, pages) = walk(&sandbox, "", 7).await;
    let ids: Vec<String> = walked.iter().map(|p| p["id"].clone()).collect();
    assert_eq!(ids, expected);
    assert_eq!(
        pages,
        expected.len().div_ceil(7) + 1,
        "the empty page ends it"
    );
    let seeded = walked
        .iter()
        .filter(|p| p["phone_number"].starts_with("1312600"))
        .count();
    assert_eq!(seeded, 23);
    assert!(
        walked
            .iter()
            .filter(|p| p["phone_number"].starts_with("1312600"))
            .all(|p| p["status"] == TEXTED_STOP)
    );
    assert_eq!(sandbox.mobile_commons_listings_served(), pages as u64);
    let lean = profiles(
        &sandbox,
        "?include_subscriptions=false&include_custom_columns=false",
    )
    .await;
    assert!(!lean.profiles[0].contains_key("subscriptions"));
    assert!(!lean.profiles[0].contains_key("custom_columns"));
    let full = profiles(&sandbox, "").await;
    assert!(full.profiles[0].contains_key("subscriptions"));
    sandbox.shutdown().await;
}

#[tokio::test]
async fn from_and_to_keep_the_profiles_updated_between_them() {
    let sandbox = sandbox(3).await;
    let at = |y, m, d| {
        Utc.with_ymd_and_hms(y, m, d, 12, 0, 0)
            .single()
            .expect("a time")
    };
    let old = sandbox.mobile_commons_add_profile("14155550101", ACTIVE_SUBSCRIBER, at(2001, 1, 1));
    let mid = sandbox.mobile_commons_add_profile("14155550102", UNDELIVERABLE, at(2002, 1, 1));
    let late = sandbox.mobile_commons_add_profile("14155550103", ACTIVE_SUBSCRIBER, at(2003, 1, 1));
    let ids = |answer: &Answer| -> Vec<String> {
        answer.profiles.iter().map(|p| p["id"].clone()).collect()
    };
    let window = profiles(&sandbox, "?from=2001-06-01T00:00:00Z&to=2002-06-01").await;
    assert_eq!(ids(&window), vec![mid.id.to_string()]);
    let edges = profiles(
        &sandbox,
        "?from=2001-01-01%2012:00:00%20UTC&to=2003-01-01T12:00:00Z",
    )
    .await;
    assert_eq!(
        ids(&edges),
        vec![old.id.to_string(), mid.id.to_string(), late.id.to_string()],
        "both ends are kept"
    );
    let one = profiles(&sandbox, "?phone_number=4155550102,%2B14155550103").await;
    assert_eq!(ids(&one), vec![mid.id.to_string(), late.id.to_string()]);
    let (status, _, body) = profiles_raw(&sandbox, "?from=yesterday", Login::Sandbox).await;
    assert_eq!(status, 200);
    let refused = read(&body);
    assert_eq!(refused.success, Some(false));
    assert_eq!(
        refused.error,
        Some(("0".to_owned(), "Invalid date: from".to_owned()))
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn limit_defaults_to_100_and_is_capped_at_1000() {
    let sandbox = sandbox(2).await;
    sandbox.mobile_commons_seed(1_500);
    let default = profiles(&sandbox, "").await;
    assert_eq!(default.num, Some(super::MOBILE_COMMONS_DEFAULT_LIMIT));
    let capped = profiles(&sandbox, "?limit=5000").await;
    assert_eq!(capped.num, Some(super::MOBILE_COMMONS_MAX_LIMIT));
    assert_eq!(capped.profiles.len(), 1_000);
    let second = profiles(&sandbox, "?limit=5000&page=2").await;
    assert_eq!(second.num, Some(502));
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_stop_shows_in_the_next_listing_with_its_status() {
    let sandbox = sandbox(5).await;
    let number = sandbox.mobile_commons_truth().profiles[2]
        .phone_number
        .clone();
    let (status, body) = control(
        &sandbox,
        "/stop",
        json!({"phoneNumber": format!("+{number}")}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["created"], json!(false));
    assert_eq!(body["profile"]["status"], json!(TEXTED_STOP));
    let stopped_at = sandbox.mobile_commons_truth().profiles[2].updated_at;
    let since = stopped_at.format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let answer = profiles(&sandbox, &format!("?from={since}")).await;
    let found = answer
        .profiles
        .iter()
        .find(|p| p["phone_number"] == number)
        .expect("the profile that texted STOP");
    assert_eq!(found["status"], TEXTED_STOP);
    assert_eq!(found["opted_out_source"], TEXTED_STOP);
    assert!(!found["opted_out_at"].is_empty());
    let (status, made) = control(&sandbox, "/stop", json!({"phoneNumber": "+12025550143"})).await;
    assert_eq!((status, &made["created"]), (200, &json!(true)));
    assert_eq!(made["profile"]["phone_number"], json!("12025550143"));
    let (status, _) = control(&sandbox, "/stop", json!({"phoneNumber": "call me"})).await;
    assert_eq!(status, 400);
    sandbox.shutdown().await;
}

/// `profile_opt_out`, the hostile modes, and a listing as large as a campaign's.
mod writes;
