//! Every published signature vector (tests/data/signature-vectors.json), valid and invalid.

use http::{HeaderMap, HeaderName, HeaderValue};
use outreach_sync::settings::{Algorithm, Scheme, WebhookSettings};
use outreach_sync::signature::{Key, Rejection, SignatureFormat, Verifier, sign};
use secrecy::SecretString;
use serde_json::Value;

fn vectors() -> Value {
    let text = std::fs::read_to_string(crate::repository("tests/data/signature-vectors.json"))
        .expect("vectors file");
    serde_json::from_str(&text).expect("vectors JSON")
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    pairs
        .iter()
        .map(|(n, v)| {
            (
                HeaderName::try_from(*n).unwrap(),
                HeaderValue::try_from(*v).unwrap(),
            )
        })
        .collect()
}

fn s(v: &Value) -> &str {
    v.as_str().expect("string")
}

fn standard_verifier(secret: &str) -> Verifier {
    Verifier::new(&WebhookSettings {
        scheme: Scheme::StandardWebhooks,
        secrets: vec![SecretString::from(secret)],
        ..WebhookSettings::default()
    })
}

#[test]
fn standard_webhooks_vectors_verify_and_every_invalid_signature_is_refused() {
    let vectors = vectors();
    for case in vectors["standard_webhooks"].as_array().unwrap() {
        let verifier = standard_verifier(s(&case["secret"]));
        let now: i64 = s(&case["webhook_timestamp"]).parse().unwrap();
        let payload = s(&case["payload"]).as_bytes();
        let with_signature = |sig: &str| {
            headers(&[
                ("webhook-id", s(&case["webhook_id"])),
                ("webhook-timestamp", s(&case["webhook_timestamp"])),
                ("webhook-signature", sig),
            ])
        };
        for valid in case["valid"].as_array().unwrap() {
            let verified = verifier.verify(&with_signature(s(valid)), payload, now);
            assert_eq!(verified.map(|v| v.secret_index), Ok(0), "{valid}");
        }
        for invalid in case["invalid"].as_array().into_iter().flatten() {
            assert!(
                verifier
                    .verify(&with_signature(s(invalid)), payload, now)
                    .is_err(),
                "{invalid} must fail"
            );
        }
        let valid = s(&case["valid"][0]);
        for other in case["valid_when_listed_with_the_valid_one"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let listed = format!("{} {valid}", s(other));
            assert!(
                verifier
                    .verify(&with_signature(&listed), payload, now)
                    .is_ok(),
                "{listed}"
            );
            assert!(
                verifier
                    .verify(&with_signature(s(other)), payload, now)
                    .is_err(),
                "{other} alone"
            );
        }
    }
}

#[test]
fn standard_webhooks_timestamps_are_checked_in_both_directions() {
    let vectors = vectors();
    let case = &vectors["standard_webhooks"][0];
    let verifier = standard_verifier(s(&case["secret"]));
    let ts: i64 = s(&case["webhook_timestamp"]).parse().unwrap();
    let h = headers(&[
        ("webhook-id", s(&case["webhook_id"])),
        ("webhook-timestamp", s(&case["webhook_timestamp"])),
        ("webhook-signature", s(&case["valid"][0])),
    ]);
    let payload = s(&case["payload"]).as_bytes();
    assert_eq!(
        verifier.verify(&h, payload, ts + 301),
        Err(Rejection::OutsideTolerance)
    );
    assert_eq!(
        verifier.verify(&h, payload, ts - 301),
        Err(Rejection::OutsideTolerance)
    );
    assert!(verifier.verify(&h, payload, ts + 299).is_ok());
}

#[test]
fn hmac_hex_over_the_body_matches_the_published_vector_both_ways() {
    let vectors = vectors();
    for case in vectors["hmac_hex_over_body"].as_array().unwrap() {
        let settings = WebhookSettings {
            secrets: vec![SecretString::from(s(&case["secret"]))],
            header: "X-Hub-Signature-256".into(),
            algorithm: Algorithm::Sha256,
            prefix: s(&case["prefix"]).into(),
            ..WebhookSettings::default()
        };
        let payload = s(&case["payload"]).as_bytes();
        let expected = s(&case["expected"]);
        let verifier = Verifier::new(&settings);
        assert!(
            verifier
                .verify(&headers(&[("x-hub-signature-256", expected)]), payload, 0)
                .is_ok()
        );
        let flipped = expected.replace("17", "18");
        assert_eq!(
            verifier.verify(&headers(&[("x-hub-signature-256", &flipped)]), payload, 0),
            Err(Rejection::Mismatch)
        );
        let key = Key::for_scheme(Scheme::Hmac, s(&case["secret"])).unwrap();
        let signed = sign(&SignatureFormat::from(&settings), &key, payload, 0, None);
        assert_eq!(signed[0].1, expected);
    }
}

#[test]
fn hmac_over_timestamp_dot_body_matches_the_published_vector() {
    let vectors = vectors();
    for case in vectors["hmac_hex_over_timestamp_dot_body"]
        .as_array()
        .unwrap()
    {
        let settings = WebhookSettings {
            secrets: vec![SecretString::from(s(&case["secret"]))],
            timestamp_header: "X-Timestamp".into(),
            ..WebhookSettings::default()
        };
        let ts = s(&case["timestamp"]);
        let now: i64 = ts.parse().unwrap();
        let payload = s(&case["payload"]).as_bytes();
        let verifier = Verifier::new(&settings);
        let h = headers(&[("x-signature", s(&case["expected"])), ("x-timestamp", ts)]);
        assert!(verifier.verify(&h, payload, now).is_ok());
        let other_ts = headers(&[
            ("x-signature", s(&case["expected"])),
            ("x-timestamp", &(now + 1).to_string()),
        ]);
        assert_eq!(
            verifier.verify(&other_ts, payload, now),
            Err(Rejection::Mismatch)
        );
        let missing = headers(&[("x-signature", s(&case["expected"]))]);
        assert!(matches!(
            verifier.verify(&missing, payload, now),
            Err(Rejection::MissingHeader(_))
        ));
    }
}

/// Twilio's signature, made by two implementations apart: the sandbox signs an inbound
/// text and posts it over real HTTP, form-encoded as a client library encodes it (spaces,
/// `+`, non-ASCII); the daemon's verifier, reading the body as it arrives, accepts it with
/// the token and refuses it with another token or for another URL.
#[tokio::test]
async fn a_twilio_request_the_sandbox_signs_is_one_the_daemon_verifies() {
    use outreach_sync::systems::twilio::signature as twilio;
    use outreach_sync_sandbox::twilio as sender;

    let (tx, mut rx) = tokio::sync::mpsc::channel::<(String, bytes::Bytes)>(1);
    let app = axum::Router::new().route(
        "/sources/twilio-main",
        axum::routing::post(move |headers: HeaderMap, body: bytes::Bytes| {
            let tx = tx.clone();
            async move {
                let signature = headers
                    .get(twilio::HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                let _ = tx.send((signature, body)).await;
                "<Response/>"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/sources/twilio-main",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move { axum::serve(listener, app).await });

    let token = "sandbox-auth-token-0123";
    let params = sender::inbound(
        "SM0001",
        "+15550100001",
        "+15550109999",
        "Opt out, ¡ya! 100%+",
    );
    let (status, _) = sender::send(
        &reqwest::Client::new(),
        sender::Target::direct(&url),
        token,
        &params,
    )
    .await
    .expect("posted");
    assert_eq!(status, 200);
    let (header, body) = rx.recv().await.expect("the request");
    let received = twilio::form_params(&body);
    assert_eq!(received.len(), params.len());
    assert_eq!(
        twilio::verify(
            &[b"other-token", token.as_bytes()],
            &url,
            &received,
            &header
        ),
        Some(1),
        "the second token (a rotation) matches"
    );
    assert_eq!(
        twilio::verify(&[b"other-token"], &url, &received, &header),
        None
    );
    let elsewhere = url.replace("twilio-main", "twilio-other");
    assert_eq!(
        twilio::verify(&[token.as_bytes()], &elsewhere, &received, &header),
        None
    );
}
