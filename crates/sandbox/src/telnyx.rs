//! Telnyx's messaging webhook (Messaging API v2), as a campaign's Telnyx number sends it: a
//! JSON event (`message.received` for an inbound text) posted to the messaging profile's
//! webhook URL and signed with the account's Ed25519 key: `telnyx-signature-ed25519` is the
//! base64 of the 64-byte signature of the bytes `{telnyx-timestamp}|{raw body}`, and
//! `telnyx-timestamp` the Unix seconds of the signing, as decimal text. The account's public
//! key (32 bytes, base64) is what a receiver verifies with. Signed here with the
//! `ed25519-dalek` crate, apart from the daemon's verifier, and checked against vectors made
//! with Python's `cryptography` (`tests/data/telnyx-signature-vectors.json`).

use anyhow::{Context as _, anyhow};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, SecondsFormat, Utc};
use ed25519_dalek::{Signer as _, SigningKey};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// The header Telnyx sends the signature in (base64 of the 64-byte Ed25519 signature).
pub const SIGNATURE_HEADER: &str = "telnyx-signature-ed25519";
/// The header Telnyx sends the signing time in (Unix seconds, decimal text); it is signed
/// with the body.
pub const TIMESTAMP_HEADER: &str = "telnyx-timestamp";

/// The messaging profile of the sandbox's Telnyx number (a fixed id of the sandbox's own).
pub const MESSAGING_PROFILE_ID: &str = "40017e11-5a4d-4b0c-8a3e-000000000001";
/// The organization (the Telnyx account) of the sandbox's events.
pub const ORGANIZATION_ID: &str = "40017e11-5a4d-4b0c-8a3e-000000000002";
/// The webhook URL an event names (`meta.delivered_to`, `payload.webhook_url`) until
/// [`addressed_to`] names the one it is posted to.
pub const WEBHOOK_URL: &str = "https://sync.example.org/sources/telnyx";

/// The signing key of a 32-byte private key seed written in hexadecimal.
fn signing_key(seed_hex: &str) -> anyhow::Result<SigningKey> {
    let bytes = hex::decode(seed_hex.trim()).context("the Telnyx key seed is not hexadecimal")?;
    let seed: [u8; 32] = bytes.try_into().map_err(|bytes: Vec<u8>| {
        anyhow!("the Telnyx key seed is {} bytes, not 32", bytes.len())
    })?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The public key (base64 of its 32 bytes, as Telnyx shows an account's) of the private key
/// seed `seed_hex` (64 hexadecimal digits).
pub fn public_key(seed_hex: &str) -> anyhow::Result<String> {
    Ok(STANDARD.encode(signing_key(seed_hex)?.verifying_key().as_bytes()))
}

/// The `telnyx-signature-ed25519` of `body` sent at `timestamp` (the `telnyx-timestamp`
/// text), as Telnyx makes it with the key of `seed_hex`: base64 of the Ed25519 signature of
/// `{timestamp}|{body}`. Ed25519 is deterministic: the same input gives the same signature.
pub fn signature(seed_hex: &str, timestamp: &str, body: &[u8]) -> anyhow::Result<String> {
    let key = signing_key(seed_hex)?;
    let mut signed = Vec::with_capacity(timestamp.len() + 1 + body.len());
    signed.extend_from_slice(timestamp.as_bytes());
    signed.push(b'|');
    signed.extend_from_slice(body);
    Ok(STANDARD.encode(key.sign(&signed).to_bytes()))
}

/// Sixteen bytes written as a UUID of version 4, as Telnyx writes its ids.
fn uuid_text(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = hex::encode(bytes);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// A new event id (`data.id`), a random UUID as Telnyx's are.
pub fn new_event_id() -> String {
    uuid_text(rand::random::<u128>().to_be_bytes())
}

/// The message id (`data.payload.id`, a UUID) the sandbox gives the message of the event
/// `event_id`: made from the event's id, so that an event sent again (Telnyx retrying)
/// carries the same message.
pub fn message_id_for(event_id: &str) -> String {
    let digest = Sha256::digest(format!("telnyx message of {event_id}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid_text(bytes)
}

/// An instant as Telnyx writes them (RFC 3339, milliseconds, `Z`).
fn instant(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The encoding Telnyx reports for `text`: GSM-7 for plain ASCII, UCS-2 otherwise (the
/// sandbox does not look further into the GSM alphabet).
fn encoding(text: &str) -> &'static str {
    if text.is_ascii() { "GSM-7" } else { "UCS-2" }
}

/// A number as an event names it: its carrier and line type beside it.
fn party(phone_number: &str, carrier: &str, line_type: &str) -> Value {
    json!({"phone_number": phone_number, "carrier": carrier, "line_type": line_type})
}

/// The envelope of an event: `data` (the event, its `payload` the message) and `meta`.
fn event(event_type: &str, event_id: &str, at: DateTime<Utc>, payload: Value) -> Value {
    json!({
        "data": {
            "event_type": event_type,
            "id": event_id,
            "occurred_at": instant(at),
            "payload": payload,
            "record_type": "event",
        },
        "meta": {"attempt": 1, "delivered_to": WEBHOOK_URL},
    })
}

/// The fields of a message common to both directions, as Telnyx's documented events have
/// them (one part, no media, no cost breakdown of interest).
fn message(message_id: &str, direction: &str, from: Value, to: Value, text: &str) -> Value {
    json!({
        "id": message_id,
        "record_type": "message",
        "direction": direction,
        "type": "SMS",
        "messaging_profile_id": MESSAGING_PROFILE_ID,
        "organization_id": ORGANIZATION_ID,
        "from": from,
        "to": [to],
        "cc": [],
        "text": text,
        "subject": null,
        "media": [],
        "webhook_url": WEBHOOK_URL,
        "webhook_failover_url": null,
        "encoding": encoding(text),
        "parts": 1,
        "tags": [],
        "cost": {"amount": "0.0040", "currency": "USD"},
        "cost_breakdown": {
            "carrier_fee": {"amount": "0.0000", "currency": "USD"},
            "rate": {"amount": "0.0040", "currency": "USD"},
        },
        "tcr_campaign_id": null,
        "tcr_campaign_billable": false,
        "tcr_campaign_registered": null,
        "valid_until": null,
        "errors": [],
    })
}

/// The `message.received` event of a text from `from` (a person) to the campaign's Telnyx
/// number `to`, received at `at`, as Telnyx posts it. `event_id` is the event's id
/// (`data.id`), `message_id` the message's (`data.payload.id`).
pub fn inbound(
    event_id: &str,
    message_id: &str,
    from: &str,
    to: &str,
    text: &str,
    at: DateTime<Utc>,
) -> Value {
    let mut recipient = party(to, "TELNYX LLC", "VoIP");
    recipient["status"] = json!("webhook_delivered");
    let mut payload = message(
        message_id,
        "inbound",
        party(from, "T-MOBILE USA, INC.", "Wireless"),
        recipient,
        text,
    );
    payload["received_at"] = json!(instant(at));
    payload["sent_at"] = Value::Null;
    payload["completed_at"] = Value::Null;
    event("message.received", event_id, at, payload)
}

/// The `message.finalized` event of a text the campaign's Telnyx number `from` sent to `to`
/// (a person), delivered at `at`: a status of an outbound message, which a source of
/// inbound texts must take and ignore.
pub fn finalized(
    event_id: &str,
    message_id: &str,
    from: &str,
    to: &str,
    text: &str,
    at: DateTime<Utc>,
) -> Value {
    let mut recipient = party(to, "T-MOBILE USA, INC.", "Wireless");
    recipient["status"] = json!("delivered");
    let mut payload = message(
        message_id,
        "outbound",
        party(from, "TELNYX LLC", "VoIP"),
        recipient,
        text,
    );
    payload["received_at"] = json!(instant(at));
    payload["sent_at"] = json!(instant(at));
    payload["completed_at"] = json!(instant(at));
    event("message.finalized", event_id, at, payload)
}

/// Names `url` as where `event` is delivered (`meta.delivered_to`) and the profile's webhook
/// URL (`data.payload.webhook_url`), as Telnyx's event posted there does.
pub fn addressed_to(event: &mut Value, url: &str) {
    event["meta"]["delivered_to"] = json!(url);
    event["data"]["payload"]["webhook_url"] = json!(url);
}

/// Posts `body` (its exact bytes) to `url` as Telnyx does, signed with the key of `seed_hex`
/// at `timestamp` (Unix seconds); the answer's status and body.
pub async fn send(
    http: &reqwest::Client,
    url: &str,
    seed_hex: &str,
    timestamp: i64,
    body: &[u8],
) -> anyhow::Result<(u16, String)> {
    let timestamp = timestamp.to_string();
    let answer = http
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(SIGNATURE_HEADER, signature(seed_hex, &timestamp, body)?)
        .header(TIMESTAMP_HEADER, &timestamp)
        .body(body.to_vec())
        .send()
        .await
        .with_context(|| format!("{url}: posting the event"))?;
    let status = answer.status().as_u16();
    let text = answer
        .text()
        .await
        .with_context(|| format!("{url}: reading the answer"))?;
    Ok((status, text))
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::{Signature, Verifier as _, VerifyingKey};

    use super::*;
    use crate::config::{DEFAULT_TELNYX_PUBLIC_KEY, DEFAULT_TELNYX_SEED};

    const VECTORS: &str = include_str!("../../../tests/data/telnyx-signature-vectors.json");

    /// Whether `signature` (base64) is `public_key`'s (base64) over `{timestamp}|{body}`.
    fn verifies(public_key: &str, timestamp: &str, body: &[u8], signature: &str) -> bool {
        let key: [u8; 32] = STANDARD
            .decode(public_key)
            .expect("base64")
            .try_into()
            .expect("32 bytes");
        let signature: [u8; 64] = STANDARD
            .decode(signature)
            .expect("base64")
            .try_into()
            .expect("64 bytes");
        let signed = [timestamp.as_bytes(), b"|", body].concat();
        VerifyingKey::from_bytes(&key)
            .expect("a point of the curve")
            .verify(&signed, &Signature::from_bytes(&signature))
            .is_ok()
    }

    #[test]
    fn the_default_public_key_is_the_default_seeds() {
        assert_eq!(
            public_key(DEFAULT_TELNYX_SEED).expect("a seed"),
            DEFAULT_TELNYX_PUBLIC_KEY
        );
        let seed = hex::encode(Sha256::digest(b"outreach-sync sandbox telnyx test key"));
        assert_eq!(seed, DEFAULT_TELNYX_SEED);
    }

    #[test]
    fn the_signer_reproduces_every_vector_made_with_pythons_cryptography() {
        let vectors: Value = serde_json::from_str(VECTORS).expect("the vectors are JSON");
        let cases = vectors["cases"].as_array().expect("cases");
        assert!(cases.len() >= 8, "{} cases", cases.len());
        let (mut valid, mut invalid) = (0, 0);
        for case in cases {
            let text = |name: &str| {
                case[name]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name} of {case}"))
            };
            let (name, timestamp, body) = (text("name"), text("timestamp"), text("body"));
            let expected = case["valid"].as_bool().expect("valid");
            assert_eq!(
                verifies(
                    text("public_key"),
                    timestamp,
                    body.as_bytes(),
                    text("signature")
                ),
                expected,
                "{name}"
            );
            if expected {
                valid += 1;
                let seed = text("seed_hex");
                assert_eq!(
                    public_key(seed).expect("a seed"),
                    text("public_key"),
                    "{name}"
                );
                assert_eq!(
                    signature(seed, timestamp, body.as_bytes()).expect("a seed"),
                    text("signature"),
                    "{name}"
                );
            } else {
                invalid += 1;
                assert!(!text("why").is_empty(), "{name}");
            }
        }
        assert!(
            valid >= 5 && invalid >= 3,
            "{valid} valid, {invalid} invalid"
        );
    }

    #[test]
    fn a_seed_that_is_not_32_bytes_of_hexadecimal_is_refused() {
        assert!(public_key("not hex").is_err());
        assert!(public_key("abcd").is_err());
        assert!(signature(&"00".repeat(33), "1", b"{}").is_err());
        assert!(signature(&"00".repeat(32), "1", b"{}").is_ok());
    }

    #[test]
    fn an_inbound_text_is_a_message_received_event_and_a_status_is_not() {
        let at = DateTime::parse_from_rfc3339("2026-03-01T12:00:00.250Z")
            .expect("an instant")
            .with_timezone(&Utc);
        let event_id = new_event_id();
        let message_id = message_id_for(&event_id);
        let received = inbound(
            &event_id,
            &message_id,
            "+14155550100",
            "+15005550006",
            "STOP",
            at,
        );
        let data = &received["data"];
        assert_eq!(data["event_type"], "message.received");
        assert_eq!(data["id"], event_id.as_str());
        assert_eq!(data["occurred_at"], "2026-03-01T12:00:00.250Z");
        assert_eq!(data["record_type"], "event");
        let payload = &data["payload"];
        assert_eq!(payload["id"], message_id.as_str());
        assert_eq!(payload["direction"], "inbound");
        assert_eq!(payload["from"]["phone_number"], "+14155550100");
        assert_eq!(payload["to"][0]["phone_number"], "+15005550006");
        assert_eq!(payload["to"][0]["status"], "webhook_delivered");
        assert_eq!(payload["text"], "STOP");
        assert_eq!(payload["received_at"], "2026-03-01T12:00:00.250Z");
        assert_eq!(received["meta"]["attempt"], 1);
        let status = finalized(
            &new_event_id(),
            &message_id,
            "+15005550006",
            "+14155550100",
            "Hi",
            at,
        );
        assert_eq!(status["data"]["event_type"], "message.finalized");
        assert_eq!(status["data"]["payload"]["direction"], "outbound");
        assert_eq!(
            status["data"]["payload"]["to"][0]["phone_number"],
            "+14155550100"
        );
        assert_eq!(message_id_for(&event_id), message_id);
        assert_ne!(new_event_id(), event_id);
        assert_eq!(event_id.len(), 36);
        assert_eq!(&event_id[14..15], "4");
        assert_eq!(encoding("Ça va 👍"), "UCS-2");
    }

    #[tokio::test]
    async fn send_posts_the_exact_bytes_signed_for_the_timestamp() {
        use axum::http::HeaderMap;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(HeaderMap, bytes::Bytes)>();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: bytes::Bytes| {
                let _ = tx.send((headers, body));
                async { "taken" }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!("http://{}/hook", listener.local_addr().expect("an address"));
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let body = "{\"data\":{\"text\":\"Arrêt 🙏\"}}".as_bytes();
        let (status, answer) = send(
            &reqwest::Client::new(),
            &url,
            DEFAULT_TELNYX_SEED,
            1_767_225_600,
            body,
        )
        .await
        .expect("posted");
        assert_eq!((status, answer.as_str()), (200, "taken"));
        let (headers, posted) = rx.recv().await.expect("the request");
        server.abort();
        assert_eq!(&posted[..], body);
        let header = |name: &str| headers[name].to_str().expect("text").to_owned();
        assert_eq!(header("content-type"), "application/json");
        assert_eq!(header(TIMESTAMP_HEADER), "1767225600");
        assert!(verifies(
            DEFAULT_TELNYX_PUBLIC_KEY,
            "1767225600",
            body,
            &header(SIGNATURE_HEADER)
        ));
    }
}
