//! What every system's requests share: one HTTP client with no redirects, answers read up
//! to a bound, transport errors without their URL, and the classes an answer falls in (the
//! words of an error are each system's own: [`Destination::error_words`]).

use std::time::Duration;

use super::{Destination, Stop};

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

/// `value` as a header value marked sensitive (kept out of logs and `Debug`); a value that
/// cannot be a header is sent empty, which the system refuses as a missing key.
pub fn sensitive(value: &str) -> reqwest::header::HeaderValue {
    let mut value = reqwest::header::HeaderValue::from_str(value)
        .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static(""));
    value.set_sensitive(true);
    value
}

/// At most `most` bytes of an answer's body, as text: an error page is shown, never read
/// whole (it may be any size).
pub async fn prefix(response: reqwest::Response, most: usize) -> String {
    let (bytes, _) = read_up_to(response, most).await;
    String::from_utf8_lossy(&bytes).into_owned()
}

/// At most `most` bytes of an answer's body, and the error that ended it early (a timeout,
/// a connection cut), if one did.
async fn read_up_to(
    mut response: reqwest::Response,
    most: usize,
) -> (Vec<u8>, Option<reqwest::Error>) {
    let mut bytes = Vec::new();
    while bytes.len() < most {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(error) => return (bytes, Some(error)),
        }
    }
    bytes.truncate(most);
    (bytes, None)
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
    /// The answer of a request sent (or not) to `system`.
    pub async fn of(
        sent: Result<reqwest::Response, reqwest::Error>,
        system: &dyn Destination,
    ) -> Self {
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
            return Self::verdict(response, system).await;
        }
        let retry_after = crate::client::retry_after(response.headers());
        let text = words(&prefix(response, MAX_ERROR_BODY * 20).await, system);
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

impl Answer {
    /// The answer of a successful (2xx) `response`: a success, unless the system reads its
    /// body for its verdict ([`Destination::reads_success`]); a body that does not come whole
    /// is an unknown answer (the request was acted on, or not).
    async fn verdict(response: reqwest::Response, system: &dyn Destination) -> Self {
        if !system.reads_success() {
            return Self::Success;
        }
        let status = response.status();
        let (body, cut) = read_up_to(response, MAX_VERDICT + 1).await;
        if cut.is_some() || body.len() > MAX_VERDICT {
            return Self::Retry {
                error: format!(
                    "answered {status}, but its body did not come whole within {MAX_VERDICT} bytes and the timeout"
                ),
                retry_after: None,
                unknown: true,
            };
        }
        system.success_of(&String::from_utf8_lossy(&body))
    }
}

/// The most bytes of a successful answer read for its verdict: a profile as Mobile Commons
/// answers it is a few kilobytes.
const MAX_VERDICT: usize = 64 << 10;

/// The system's own words in an error body (in its error format, else the text itself);
/// bounded and escaped.
pub fn words(body: &str, system: &dyn Destination) -> String {
    let text = system
        .error_words_in(body)
        .unwrap_or_else(|| body.trim().to_owned());
    crate::model::text::bounded(&text, MAX_ERROR_BODY)
}

/// How a system words its errors: its words in a JSON error body, if any.
pub type ErrorWords<'a> = &'a (dyn Fn(&serde_json::Value) -> Option<String> + Sync);

/// [`words`], for a system whose error format `error_words` reads.
pub fn words_with(body: &str, error_words: ErrorWords<'_>) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let text = parsed
        .and_then(|json| error_words(&json))
        .unwrap_or_else(|| body.trim().to_owned());
    crate::model::text::bounded(&text, MAX_ERROR_BODY)
}

/// The JSON a GET answers, `what` naming it in errors; bounded (a lookup list is small).
pub(super) async fn read_json<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
    what: &str,
    system: &dyn Destination,
) -> Result<T, Stop> {
    read_json_with(request, what, &|json: &serde_json::Value| {
        system.error_words(json)
    })
    .await
}

/// The JSON an answer to `request` holds, `what` naming it in errors, the system's errors
/// read by `error_words`; bounded (a lookup list or a page is small).
pub(super) async fn read_json_with<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
    what: &str,
    error_words: ErrorWords<'_>,
) -> Result<T, Stop> {
    let words = |text: &str| {
        serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|json| error_words(&json))
    };
    let body = read_text_with(request, what, &words).await?;
    serde_json::from_str(&body).map_err(|error| Stop::Retry {
        error: format!("{what}: the answer is not the JSON expected: {error}"),
        retry_after: None,
    })
}

/// How a system words its errors in any format (Mobile Commons' XML): its words in an
/// error body's text, if any.
pub type TextWords<'a> = &'a (dyn Fn(&str) -> Option<String> + Sync);

/// The text of a successful answer to `request` (what it is in, JSON or XML, is the
/// caller's to read), `what` naming it in errors, the system's errors read by `words`;
/// bounded, [`MAX_ANSWER`] bytes at most.
pub(super) async fn read_text_with(
    request: reqwest::RequestBuilder,
    what: &str,
    words: TextWords<'_>,
) -> Result<String, Stop> {
    let response = request.send().await.map_err(|error| Stop::Retry {
        error: format!("{what}: {}", transport_error(error)),
        retry_after: None,
    })?;
    let status = response.status();
    if !status.is_success() {
        let retry_after = crate::client::retry_after(response.headers());
        let text = prefix(response, MAX_ERROR_BODY * 20).await;
        let said = words(&text).unwrap_or_else(|| text.trim().to_owned());
        let error = format!(
            "{what}: answered {status}: {}",
            crate::model::text::bounded(&said, MAX_ERROR_BODY)
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
    let (body, cut) = read_up_to(response, MAX_ANSWER + 1).await;
    if let Some(error) = cut {
        // A body that stops coming is no answer, not an answer cut short to parse.
        let why = if error.is_timeout() {
            "the answer did not come whole within the timeout".to_owned()
        } else {
            transport_error(error)
        };
        return Err(Stop::Retry {
            error: format!("{what}: {why}"),
            retry_after: None,
        });
    }
    if body.len() > MAX_ANSWER {
        return Err(Stop::Retry {
            error: format!("{what}: the answer is over {MAX_ANSWER} bytes"),
            retry_after: None,
        });
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The most bytes of an answer read: a committee's lookup lists are a few kilobytes, a page
/// of people some tens.
pub const MAX_ANSWER: usize = 1 << 20;

/// Why a link an answer gave is not followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("the base URL {0} is not a URL")]
    Base(String),
    #[error("a link ({0}) is not a URL")]
    NotAUrl(String),
    #[error("a link leads away from the API's host ({0}): the key is never sent there")]
    Away(String),
}

/// The one link resolver: `href`, a link an answer gave (`_links.next`, a page's URL),
/// resolved as a URL against `base` (the API's root, as configured), and taken only when
/// its scheme, host and port are the base's own, so that a credential sent with it goes
/// nowhere else. A relative link is resolved, never glued to the base as text: `@host`,
/// `:port` and `.suffix` stay in the path, `//host` and `\\host` name another host and are
/// refused.
pub fn resolve_link(base: &str, href: &str) -> Result<reqwest::Url, LinkError> {
    let shown = || crate::model::text::bounded(href, 100);
    // The root as a folder: a relative link resolves under it, as a path of the API would.
    let root = format!("{}/", base.trim_end_matches('/'));
    let base = reqwest::Url::parse(&root)
        .map_err(|_| LinkError::Base(crate::model::text::bounded(base, 100)))?;
    let url = base
        .join(href.trim())
        .map_err(|_| LinkError::NotAUrl(shown()))?;
    let same = url.scheme() == base.scheme()
        && url.host() == base.host()
        && url.port_or_known_default() == base.port_or_known_default()
        && url.username().is_empty()
        && url.password().is_none();
    if same {
        Ok(url)
    } else {
        Err(LinkError::Away(shown()))
    }
}

#[cfg(test)]
mod link_tests {
    use super::{LinkError, resolve_link};

    const BASE: &str = "http://127.0.0.1:19100";

    fn followed(href: &str) -> String {
        resolve_link(BASE, href)
            .map(|u| u.to_string())
            .unwrap_or_else(|e| format!("refused: {e}"))
    }

    #[test]
    fn a_relative_link_stays_on_the_apis_host_whatever_it_starts_with() {
        for (href, url) in [
            ("/people?page=2", "http://127.0.0.1:19100/people?page=2"),
            ("people?page=2", "http://127.0.0.1:19100/people?page=2"),
            (
                "@127.0.0.2:19101/people?page=2",
                "http://127.0.0.1:19100/@127.0.0.2:19101/people?page=2",
            ),
            (":19101/people", "http://127.0.0.1:19100/:19101/people"),
            (
                ".evil.example/people",
                "http://127.0.0.1:19100/.evil.example/people",
            ),
            (
                "%2F%2F127.0.0.2/people",
                "http://127.0.0.1:19100/%2F%2F127.0.0.2/people",
            ),
            (
                "http://127.0.0.1:19100/people?page=3",
                "http://127.0.0.1:19100/people?page=3",
            ),
        ] {
            assert_eq!(followed(href), url, "{href}");
        }
    }

    #[test]
    fn a_link_to_another_host_port_scheme_or_user_is_refused() {
        for href in [
            "//127.0.0.2:19100/people",
            "\\\\127.0.0.2:19100/people",
            "/\\127.0.0.2/people",
            "http://127.0.0.2:19100/people",
            "http://127.0.0.1:19101/people",
            "https://127.0.0.1:19100/people",
            "http://[::1]:19100/people",
            "http://user@127.0.0.1:19100/people",
            "http://127.0.0.1:19100@127.0.0.2/people",
            "file:///etc/passwd",
        ] {
            assert!(
                matches!(resolve_link(BASE, href), Err(LinkError::Away(_))),
                "{href}: {}",
                followed(href)
            );
        }
    }

    #[test]
    fn a_base_with_a_path_keeps_it_and_its_default_port_matches_an_explicit_one() {
        let base = "https://actionnetwork.org/api/v2/";
        let url = |href| resolve_link(base, href).map(|u| u.to_string());
        assert_eq!(
            url("people?page=2").as_deref(),
            Ok("https://actionnetwork.org/api/v2/people?page=2")
        );
        assert_eq!(
            url("https://actionnetwork.org:443/api/v2/people?page=2").as_deref(),
            Ok("https://actionnetwork.org/api/v2/people?page=2")
        );
        assert!(url("https://actionnetwork.org.evil.example/api/v2/people").is_err());
        assert!(matches!(
            resolve_link("not a url", "/x"),
            Err(LinkError::Base(_))
        ));
    }

    #[test]
    fn a_refused_link_is_shown_escaped_and_bounded() {
        let href = format!("//evil\u{1b}[31m/{}", "x".repeat(500));
        let error = resolve_link(BASE, &href).unwrap_err().to_string();
        assert!(!error.contains('\u{1b}'), "{error}");
        assert!(error.chars().count() < 250, "{error}");
    }
}
