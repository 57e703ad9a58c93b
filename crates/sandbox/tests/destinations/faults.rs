//! Faults of either fake, switched from Rust or over HTTP, and what they leave in the truth.

use std::time::{Duration, Instant};

use outreach_sync_sandbox::destinations::{Fake, FakeFault, HUGE_BODY_BYTES, REDIRECT_ELSEWHERE};
use outreach_sync_sandbox::{DEFAULT_ACTION_NETWORK_KEY, DEFAULT_VAN_KEY};
use serde_json::{Value, json};

use super::common::*;

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
