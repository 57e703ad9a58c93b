//! How every kind's requests are made and their answers read: one HTTP client with no
//! redirects, answers read up to a bound, transport errors without their URL, and the
//! classes an answer falls in.

use std::time::Duration;

/// Longest wait for an answer (a destination's own `timeout_secs` may set another per
/// request); no answer is a failure like a 5xx.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest text of an answer kept as an error or a reason.
pub const MAX_ERROR_BODY: usize = 200;

/// The one HTTP client of every sender: no redirects (a 3xx is an answer to show, not to
/// follow with signed consent data or an API key). A client that cannot be built with these
/// is an error, never a default client without them.
pub fn http_client() -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("outreach-sync/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// At most `most` bytes of an answer's body, as text: an error page is shown, never read
/// whole (it may be any size).
pub async fn prefix(mut response: reqwest::Response, most: usize) -> String {
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

/// A transport error as shown: its causes, without its URL (a URL may carry a token).
pub fn transport_error(error: reqwest::Error) -> String {
    if error.is_timeout() {
        return "no answer within the timeout".to_owned();
    }
    let error = error.without_url();
    let mut text = format!("no answer: {error}");
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// What a system of record answered a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A 2xx.
    Success,
    /// A 404, or another 4xx but 401, 403, 408 and 429: this entry is refused, in the
    /// system's own words.
    Refused(String),
    /// 401 or 403: the key does not work.
    Credentials(String),
    /// No answer, a 3xx (never followed), 408, 429 or 5xx: tried again later.
    /// `unknown`: the request may have reached the system and been acted on (it was sent,
    /// and no answer came: a timeout, a connection cut after the request), as opposed to
    /// one that never left (no connection) or was answered.
    Retry {
        error: String,
        retry_after: Option<Duration>,
        unknown: bool,
    },
}

impl Answer {
    /// The answer of a request sent (or not).
    pub async fn of(sent: Result<reqwest::Response, reqwest::Error>) -> Self {
        let response = match sent {
            Ok(response) => response,
            Err(error) => {
                // A request that never connected (or was never built) did not arrive.
                let unknown = !error.is_connect() && !error.is_builder();
                return Self::Retry {
                    error: transport_error(error),
                    retry_after: None,
                    unknown,
                };
            }
        };
        let status = response.status();
        if status.is_success() {
            return Self::Success;
        }
        let retry_after = crate::client::retry_after(response.headers());
        let text = words(&prefix(response, MAX_ERROR_BODY * 20).await);
        let error = format!("answered {status}: {text}");
        match status.as_u16() {
            401 | 403 => Self::Credentials(error),
            300..=399 => Self::Retry {
                error: format!("answered {status}: redirects are not followed"),
                retry_after: None,
                unknown: false,
            },
            408 | 429 | 500.. => Self::Retry {
                error,
                retry_after,
                unknown: false,
            },
            _ => Self::Refused(error),
        }
    }
}

/// The system's own words in an error body: VAN's `errors[].text` (with the property it
/// names), Action Network's `error`, else the text itself; bounded and escaped.
pub fn words(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let from_json = parsed.and_then(|json| {
        if let Some(errors) = json.get("errors").and_then(|e| e.as_array()) {
            let texts: Vec<String> = errors
                .iter()
                .filter_map(|e| {
                    let text = e.get("text").and_then(|t| t.as_str())?;
                    let properties = e
                        .get("properties")
                        .and_then(|p| p.as_array())
                        .map(|p| {
                            p.iter()
                                .filter_map(|p| p.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .filter(|p| !p.is_empty());
                    Some(match properties {
                        Some(p) => format!("{text} ({p})"),
                        None => text.to_owned(),
                    })
                })
                .collect();
            return (!texts.is_empty()).then(|| texts.join("; "));
        }
        json.get("error")
            .and_then(|e| e.as_str())
            .map(str::to_owned)
    });
    let text = from_json.unwrap_or_else(|| body.trim().to_owned());
    crate::model::text::bounded(&text, MAX_ERROR_BODY)
}

/// One request of an entry: POSTed as JSON to `path`; once answered with success, `bit` is
/// kept among the entry's actions done, so it is never sent again.
#[derive(Debug, Clone)]
pub struct Step {
    pub bit: i64,
    /// Its name in logs.
    pub action: &'static str,
    pub path: String,
    pub body: serde_json::Value,
}

/// What is sent for one entry: the person it is about, as the system knows people (VAN: a
/// VAN ID and the number; Action Network: the number), and its requests.
#[derive(Debug, Clone)]
pub struct Plan {
    pub person: String,
    pub steps: Vec<Step>,
}

/// Why a destination cannot be written now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// 401 or 403: until its key works again.
    Credentials(String),
    /// What the configuration names is not there (VAN: a result code, a contact type).
    Lookup(String),
    /// No answer, a 3xx, 408, 429, 5xx, or an answer that does not parse: tried again.
    Retry {
        error: String,
        retry_after: Option<std::time::Duration>,
    },
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Credentials(error) => write!(f, "credentials: {error}"),
            Stop::Lookup(error) => write!(f, "lookup: {error}"),
            Stop::Retry { error, .. } => f.write_str(error),
        }
    }
}

/// The JSON a GET answers, `what` naming it in errors; bounded (a lookup list is small).
pub(super) async fn read_json<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
    what: &str,
) -> Result<T, Stop> {
    /// A committee's lookup lists are a few kilobytes.
    const MOST: usize = 1 << 20;
    let response = request.send().await.map_err(|error| Stop::Retry {
        error: format!("{what}: {}", transport_error(error)),
        retry_after: None,
    })?;
    let status = response.status();
    if !status.is_success() {
        let retry_after = crate::client::retry_after(response.headers());
        let error = format!(
            "{what}: answered {status}: {}",
            words(&prefix(response, MAX_ERROR_BODY * 20).await)
        );
        return Err(match status.as_u16() {
            401 | 403 => Stop::Credentials(error),
            300..=399 => Stop::Retry {
                error: format!("{what}: answered {status}: redirects are not followed"),
                retry_after: None,
            },
            _ => Stop::Retry { error, retry_after },
        });
    }
    let body = prefix(response, MOST + 1).await;
    if body.len() > MOST {
        return Err(Stop::Retry {
            error: format!("{what}: the answer is over {MOST} bytes"),
            retry_after: None,
        });
    }
    serde_json::from_str(&body).map_err(|error| Stop::Retry {
        error: format!("{what}: the answer is not the JSON expected: {error}"),
        retry_after: None,
    })
}

/// `+12025550143` as `("1", "2025550143")`; an `Err` is why it cannot be sent.
pub(super) fn dialing(e164: &str) -> Result<(String, String), String> {
    crate::model::phone::dialing(e164).map_err(|error| format!("the number: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_systems_own_words_are_kept_bounded() {
        let van = r#"{"errors":[{"code":"INVALID_PARAMETER","text":"'resultCodeId' and 'responses' cannot both be specified","properties":["resultCodeId"]}]}"#;
        assert_eq!(
            words(van),
            "'resultCodeId' and 'responses' cannot both be specified (resultCodeId)"
        );
        assert_eq!(words(r#"{"error":"API Key invalid"}"#), "API Key invalid");
        assert_eq!(words("  oops\n"), "oops");
        assert!(words(&"x".repeat(10_000)).chars().count() <= MAX_ERROR_BODY + 1);
    }
}
