//! One request to a subscriber: the entries as a signed Standard Webhooks message, and
//! how the answer is read.

use super::*;
use crate::subscribers::answer::{MAX_ERROR_BODY, prefix, transport_error};

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

impl Sender {
    /// Posts `items` as one signed message.
    #[tracing::instrument(
        name = "subscriber_request",
        skip_all,
        fields(subscriber = %self.subscriber.name, first, last, entries = items.len())
    )]
    pub(super) async fn post(
        &self,
        (url, key): (&str, &secrecy::SecretSlice<u8>),
        items: &[LedgerEntry],
        first: i64,
        last: i64,
    ) -> Posted {
        use secrecy::ExposeSecret as _;
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
        let id = format!("{}-{first}-{last}", self.subscriber.name);
        let timestamp = now.timestamp().to_string();
        let signature = sign(key.expose_secret(), &id, &timestamp, &body);
        let sent = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &id)
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

/// How a post ended.
pub(super) enum Posted {
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
    pub(super) fn failed(error: String, retry_after: Option<Duration>) -> Self {
        Self::Failed {
            error,
            retry_after,
            rejected: false,
        }
    }

    pub(super) fn metric(&self) -> SubscriberOutcome {
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
