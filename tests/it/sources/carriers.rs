//! Telnyx and Bandwidth as sources: people's replies posted over real HTTP to
//! `/sources/telnyx-main` and `/sources/bandwidth-main` as each carrier posts them, signed
//! (Telnyx: Ed25519 over the timestamp and the body) or with credentials (Bandwidth: HTTP
//! Basic) by the sandbox, whose senders are written apart from the daemon's verifiers. Each
//! reply goes through the classifier every posted source shares; what does not verify is
//! refused and kept nowhere.

use base64::Engine as _;
use chrono::Utc;
use outreach_sync::settings::kinds::bandwidth::BandwidthSettings;
use outreach_sync::settings::kinds::telnyx::TelnyxSettings;
use outreach_sync::settings::{SourceSettings, SourceSystem};
use outreach_sync_sandbox::{
    DEFAULT_BANDWIDTH_PASSWORD, DEFAULT_BANDWIDTH_USERNAME, DEFAULT_TELNYX_PUBLIC_KEY,
    DEFAULT_TELNYX_SEED, RunningSandbox, bandwidth, telnyx,
};
use secrecy::SecretString;
use serde_json::Value;

use super::{WAIT, entries_from, listed, opted_out_at_service};
use crate::common::{Backend, TestApp, eventually, on_both_backends};
use crate::destinations::once::{opted_in_with_van_id, writes_of};
use crate::destinations::{action_network, campaign};

/// A second key of Telnyx's, as during a rotation, and one that is not the account's.
const ROTATED_SEED: &str = "0202020202020202020202020202020202020202020202020202020202020202";
const OTHER_SEED: &str = "0303030303030303030303030303030303030303030303030303030303030303";
const CAMPAIGN_NUMBER: &str = "+15005550006";

fn posted_source(name: &str, system: SourceSystem) -> SourceSettings {
    let mut source = SourceSettings::new(name, system, "", "");
    source.api_key = None;
    source
}

fn telnyx_source() -> SourceSettings {
    let rotated = telnyx::public_key(ROTATED_SEED).expect("a key");
    posted_source(
        "telnyx-main",
        SourceSystem::Telnyx(TelnyxSettings {
            public_key: Some(DEFAULT_TELNYX_PUBLIC_KEY.to_owned()),
            keys_from_file: vec![rotated],
            tolerance_secs: 300,
            ..TelnyxSettings::default()
        }),
    )
}

fn bandwidth_source() -> SourceSettings {
    posted_source(
        "bandwidth-main",
        SourceSystem::Bandwidth(BandwidthSettings {
            username: DEFAULT_BANDWIDTH_USERNAME.to_owned(),
            password: Some(SecretString::from(DEFAULT_BANDWIDTH_PASSWORD)),
            passwords: vec![SecretString::from("rotated-password")],
            ..BandwidthSettings::default()
        }),
    )
}

/// The campaign's daemon writing to Action Network and hearing a Telnyx number and a
/// Bandwidth application.
async fn hearing(backend: Backend) -> Option<(RunningSandbox, TestApp)> {
    let (sandbox, mut app) = campaign(backend).await?;
    app.settings.destination = vec![action_network(&sandbox)];
    app.settings.source = vec![telnyx_source(), bandwidth_source()];
    Some((sandbox, app.restart().await))
}

/// A `message.received` event of `text` from `from`, as Telnyx posts it, its event id `id`.
fn telnyx_event(id: &str, from: &str, text: &str) -> Vec<u8> {
    let event = telnyx::inbound(
        id,
        &format!("msg-{id}"),
        from,
        CAMPAIGN_NUMBER,
        text,
        Utc::now(),
    );
    serde_json::to_vec(&event).expect("JSON")
}

/// Posts `body` to the Telnyx source, signed with `seed` at `timestamp`.
async fn telnyx_post(app: &TestApp, seed: &str, timestamp: i64, body: &[u8]) -> (u16, String) {
    let url = app.url("/sources/telnyx-main");
    telnyx::send(&reqwest::Client::new(), &url, seed, timestamp, body)
        .await
        .expect("an answer")
}

/// A reply of `text` from `from`, posted and signed as Telnyx posts it, now.
async fn telnyx_text(app: &TestApp, id: &str, from: &str, text: &str) -> u16 {
    let body = telnyx_event(id, from, text);
    telnyx_post(app, DEFAULT_TELNYX_SEED, Utc::now().timestamp(), &body)
        .await
        .0
}

/// Posts `callbacks` to the Bandwidth source with `credentials`: status, body, challenge.
async fn bandwidth_post(
    app: &TestApp,
    credentials: Option<(&str, &str)>,
    callbacks: &[Value],
) -> (u16, String, Option<String>) {
    let url = app.url("/sources/bandwidth-main");
    bandwidth::send(&reqwest::Client::new(), &url, credentials, callbacks)
        .await
        .expect("an answer")
}

const CREDENTIALS: Option<(&str, &str)> =
    Some((DEFAULT_BANDWIDTH_USERNAME, DEFAULT_BANDWIDTH_PASSWORD));

/// A reply of `text` from `from`, posted as a Bandwidth application's callback, `id` its
/// message id.
async fn bandwidth_text(app: &TestApp, id: &str, from: &str, text: &str) -> u16 {
    let callback = bandwidth::inbound(id, from, CAMPAIGN_NUMBER, text, Utc::now());
    bandwidth_post(app, CREDENTIALS, &[callback]).await.0
}

/// How many posts to `source` are in the outbox, applied.
async fn applied_posts(app: &TestApp, kind: &str) -> i64 {
    app.count(&format!(
        "SELECT COUNT(*) FROM outbox WHERE dedup_key LIKE '{kind}:%' AND state = 'applied'"
    ))
    .await
}

/// The texts of the replies waiting for review.
async fn waiting_texts(app: &TestApp) -> Vec<String> {
    let waiting: Value = app
        .admin_get("/v1/review")
        .await
        .json()
        .await
        .expect("json");
    waiting["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["text"].as_str().map(str::to_owned))
        .collect()
}

/// The delivery the evidence of `phone`'s entry from `source` shows.
async fn evidence_delivery(app: &TestApp, source: &str, phone: &str) -> Value {
    let bundle: Value = app
        .admin_get(&format!(
            "/v1/consent/evidence?phoneNumber={}",
            phone.replace('+', "%2B")
        ))
        .await
        .json()
        .await
        .expect("json");
    let item = bundle["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["source"] == source)
        .cloned()
        .unwrap_or_else(|| panic!("a {source} entry: {bundle}"));
    item["evidence"]["delivery"].clone()
}

on_both_backends!(
    a_telnyx_reply_is_heard_once_and_reaches_the_service_and_action_network,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_telnyx_reply_is_heard_once_and_reaches_the_service_and_action_network(backend: Backend) {
    let Some((sandbox, app)) = hearing(backend).await else {
        return;
    };
    let (lead, van_id) = opted_in_with_van_id(&sandbox);
    let body = telnyx_event("evt-stop-1", &lead.phone_number, "Stop texting me");
    let now = Utc::now().timestamp();
    assert_eq!(
        telnyx_post(&app, DEFAULT_TELNYX_SEED, now, &body).await,
        (200, "{}".to_owned())
    );
    // Telnyx posts again when an answer is lost (signed anew): the same id is one record.
    assert_eq!(
        telnyx_post(&app, DEFAULT_TELNYX_SEED, now + 1, &body)
            .await
            .0,
        200
    );
    assert_eq!(
        telnyx_text(&app, "evt-review-1", "+15550120801", "cancel my order").await,
        200
    );
    let sent = telnyx::finalized(
        "evt-sent-1",
        "msg-sent-1",
        CAMPAIGN_NUMBER,
        &lead.phone_number,
        "Thanks for coming!",
        Utc::now(),
    );
    let sent = serde_json::to_vec(&sent).expect("JSON");
    assert_eq!(
        telnyx_post(&app, DEFAULT_TELNYX_SEED, now, &sent).await.0,
        200
    );
    let view = eventually("the events recorded", WAIT, async || {
        let view = listed(&app, "telnyx-main").await;
        (view["read"] == 3).then_some(view)
    })
    .await;
    assert_eq!(
        (
            view["kind"].as_str(),
            view["optOuts"].as_i64(),
            view["ignored"].as_i64()
        ),
        (Some("telnyx"), Some(1), Some(1)),
        "the campaign's own text is ignored, counted: {view}"
    );
    assert_eq!(waiting_texts(&app).await, ["cancel my order"]);
    let entries = entries_from(&app, "telnyx", &lead.phone_number).await;
    let evidence: Value = serde_json::from_str(&entries[0].1).expect("evidence");
    assert_eq!(
        (evidence["actor"].as_str(), evidence["record"].as_str()),
        (Some("telnyx-main"), Some("evt-stop-1")),
        "{evidence}"
    );
    opted_out_at_service(&sandbox, &lead).await;
    app.settle().await;
    assert_eq!(
        writes_of(&sandbox, van_id, &lead.phone_number).2,
        1,
        "Action Network had it once"
    );
    assert_eq!(
        applied_posts(&app, "telnyx").await,
        3,
        "three events, each kept once"
    );
    let delivery = evidence_delivery(&app, "telnyx", &lead.phone_number).await;
    let kept = base64::engine::general_purpose::STANDARD
        .decode(delivery["bodyBase64"].as_str().expect("the body"))
        .expect("base64");
    assert_eq!(kept, body, "the event as posted");
    assert_eq!(
        delivery["verifiedHeader"]["value"].as_str(),
        Some(
            telnyx::signature(DEFAULT_TELNYX_SEED, &now.to_string(), &body)
                .expect("signed")
                .as_str()
        ),
        "{delivery}"
    );
    app.stop().await;
}

on_both_backends!(a_telnyx_post_that_does_not_verify_is_refused_and_kept_nowhere);
async fn a_telnyx_post_that_does_not_verify_is_refused_and_kept_nowhere(backend: Backend) {
    let Some((_sandbox, app)) = hearing(backend).await else {
        return;
    };
    let phone = "+15550120802";
    let body = telnyx_event("evt-bad-1", phone, "STOP");
    let now = Utc::now().timestamp();
    let signature =
        telnyx::signature(DEFAULT_TELNYX_SEED, &now.to_string(), &body).expect("signed");
    let changed = telnyx_event("evt-bad-1", "+15550120803", "STOP");
    let raw = |body: Vec<u8>, headers: Vec<(&'static str, String)>| {
        let mut request = reqwest::Client::new()
            .post(app.url("/sources/telnyx-main"))
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request
    };
    let refused = [
        telnyx_post(&app, OTHER_SEED, now, &body).await.0,
        telnyx_post(&app, DEFAULT_TELNYX_SEED, now - 301, &body)
            .await
            .0,
        telnyx_post(&app, DEFAULT_TELNYX_SEED, now + 3_600, &body)
            .await
            .0,
        raw(
            changed,
            vec![
                (telnyx::SIGNATURE_HEADER, signature.clone()),
                (telnyx::TIMESTAMP_HEADER, now.to_string()),
            ],
        )
        .send()
        .await
        .expect("an answer")
        .status()
        .as_u16(),
        raw(
            body.clone(),
            vec![(telnyx::TIMESTAMP_HEADER, now.to_string())],
        )
        .send()
        .await
        .expect("an answer")
        .status()
        .as_u16(),
        raw(body.clone(), Vec::new())
            .send()
            .await
            .expect("an answer")
            .status()
            .as_u16(),
    ];
    assert_eq!(
        refused, [403; 6],
        "another key, stale, early, a changed body, no signature, nothing"
    );
    assert_eq!(
        app.count("SELECT COUNT(*) FROM outbox WHERE dedup_key LIKE 'telnyx:%'")
            .await,
        0
    );
    let metrics = app.metrics.render(Default::default());
    let line = r#"outreach_sync_source_posts_total{source="telnyx-main",outcome="rejected"} 6"#;
    assert!(metrics.contains(line), "{line}: {metrics}");
    // The second key (a rotation) verifies as the first.
    assert_eq!(telnyx_post(&app, ROTATED_SEED, now, &body).await.0, 200);
    eventually("the opt-out under the second key", WAIT, async || {
        !entries_from(&app, "telnyx", phone).await.is_empty()
    })
    .await;
    app.stop().await;
}

on_both_backends!(
    a_bandwidth_reply_is_heard_once_and_reaches_the_service_and_action_network,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_bandwidth_reply_is_heard_once_and_reaches_the_service_and_action_network(
    backend: Backend,
) {
    let Some((sandbox, app)) = hearing(backend).await else {
        return;
    };
    let (lead, van_id) = opted_in_with_van_id(&sandbox);
    assert_eq!(
        bandwidth_text(&app, "bw-stop-1", &lead.phone_number, "Stop texting me").await,
        200
    );
    // Bandwidth posts again when an answer is late: the same id is one record.
    assert_eq!(
        bandwidth_text(&app, "bw-stop-1", &lead.phone_number, "Stop texting me").await,
        200
    );
    // Several callbacks in one post: each read, the post kept once by its bytes.
    let batch = [
        bandwidth::inbound(
            "bw-review-1",
            "+15550120804",
            CAMPAIGN_NUMBER,
            "cancel my order",
            Utc::now(),
        ),
        bandwidth::inbound(
            "bw-stop-2",
            "+15550120805",
            CAMPAIGN_NUMBER,
            "UNSUBSCRIBE ME",
            Utc::now(),
        ),
        bandwidth::delivered("bw-sent-1", CAMPAIGN_NUMBER, &lead.phone_number, Utc::now()),
    ];
    assert_eq!(bandwidth_post(&app, CREDENTIALS, &batch).await.0, 200);
    let view = eventually("the callbacks recorded", WAIT, async || {
        let view = listed(&app, "bandwidth-main").await;
        (view["read"] == 4).then_some(view)
    })
    .await;
    assert_eq!(
        (
            view["kind"].as_str(),
            view["optOuts"].as_i64(),
            view["ignored"].as_i64()
        ),
        (Some("bandwidth"), Some(2), Some(1)),
        "{view}"
    );
    assert_eq!(waiting_texts(&app).await, ["cancel my order"]);
    opted_out_at_service(&sandbox, &lead).await;
    app.settle().await;
    assert_eq!(
        writes_of(&sandbox, van_id, &lead.phone_number).2,
        1,
        "Action Network had it once"
    );
    assert_eq!(
        applied_posts(&app, "bandwidth").await,
        2,
        "a post of one, a post of three"
    );
    // The evidence of a reply read from a post of several finds that post.
    let delivery = evidence_delivery(&app, "bandwidth", "+15550120805").await;
    assert_eq!(delivery["kept"], true, "{delivery}");
    let kept = base64::engine::general_purpose::STANDARD
        .decode(delivery["bodyBase64"].as_str().expect("the body"))
        .expect("base64");
    let kept: Value = serde_json::from_slice(&kept).expect("JSON");
    assert_eq!(kept.as_array().map(Vec::len), Some(3), "{kept}");
    let single = evidence_delivery(&app, "bandwidth", &lead.phone_number).await;
    assert_eq!(single["kept"], true, "{single}");
    assert!(
        !single.to_string().contains(DEFAULT_BANDWIDTH_PASSWORD),
        "the credentials are never kept: {single}"
    );
    app.stop().await;
}

on_both_backends!(a_bandwidth_post_without_the_credentials_is_challenged_and_kept_nowhere);
async fn a_bandwidth_post_without_the_credentials_is_challenged_and_kept_nowhere(backend: Backend) {
    let Some((_sandbox, app)) = hearing(backend).await else {
        return;
    };
    let phone = "+15550120806";
    let callback = bandwidth::inbound("bw-bad-1", phone, CAMPAIGN_NUMBER, "STOP", Utc::now());
    for credentials in [
        Some((DEFAULT_BANDWIDTH_USERNAME, "wrong-password")),
        Some(("someone-else", DEFAULT_BANDWIDTH_PASSWORD)),
        None,
    ] {
        let (status, _, challenge) =
            bandwidth_post(&app, credentials, std::slice::from_ref(&callback)).await;
        assert_eq!(status, 401, "{credentials:?}");
        assert!(
            challenge
                .as_deref()
                .is_some_and(|c| c.starts_with("Basic realm=")),
            "{challenge:?}"
        );
    }
    assert_eq!(
        app.count("SELECT COUNT(*) FROM outbox WHERE dedup_key LIKE 'bandwidth:%'")
            .await,
        0
    );
    let kept: Vec<String> = app
        .texts("SELECT CAST(headers AS TEXT) FROM rejected_deliveries")
        .await;
    assert!(
        kept.iter()
            .all(|h| !h.to_lowercase().contains("authorization")),
        "a credential tried is never kept: {kept:?}"
    );
    let rotated = Some((DEFAULT_BANDWIDTH_USERNAME, "rotated-password"));
    assert_eq!(bandwidth_post(&app, rotated, &[callback]).await.0, 200);
    eventually("the opt-out under the second password", WAIT, async || {
        !entries_from(&app, "bandwidth", phone).await.is_empty()
    })
    .await;
    app.stop().await;
}

on_both_backends!(
    a_flood_of_refused_carrier_posts_delays_no_webhook,
    alone,
    flavor = "multi_thread",
    worker_threads = 4
);
/// Refused posts at both carriers' sources, 16 at a time: Telnyx events of almost 64 KiB
/// signed with another key (each verified, and failing), Bandwidth posts of almost 256 KiB
/// with a wrong password, and 1 MiB of each (refused unread), while the service's signed
/// webhooks keep coming: acknowledged promptly (nine in ten within a second, none past
/// 2.5 s), nothing of the flood kept but the bounded sample.
async fn a_flood_of_refused_carrier_posts_delays_no_webhook(backend: Backend) {
    let Some(app) = crate::common::spawn_app_on(backend, |s| {
        s.source = vec![telnyx_source(), bandwidth_source()];
    })
    .await
    else {
        return;
    };
    let before = crate::hostile::database_bytes(&app).await;
    let app = std::sync::Arc::new(app);
    let flood: Vec<_> = (0..16)
        .map(|task| {
            let app = app.clone();
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                for (padding, refused) in [(60 * 1024, 403), (1024 * 1024, 413)] {
                    let text = "x".repeat(padding);
                    let body = telnyx_event(&format!("evt-flood-{task}"), "+15550000406", &text);
                    // Signed once: the flood costs the daemon, not the test's own signing.
                    let now = Utc::now().timestamp().to_string();
                    let signature = telnyx::signature(OTHER_SEED, &now, &body).expect("signed");
                    for _ in 0..6 {
                        let sent = http
                            .post(app.url("/sources/telnyx-main"))
                            .header(telnyx::SIGNATURE_HEADER, &signature)
                            .header(telnyx::TIMESTAMP_HEADER, &now)
                            .body(body.clone())
                            .send()
                            .await;
                        match sent {
                            Ok(answer) => assert_eq!(answer.status().as_u16(), refused),
                            // Refused before the whole body was written.
                            Err(_) => assert_eq!(refused, 413),
                        }
                    }
                }
                for padding in [250 * 1024, 1024 * 1024] {
                    let text = "x".repeat(padding);
                    let callback = bandwidth::inbound(
                        "bw-flood",
                        "+15550000406",
                        CAMPAIGN_NUMBER,
                        &text,
                        Utc::now(),
                    );
                    let url = app.url("/sources/bandwidth-main");
                    for _ in 0..6 {
                        let wrong = Some((DEFAULT_BANDWIDTH_USERNAME, "wrong"));
                        // Refused before the body is read: the client may see its write cut
                        // off rather than the answer.
                        let sent =
                            bandwidth::send(&http, &url, wrong, std::slice::from_ref(&callback));
                        if let Ok((status, _, _)) = sent.await {
                            assert_eq!(status, 401);
                        }
                    }
                }
            })
        })
        .collect();
    crate::hostile::acknowledged_promptly_beside(&app, flood, "evt_carrier_flood").await;
    let app = std::sync::Arc::into_inner(app).expect("the flood is over");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM outbox WHERE dedup_key LIKE 'telnyx:%' OR dedup_key LIKE 'bandwidth:%'")
            .await,
        0
    );
    crate::hostile::a_bounded_sample_is_all_it_left(&app, before).await;
    app.stop().await;
}
