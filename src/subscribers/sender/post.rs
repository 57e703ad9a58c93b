//! One request to a subscriber: the entries as a signed Standard Webhooks message, and
//! how the answer is read.

use super::*;

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
    pub(super) async fn post(&self, items: &[LedgerEntry], first: i64, last: i64) -> Posted {
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
        let signature = sign(self.subscriber.key(), &id, &timestamp, &body);
        let sent = self
            .http
            .post(&self.subscriber.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", &timestamp)
            .header("webhook-signature", signature)
            .body(body)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) => {
                let error = if error.is_timeout() {
                    format!("no answer within {}s", REQUEST_TIMEOUT.as_secs())
                } else {
                    format!("no answer: {}", without_url(error))
                };
                return Posted::failed(error, None);
            }
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

/// At most `most` bytes of an answer's body, as text: a receiver's error page is shown,
/// never read whole (it may be any size).
async fn prefix(mut response: reqwest::Response, most: usize) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < most {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(most);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// How a post ended.
pub(super) enum Posted {
    Accepted,
    Gone,
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
            Posted::Gone => SubscriberOutcome::Gone,
            Posted::Failed { rejected: true, .. } => SubscriberOutcome::Rejected,
            Posted::Failed { .. } => SubscriberOutcome::Failed,
        }
    }
}

/// A transport error's causes, without its URL (a subscriber's URL may carry a token).
fn without_url(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
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
