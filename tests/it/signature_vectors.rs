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
