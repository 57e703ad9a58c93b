//! Telnyx: a person's reply to a campaign's Telnyx number, as Telnyx's messaging webhook
//! (API v2) posts it to a `[[source]]` of kind `telnyx` (`POST /sources/{name}` on the
//! ingest listener): a JSON event signed with the account's Ed25519 key,
//! `telnyx-signature-ed25519` (base64) over `{telnyx-timestamp}|{the body as posted}`.
//! Nothing is read from Telnyx and nothing is sent to it. Its settings are `settings.rs`
//! here, compiled into the settings layer (`crate::settings::kinds::telnyx`).
//!
//! What a reply is: the event `message.received`, one record, its event id `data.id`
//! (Telnyx posts an event again when its answer does not come: the same id twice is one
//! record), its number `data.payload.from.phone_number`, what it says read by
//! [`crate::model::revocation::read`] from `data.payload.text`, at the time the daemon
//! received it. Other events (`message.sent`, `message.finalized`: the campaign's own
//! texts) are answered and ignored, counted as such. A key given twice anywhere in the
//! event is an event that cannot be read one way: kept and quarantined, never guessed.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use ed25519_dalek::{Signature, VerifyingKey};

use super::posted::{
    Posted, from_number, not_a_reply, record_key, reply_said, strict_json, text_at,
};
use crate::model::read::{ReadRecord, ReadsPost};
use crate::settings::kinds::telnyx::TelnyxSettings;

/// The header Telnyx signs its posts in, and the one of the time it signed them.
pub const SIGNATURE_HEADER: &str = "telnyx-signature-ed25519";
pub const TIMESTAMP_HEADER: &str = "telnyx-timestamp";

/// The largest event a Telnyx source takes: a message of ten segments with its media
/// links and carrier details comes to a few KiB.
pub const MAX_EVENT_BYTES: usize = 64 * 1024;

/// The event that is a person's reply.
const RECEIVED: &str = "message.received";

/// A Telnyx source as configured now: the public keys its posts verify under, how far a
/// signed time may lie from its receipt, and its own revocation words.
#[derive(Debug, Clone)]
pub struct Telnyx {
    keys: Vec<VerifyingKey>,
    tolerance_secs: i64,
    words: Vec<String>,
}

impl Telnyx {
    pub fn new(settings: &TelnyxSettings, words: &[String]) -> Self {
        Self {
            keys: settings
                .accepted_bytes()
                .iter()
                .filter_map(|bytes| VerifyingKey::from_bytes(bytes).ok())
                .collect(),
            tolerance_secs: i64::try_from(settings.tolerance_secs).unwrap_or(i64::MAX),
            words: words.to_vec(),
        }
    }
}

/// The one value of header `name`: `None` when it is missing, given twice, or not text.
fn one_header<'h>(headers: &'h http::HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (Some(value), None) => value.to_str().ok(),
        _ => None,
    }
}

impl Posted for Telnyx {
    fn max_body_bytes(&self) -> usize {
        MAX_EVENT_BYTES
    }

    fn signature_header(&self) -> &'static str {
        SIGNATURE_HEADER
    }

    fn verify(
        &self,
        headers: &http::HeaderMap,
        body: &[u8],
        received_at: DateTime<Utc>,
    ) -> Result<usize, String> {
        let (Some(signature), Some(timestamp)) = (
            one_header(headers, SIGNATURE_HEADER),
            one_header(headers, TIMESTAMP_HEADER),
        ) else {
            return Err(format!(
                "{SIGNATURE_HEADER} and {TIMESTAMP_HEADER} must each be given once"
            ));
        };
        let signed_at: i64 = timestamp
            .parse()
            .map_err(|_| format!("{TIMESTAMP_HEADER} is not a time in Unix seconds"))?;
        let off_by = received_at.timestamp().saturating_sub(signed_at);
        if off_by.unsigned_abs() > self.tolerance_secs.unsigned_abs() {
            return Err(format!(
                "{TIMESTAMP_HEADER} lies {off_by} s from the time received, past tolerance_secs ({}): a replay, or a clock astray",
                self.tolerance_secs
            ));
        }
        let signature = STANDARD
            .decode(signature)
            .ok()
            .and_then(|bytes| <[u8; 64]>::try_from(bytes.as_slice()).ok())
            .map(|bytes| Signature::from_bytes(&bytes))
            .ok_or_else(|| format!("{SIGNATURE_HEADER} is not 64 bytes of base64"))?;
        let mut message = Vec::with_capacity(timestamp.len() + 1 + body.len());
        message.extend_from_slice(timestamp.as_bytes());
        message.push(b'|');
        message.extend_from_slice(body);
        self.keys
            .iter()
            .position(|key| key.verify_strict(&message, &signature).is_ok())
            .ok_or_else(|| {
                format!(
                    "{SIGNATURE_HEADER} is not the signature of this body at its {TIMESTAMP_HEADER} under any of the source's public keys"
                )
            })
    }

    fn key(&self, body: &[u8]) -> Option<String> {
        let event = strict_json(body).ok()?;
        record_key("data.id", text_at(&event, &["data", "id"]).ok()?).ok()
    }

    fn answer(&self) -> (&'static str, &'static str) {
        ("application/json", "{}")
    }

    fn describe(&self) -> Vec<String> {
        vec![
            format!("signed with Ed25519 ({SIGNATURE_HEADER} over {TIMESTAMP_HEADER}|body)"),
            format!("{} public key(s) accepted", self.keys.len()),
            format!("signed within {} s of receipt", self.tolerance_secs),
        ]
    }
}

impl ReadsPost for Telnyx {
    fn records(
        &self,
        body: &[u8],
        received_at: DateTime<Utc>,
        region: crate::model::phone::Region,
    ) -> Result<Vec<ReadRecord>, String> {
        let event = strict_json(body)?;
        record(&event, received_at, (region, &self.words))
            .map(|record| record.into_iter().collect())
    }
}

/// The reply `event` is, received at `received_at`; `None` for an event of another type
/// without an id; why it cannot be read one way, when it cannot.
pub fn record(
    event: &serde_json::Value,
    received_at: DateTime<Utc>,
    (region, words): (crate::model::phone::Region, &[String]),
) -> Result<Option<ReadRecord>, String> {
    if !event.is_object() {
        return Err("not a Telnyx event: a JSON object with `data` is expected".to_owned());
    }
    let event_type = text_at(event, &["data", "event_type"])?;
    let id = text_at(event, &["data", "id"])?;
    let stands_on = serde_json::json!({ "event": event });
    if event_type != Some(RECEIVED) {
        let key = record_key("data.id", id);
        return Ok(not_a_reply("event", event_type, key, stands_on));
    }
    let key = record_key("data.id", id)?;
    let text = text_at(event, &["data", "payload", "text"])?.unwrap_or_default();
    let number = || {
        from_number(
            "data.payload.from.phone_number",
            text_at(event, &["data", "payload", "from", "phone_number"])?,
            region,
        )
    };
    let said = reply_said((text, None, words), number, received_at, received_at)?;
    Ok(Some(ReadRecord {
        key,
        said,
        stands_on,
    }))
}

#[cfg(test)]
mod tests;
