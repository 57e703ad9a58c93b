use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, TimeZone as _, Utc};
use ed25519_dalek::{Signer as _, SigningKey};

use super::*;
use crate::model::phone::Region;
use crate::model::read::Said;

const US: Region = Region::US;

/// The vectors computed apart, with Python's `cryptography` (how: their `about`).
const VECTORS: &str = include_str!("../../../tests/data/telnyx-signature-vectors.json");

fn signing(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

fn public(key: &SigningKey) -> String {
    STANDARD.encode(key.verifying_key().as_bytes())
}

fn telnyx(keys: &[&SigningKey]) -> Telnyx {
    let mut settings = TelnyxSettings {
        tolerance_secs: 300,
        ..TelnyxSettings::default()
    };
    settings.keys_from_file = keys.iter().map(|k| public(k)).collect();
    Telnyx::new(&settings, &[])
}

fn headers(signature: &str, timestamp: &str) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    headers.insert(SIGNATURE_HEADER, signature.parse().expect("a header"));
    headers.insert(TIMESTAMP_HEADER, timestamp.parse().expect("a header"));
    headers
}

fn signed(key: &SigningKey, timestamp: &str, body: &[u8]) -> http::HeaderMap {
    let mut message = format!("{timestamp}|").into_bytes();
    message.extend_from_slice(body);
    headers(&STANDARD.encode(key.sign(&message).to_bytes()), timestamp)
}

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(secs, 0).single().expect("a time")
}

fn event(event_type: &str, id: &str, from: &str, text: &str) -> serde_json::Value {
    serde_json::json!({
        "data": {
            "event_type": event_type,
            "id": id,
            "occurred_at": "2026-12-01T10:00:00.000+00:00",
            "payload": {
                "direction": "inbound",
                "from": {"phone_number": from, "carrier": "T-Mobile USA", "line_type": "Wireless"},
                "id": "msg-1",
                "text": text,
                "to": [{"phone_number": "+15005550006", "status": "webhook_delivered"}],
                "type": "SMS"
            },
            "record_type": "event"
        },
        "meta": {"attempt": 1, "delivered_to": "https://sync.example.org/sources/telnyx"}
    })
}

#[test]
fn a_post_verifies_under_the_key_that_signed_it_and_no_other() {
    let (old, new, other) = (signing(1), signing(2), signing(3));
    let source = telnyx(&[&old, &new]);
    let body = br#"{"data":{"id":"e1"}}"#;
    let now = at(1_800_000_000);
    let ts = "1800000000";
    assert_eq!(source.verify(&signed(&old, ts, body), body, now), Ok(0));
    assert_eq!(
        source.verify(&signed(&new, ts, body), body, now),
        Ok(1),
        "a rotation"
    );
    let refused = source.verify(&signed(&other, ts, body), body, now);
    assert!(
        refused
            .unwrap_err()
            .contains("under any of the source's public keys")
    );
    let changed = br#"{"data":{"id":"e2"}}"#;
    assert!(
        source
            .verify(&signed(&old, ts, body), changed, now)
            .is_err(),
        "a changed body"
    );
    // The time is signed: another one beside the same signature does not verify.
    let mut moved = signed(&old, ts, body);
    moved.insert(TIMESTAMP_HEADER, "1800000001".parse().expect("a header"));
    assert!(
        source.verify(&moved, body, now).is_err(),
        "another timestamp"
    );
}

#[test]
fn a_stale_or_early_timestamp_and_a_missing_or_doubled_header_are_refused() {
    let key = signing(1);
    let source = telnyx(&[&key]);
    let body = b"{}";
    let now = at(1_800_000_000);
    let stale = source.verify(&signed(&key, "1799999699", body), body, now);
    assert!(stale.unwrap_err().contains("past tolerance_secs (300)"));
    assert_eq!(
        source.verify(&signed(&key, "1799999700", body), body, now),
        Ok(0)
    );
    assert!(
        source
            .verify(&signed(&key, "1800000301", body), body, now)
            .is_err(),
        "early"
    );
    assert!(
        source
            .verify(&signed(&key, "soon", body), body, now)
            .is_err()
    );
    let mut none = signed(&key, "1800000000", body);
    none.remove(SIGNATURE_HEADER);
    assert!(
        source
            .verify(&none, body, now)
            .unwrap_err()
            .contains("given once")
    );
    let mut twice = signed(&key, "1800000000", body);
    let again = twice.get(SIGNATURE_HEADER).cloned().expect("signed");
    twice.append(SIGNATURE_HEADER, again);
    assert!(source.verify(&twice, body, now).is_err(), "a header twice");
    let short = headers("AAAA", "1800000000");
    assert!(
        source
            .verify(&short, body, now)
            .unwrap_err()
            .contains("64 bytes")
    );
}

#[test]
fn the_vectors_made_apart_verify_as_they_say() {
    let vectors: serde_json::Value = serde_json::from_str(VECTORS).expect("the vectors");
    let cases = vectors["cases"].as_array().expect("cases");
    assert!(cases.len() >= 6, "{}", cases.len());
    for case in cases {
        let text = |k: &str| case[k].as_str().unwrap_or_else(|| panic!("{k} of {case}"));
        let settings = TelnyxSettings {
            public_key: Some(text("public_key").to_owned()),
            tolerance_secs: 300,
            ..TelnyxSettings::default()
        };
        let source = Telnyx::new(&settings, &[]);
        let signed_at: i64 = text("timestamp").parse().expect("Unix seconds");
        let verified = source.verify(
            &headers(text("signature"), text("timestamp")),
            text("body").as_bytes(),
            at(signed_at + 10),
        );
        assert_eq!(
            verified.is_ok(),
            case["valid"].as_bool().expect("valid"),
            "{}: {verified:?}",
            text("name")
        );
    }
}

#[test]
fn a_reply_is_read_by_the_shared_classifier() {
    let now = Utc::now();
    let read = |text: &str| {
        let event = event(RECEIVED, "e-1", "+14155550100", text);
        record(&event, now, (US, &[]))
            .expect("read")
            .expect("a record")
    };
    let stop = read("Stop texting me");
    assert_eq!(stop.key, "e-1");
    assert_eq!(
        stop.said,
        Said::Consent {
            phone_number: "+14155550100".to_owned(),
            opted_out: true,
            occurred_at: now
        }
    );
    assert_eq!(
        stop.stands_on["event"]["data"]["payload"]["text"],
        "Stop texting me"
    );
    let Said::Review { matched, .. } = read("cancel my order").said else {
        panic!("put to a person");
    };
    assert_eq!(matched, ["cancel"]);
    assert!(matches!(read("see you there").said, Said::Nothing(_)));
    let words = ["halt".to_owned()];
    let event = event(RECEIVED, "e-2", "+14155550100", "HALT");
    let own = record(&event, now, (US, &words))
        .expect("read")
        .expect("a record");
    assert!(
        matches!(
            own.said,
            Said::Consent {
                opted_out: true,
                ..
            }
        ),
        "{own:?}"
    );
}

#[test]
fn another_event_is_ignored_and_a_reply_that_cannot_be_read_one_way_is_not_read() {
    let now = Utc::now();
    let sent = event("message.sent", "e-3", "+15005550006", "STOP");
    let ignored = record(&sent, now, (US, &[]))
        .expect("read")
        .expect("counted");
    assert!(matches!(&ignored.said, Said::Nothing(why) if why.contains("message.sent")));
    let no_id = serde_json::json!({"data": {"event_type": "message.finalized"}});
    assert_eq!(record(&no_id, now, (US, &[])), Ok(None));
    let no_from = serde_json::json!({"data": {"event_type": RECEIVED, "id": "e-4", "payload": {"text": "STOP"}}});
    let error = record(&no_from, now, (US, &[])).unwrap_err();
    assert!(
        error.starts_with("no data.payload.from.phone_number"),
        "{error}"
    );
    let national = event(RECEIVED, "e-5", "020 7946 0958", "STOP");
    let gb: Region = "GB".parse().expect("a region");
    let Said::Consent { phone_number, .. } = record(&national, now, (gb, &[]))
        .expect("read")
        .expect("a record")
        .said
    else {
        panic!("an opt-out");
    };
    assert_eq!(phone_number, "+442079460958");
    assert!(
        record(&national, now, (US, &[])).is_err(),
        "not a US number"
    );
    let twice = br#"{"data":{"event_type":"message.received","id":"e-6","payload":{"from":{"phone_number":"+14155550100","phone_number":"+14155550101"},"text":"STOP"}}}"#;
    let source = telnyx(&[&signing(1)]);
    let error = source.records(twice, now, US).unwrap_err();
    assert!(error.contains("`phone_number` given twice"), "{error}");
    assert_eq!(source.key(twice), None, "kept by its bytes");
    let body = serde_json::to_vec(&event(RECEIVED, "e-7", "+14155550100", "STOP")).expect("JSON");
    assert_eq!(source.key(&body).as_deref(), Some("e-7"));
    assert!(source.records(b"[1]", now, US).is_err());
}

/// The kind's keys, as `check-config` reads them.
mod settings {
    use crate::settings::test_support::{load, refused};

    const BASE: &str =
        "[webhook]\nsecrets = [\"whsec-1\"]\n[[source]]\nname = \"tx\"\nkind = \"telnyx\"\n";
    /// An Ed25519 public key (of the seed of 32 bytes 1).
    const KEY: &str = "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=";

    #[test]
    fn a_telnyx_source_takes_its_public_keys_and_a_tolerance() {
        let settings = load(&format!("{BASE}public_key = \"{KEY}\"\n")).expect("valid");
        let crate::settings::SourceSystem::Telnyx(telnyx) = &settings.source[0].system else {
            panic!("a telnyx source");
        };
        assert_eq!((telnyx.accepted(), telnyx.tolerance_secs), (vec![KEY], 300));
        let dir = tempfile::tempdir().expect("a directory");
        let file = dir.path().join("keys");
        std::fs::write(&file, format!("{KEY}\n\n{KEY}\n")).expect("written");
        let rotated = format!("{BASE}public_key_file = {:?}\ntolerance_secs = 60\n", file);
        let settings = load(&rotated).expect("valid");
        let crate::settings::SourceSystem::Telnyx(telnyx) = &settings.source[0].system else {
            panic!("a telnyx source");
        };
        assert_eq!(telnyx.accepted_bytes().len(), 2);
        refused(BASE, "source.public_key");
        let short = refused(
            &format!("{BASE}public_key = \"AAAA\"\n"),
            "source.public_key",
        );
        assert!(short.contains("is 3 bytes"), "{short}");
        refused(
            &format!("{BASE}public_key = \"not base64!\"\n"),
            "source.public_key",
        );
        refused(
            &format!("{BASE}public_key = \"{KEY}\"\ntolerance_secs = 0\n"),
            "source.tolerance_secs",
        );
        refused(
            &format!("{BASE}public_key = \"{KEY}\"\nbase_url = \"https://api.telnyx.com\"\n"),
            "source.kind",
        );
        let foreign = load(&format!(
            "{BASE}public_key = \"{KEY}\"\nauth_token = \"x\"\n"
        ))
        .expect_err("another kind's key")
        .to_string();
        assert!(foreign.contains("unknown field `auth_token`"), "{foreign}");
    }
}
