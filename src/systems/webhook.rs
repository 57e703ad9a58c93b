//! The daemon's own format, what a `[[subscriber]]` gets: a batch of entries as one signed
//! Standard Webhooks message, and how the answer is read.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::Utc;
use secrecy::{ExposeSecret as _, SecretSlice};
use serde::Serialize;

use super::http::{MAX_ERROR_BODY, prefix, transport_error};
use crate::metrics::SubscriberOutcome;
use crate::model::LedgerEntry;
use crate::settings::Algorithm;
use crate::store::codec;

/// The body of the contract: `{"type":"consent.changed","timestamp","data":{"items"}}`.
#[derive(Serialize)]
struct Message<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    timestamp: String,
    data: Items<'a>,
}

#[derive(Serialize)]
struct Items<'a> {
    items: &'a [LedgerEntry],
}

/// A subscriber's endpoint and the key its messages are signed with.
pub struct Webhook {
    url: String,
    key: SecretSlice<u8>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("url", &crate::settings::redacted_url(&self.url))
            .finish_non_exhaustive()
    }
}

impl Webhook {
    pub fn new(url: String, key: SecretSlice<u8>) -> Self {
        Self { url, key }
    }

    /// Posts `items` as one signed message, `id` its `webhook-id`.
    pub async fn post(&self, http: &reqwest::Client, id: &str, items: &[LedgerEntry]) -> Posted {
        let now = Utc::now();
        let message = Message {
            kind: "consent.changed",
            timestamp: codec::timestamp(now),
            data: Items { items },
        };
        let body = match serde_json::to_vec(&message) {
            Ok(body) => body,
            Err(error) => {
                return Posted::failed(format!("cannot encode the entries: {error}"), None);
            }
        };
        let timestamp = now.timestamp().to_string();
        let signature = sign(self.key.expose_secret(), id, &timestamp, &body);
        let sent = http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", &timestamp)
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) => return Posted::failed(transport_error(error), None),
        };
        let status = response.status();
        if status.is_success() {
            return Posted::Accepted;
        }
        if status == reqwest::StatusCode::GONE {
            return Posted::Gone;
        }
        let retry_after = crate::client::retry_after(response.headers());
        let text = prefix(response, MAX_ERROR_BODY * 4).await;
        let text: String = text.chars().take(MAX_ERROR_BODY).collect();
        let transient = status.is_server_error() || matches!(status.as_u16(), 408 | 429);
        let error = format!("answered {status}: {}", text.trim());
        Posted::Failed {
            error,
            retry_after,
            rejected: !transient,
        }
    }
}

/// How a post (or a destination's batch) ended.
pub enum Posted {
    Accepted,
    Gone,
    /// A destination stopped until retried: its key, its lookups.
    Stopped(String),
    /// `rejected`: a 3xx or 4xx other than 408, 429 and 410: retried all the same, but it
    /// needs a person.
    Failed {
        error: String,
        retry_after: Option<Duration>,
        rejected: bool,
    },
}

impl Posted {
    pub fn failed(error: String, retry_after: Option<Duration>) -> Self {
        Self::Failed {
            error,
            retry_after,
            rejected: false,
        }
    }

    pub fn metric(&self) -> SubscriberOutcome {
        match self {
            Posted::Accepted => SubscriberOutcome::Delivered,
            Posted::Gone | Posted::Stopped(_) => SubscriberOutcome::Gone,
            Posted::Failed { rejected: true, .. } => SubscriberOutcome::Rejected,
            Posted::Failed { .. } => SubscriberOutcome::Failed,
        }
    }
}

/// `v1,` + base64 of HMAC-SHA256 over `{id}.{timestamp}.{body}`.
fn sign(key: &[u8], id: &str, timestamp: &str, body: &[u8]) -> String {
    let tag = crate::signature::compute(
        Algorithm::Sha256,
        key,
        &[id.as_bytes(), b".", timestamp.as_bytes(), b".", body],
    );
    format!("v1,{}", STANDARD.encode(tag))
}
