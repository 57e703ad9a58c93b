//! Bandwidth: people's replies to a campaign's Bandwidth numbers, as a Bandwidth
//! application's inbound callback (Messaging API v2) posts them to a `[[source]]` of kind
//! `bandwidth` (`POST /sources/{name}` on the ingest listener): a JSON array of callbacks,
//! with HTTP Basic credentials (the application's callback user name and password). A post
//! without them, or with others, is answered 401 with a challenge and kept nowhere. Nothing
//! is read from Bandwidth and nothing is sent to it. Its settings are `settings.rs` here,
//! compiled into the settings layer (`crate::settings::kinds::bandwidth`).
//!
//! What a reply is: a callback of type `message-received`, one record, its `message.id`
//! (Bandwidth posts again when its answer does not come within 10 s, for 24 hours: the same
//! id twice is one record), its number `message.from`, what it says read by
//! [`crate::model::revocation::read`] from `message.text`, at `message.time` (bounded as
//! every time another system gives; the receipt when it gives none). Callbacks of other
//! types (`message-delivered`, `message-failed`: the campaign's own texts) are ignored,
//! counted as such. A key given twice anywhere in the post is a post that cannot be read one
//! way: kept and quarantined, never guessed.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret as _, SecretString};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::posted::{
    Posted, from_number, kind_of, not_a_reply, record_key, reply_said, strict_json, text_at,
};
use crate::model::read::{ReadRecord, ReadsPost};
use crate::settings::kinds::bandwidth::BandwidthSettings;

/// The largest post a Bandwidth source takes: callbacks of a kilobyte or two each, a few
/// at a time.
pub const MAX_POST_BYTES: usize = 256 * 1024;

/// The callback that is a person's reply.
const RECEIVED: &str = "message-received";

/// What a post without the credentials is answered with, beside 401.
pub const CHALLENGE: &str = "Basic realm=\"outreach-sync\", charset=\"UTF-8\"";

/// A Bandwidth source as configured now: the credentials its posts carry, and its own
/// revocation words.
#[derive(Debug, Clone)]
pub struct Bandwidth {
    username: [u8; 32],
    passwords: Vec<SecretString>,
    words: Vec<String>,
}

impl Bandwidth {
    pub fn new(settings: &BandwidthSettings, words: &[String]) -> Self {
        Self {
            username: Sha256::digest(settings.username.trim().as_bytes()).into(),
            passwords: settings.accepted(),
            words: words.to_vec(),
        }
    }
}

/// The user name and password of an `Authorization: Basic` header given once; `None` when
/// there is none, two, or one of another scheme or form.
fn basic(headers: &http::HeaderMap) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
    let value = match (values.next(), values.next()) {
        (Some(value), None) => value.as_bytes(),
        _ => return None,
    };
    let (scheme, credentials) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let decoded = STANDARD.decode(credentials.trim_ascii()).ok()?;
    let colon = decoded.iter().position(|b| *b == b':')?;
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

impl Posted for Bandwidth {
    fn max_body_bytes(&self) -> usize {
        MAX_POST_BYTES
    }

    fn signature_header(&self) -> &'static str {
        "authorization"
    }

    /// In constant time: each side's SHA-256 compared, so that neither a byte nor a
    /// length of a credential shows in how long a refusal takes.
    fn verify(
        &self,
        headers: &http::HeaderMap,
        _body: &[u8],
        _received_at: DateTime<Utc>,
    ) -> Result<usize, String> {
        let (username, password) = basic(headers).ok_or_else(|| {
            "no Authorization: Basic header given once (the application's callback credentials)"
                .to_owned()
        })?;
        let given_username: [u8; 32] = Sha256::digest(&username).into();
        let username_matches = self.username[..].ct_eq(&given_username[..]);
        let given: [u8; 32] = Sha256::digest(&password).into();
        let mut found = None;
        for (at, accepted) in self.passwords.iter().enumerate() {
            let accepted: [u8; 32] = Sha256::digest(accepted.expose_secret().as_bytes()).into();
            let matches = bool::from(accepted[..].ct_eq(&given[..]) & username_matches);
            if matches && found.is_none() {
                found = Some(at);
            }
        }
        found.ok_or_else(|| {
            "the Basic credentials are not the source's user name and any of its passwords"
                .to_owned()
        })
    }

    fn key(&self, body: &[u8]) -> Option<String> {
        let post = strict_json(body).ok()?;
        match post.as_array()?.as_slice() {
            [callback] => {
                record_key("message.id", text_at(callback, &["message", "id"]).ok()?).ok()
            }
            _ => None,
        }
    }

    fn answer(&self) -> (&'static str, &'static str) {
        ("application/json", "{}")
    }

    fn describe(&self) -> Vec<String> {
        vec![
            "HTTP Basic, the application's callback credentials".to_owned(),
            format!("{} password(s) accepted", self.passwords.len()),
        ]
    }

    fn challenge(&self) -> Option<&'static str> {
        Some(CHALLENGE)
    }
}

impl ReadsPost for Bandwidth {
    fn records(
        &self,
        body: &[u8],
        received_at: DateTime<Utc>,
        region: crate::model::phone::Region,
    ) -> Result<Vec<ReadRecord>, String> {
        let post = strict_json(body)?;
        let callbacks = post.as_array().ok_or_else(|| {
            format!(
                "{}, not an array of callbacks as Bandwidth posts them",
                kind_of(&post)
            )
        })?;
        let mut records = Vec::with_capacity(callbacks.len());
        for (at, callback) in callbacks.iter().enumerate() {
            let read = record(callback, received_at, (region, &self.words))
                .map_err(|why| format!("callback {}: {why}", at + 1))?;
            records.extend(read);
        }
        Ok(records)
    }
}

/// The reply `callback` is, received at `received_at`; `None` for a callback of another
/// type without a message id; why it cannot be read one way, when it cannot.
pub fn record(
    callback: &serde_json::Value,
    received_at: DateTime<Utc>,
    (region, words): (crate::model::phone::Region, &[String]),
) -> Result<Option<ReadRecord>, String> {
    if !callback.is_object() {
        return Err(format!("{}, not a callback object", kind_of(callback)));
    }
    let callback_type = text_at(callback, &["type"])?;
    let id = text_at(callback, &["message", "id"])?;
    let stands_on = serde_json::json!({ "callback": callback });
    if callback_type != Some(RECEIVED) {
        let key = record_key("message.id", id);
        return Ok(not_a_reply("callback", callback_type, key, stands_on));
    }
    let key = record_key("message.id", id)?;
    let text = text_at(callback, &["message", "text"])?.unwrap_or_default();
    // When the person sent it, as Bandwidth says (the ledger ranks a time past the
    // tolerance at the receipt); the receipt when it says nothing readable.
    let occurred_at = text_at(callback, &["message", "time"])?
        .and_then(|time| DateTime::parse_from_rfc3339(time).ok())
        .map_or(received_at, |time| time.with_timezone(&Utc));
    let number = || {
        from_number(
            "message.from",
            text_at(callback, &["message", "from"])?,
            region,
        )
    };
    let said = reply_said((text, None, words), number, received_at, occurred_at)?;
    Ok(Some(ReadRecord {
        key,
        said,
        stands_on,
    }))
}

#[cfg(test)]
mod tests;
