//! The client's one error type. Its text never carries a secret: bodies of token responses
//! are not echoed, and request URLs hold no credentials.

use chrono::{DateTime, Utc};

use super::models::ErrorBody;
use crate::model::text::bounded;

/// Most characters of a redirect's `Location` an error quotes.
pub const LOCATION_CHARS: usize = 200;
/// Most characters of the service's error message an error quotes.
pub const SERVICE_MESSAGE_CHARS: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Refused before sending: the request breaks a documented constraint.
    #[error("invalid request: {field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },

    /// The service answered with an error status (not retried, or no longer).
    #[error(
        "service answered {status}: {}{}",
        service_message(body),
        service_code(body)
    )]
    Api { status: u16, body: ErrorBody },

    /// The service answered with a redirect. None is followed: a request re-sent elsewhere
    /// would carry its body there (the client secret of a token request, the signing
    /// secret of a registration).
    #[error(
        "the service answered {status}, a redirect to {location}, which is not followed \
         (a redirect would carry the request and its secrets elsewhere); if the service has \
         moved, set service.base_url to its new address"
    )]
    Redirected {
        status: u16,
        /// `Location` as given, escaped and cut to [`LOCATION_CHARS`].
        location: String,
    },

    /// The answer was larger than the client reads.
    #[error(
        "the service's answer is larger than {limit} bytes, the most this client reads; it was not read further"
    )]
    TooLarge { limit: usize },

    /// A list's cursors went round in a circle: a cursor came back that an earlier page
    /// had given.
    #[error(
        "the service's paging of {endpoint} goes round in a circle: after {pages} pages it gave again the cursor {cursor} of an earlier page; the list was not read further"
    )]
    PagingCycle {
        endpoint: String,
        pages: u64,
        /// The cursor seen twice, escaped and cut.
        cursor: String,
    },

    /// A list went on for more pages than any account holds.
    #[error(
        "the service's paging of {endpoint} went past {pages} pages; the list was not read further"
    )]
    TooManyPages { endpoint: String, pages: u64 },

    /// v2.1 refuses to page past its cursor depth (100,000 objects) with 422.
    #[error("the v2 cursor went past the service's paging depth (100,000 objects): {message}")]
    CursorDepthExceeded { message: String },

    /// The token endpoint refused the credentials (or answered without a token).
    #[error("token request refused with {status} ({consecutive_failures} failed in a row)")]
    TokenRejected {
        status: u16,
        consecutive_failures: u32,
    },

    /// Too many failed token requests in a row: no token is asked for until `until`, so the
    /// service does not block this address.
    #[error(
        "token requests paused until {until} after {consecutive_failures} failures in a row; \
         check service.client_id and service.client_secret"
    )]
    TokenBlocked {
        until: DateTime<Utc>,
        consecutive_failures: u32,
    },

    /// A resource endpoint still answered 401 with a freshly minted token.
    #[error(
        "the service refused a fresh token with 401: {}",
        service_message(body)
    )]
    Unauthorized { body: ErrorBody },

    /// Retryable failures (429, 5xx, timeouts, connection errors) outlasted the retries.
    #[error("gave up after {attempts} attempts: {last}")]
    RetriesExhausted {
        attempts: u32,
        #[source]
        last: Box<ClientError>,
    },

    /// Timeout, connection refused or reset, or a body that could not be read.
    #[error("transport: {0}")]
    Transport(String),

    /// A 2xx whose body is not the documented shape.
    #[error("unexpected response from {endpoint}: {message}")]
    Decode { endpoint: String, message: String },

    /// The token guard's store failed to load or save.
    #[error("token guard store: {0}")]
    Store(String),
}

fn service_code(body: &ErrorBody) -> String {
    match &body.service_error_code {
        Some(code) => format!(" (serviceErrorCode {})", bounded(code, 50)),
        None => String::new(),
    }
}

/// The service's message, bounded and escaped: it is someone else's text, shown in logs,
/// terminals and `status`.
fn service_message(body: &ErrorBody) -> String {
    bounded(&body.message, SERVICE_MESSAGE_CHARS)
}

impl ClientError {
    /// The HTTP status, when the service answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } | Self::TokenRejected { status, .. } => Some(*status),
            Self::Unauthorized { .. } => Some(401),
            Self::CursorDepthExceeded { .. } => Some(422),
            Self::RetriesExhausted { last, .. } => last.status(),
            _ => None,
        }
    }

    /// The service's error body, when there is one.
    pub fn body(&self) -> Option<&ErrorBody> {
        match self {
            Self::Api { body, .. } | Self::Unauthorized { body } => Some(body),
            Self::RetriesExhausted { last, .. } => last.body(),
            _ => None,
        }
    }

    /// A 404: the addressed resource does not exist.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// A redirect answer, its `Location` quoted up to [`LOCATION_CHARS`].
    pub(crate) fn redirected(status: u16, location: Option<&[u8]>) -> Self {
        let location = match location {
            Some(bytes) => format!(
                "`{}`",
                bounded(&String::from_utf8_lossy(bytes), LOCATION_CHARS)
            ),
            None => "nowhere (no Location header)".to_owned(),
        };
        Self::Redirected { status, location }
    }

    /// A decoding failure of `endpoint`'s answer; the decoder's text quotes the answer, so
    /// it is bounded and escaped.
    pub(crate) fn decode(endpoint: &str, message: &str) -> Self {
        Self::Decode {
            endpoint: endpoint.to_owned(),
            message: bounded(message, SERVICE_MESSAGE_CHARS),
        }
    }

    pub(crate) fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        Self::Invalid {
            field,
            message: message.into(),
        }
    }

    /// Reqwest's text names the URL and the cause; our URLs carry no secrets.
    pub(crate) fn transport(error: &reqwest::Error) -> Self {
        let mut text = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::Transport(text)
    }
}
