//! Google's JSON error format, `{"error":{"code","message","errors":[{"message","domain",
//! "reason"}],"status"}}`, and the bodies of the faults injected into BigQuery.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error in Google's JSON error format: `{"error":{"code","message","errors":[{"message",
/// "domain","reason"}],"status"}}`.
#[derive(Debug)]
pub(crate) struct GoogleError {
    status: StatusCode,
    reason: &'static str,
    domain: &'static str,
    message: String,
}

impl GoogleError {
    /// An error of the `global` domain.
    fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            reason,
            domain: "global",
            message: message.into(),
        }
    }

    /// 400 `invalid`.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid", message)
    }

    /// 404 `notFound`.
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "notFound", message)
    }

    /// 401 `unauthorized`.
    pub(crate) fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 409 `duplicate`.
    pub(crate) fn duplicate(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "duplicate", message)
    }

    /// 403 in the `usageLimits` domain (`quotaExceeded`, `rateLimitExceeded`).
    fn usage_limits(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            domain: "usageLimits",
            ..Self::new(StatusCode::FORBIDDEN, reason, message)
        }
    }
}

/// The canonical gRPC code Google's JSON errors carry as `status`.
fn canonical_status(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        s if s >= 500 => "INTERNAL",
        _ => "FAILED_PRECONDITION",
    }
}

impl IntoResponse for GoogleError {
    fn into_response(self) -> Response {
        let body = json!({
            "error": {
                "code": self.status.as_u16(),
                "message": self.message,
                "errors": [{"message": self.message, "domain": self.domain, "reason": self.reason}],
                "status": canonical_status(self.status),
            }
        });
        (self.status, axum::Json(body)).into_response()
    }
}

/// The body of an injected error status: `backendError` for a 5xx, `rateLimitExceeded` for
/// a 403 or a 429, else the reason Google gives that status.
pub(crate) fn injected(status: StatusCode) -> Response {
    let (reason, text) = match status.as_u16() {
        403 | 429 => ("rateLimitExceeded", "Exceeded rate limits"),
        401 => (
            "unauthorized",
            "Request had invalid authentication credentials",
        ),
        404 => ("notFound", "Not found"),
        409 => ("duplicate", "Already Exists"),
        s if s >= 500 => (
            "backendError",
            "An internal error occurred and the request could not be completed",
        ),
        _ => ("invalid", "Invalid request"),
    };
    let mut error = GoogleError::new(status, reason, format!("{text}. (injected)"));
    if reason == "rateLimitExceeded" {
        error.domain = "usageLimits";
    }
    error.into_response()
}

/// The injected 403 of a quota (`quota`) or of a rate limit, as Google words them.
pub(crate) fn limited(quota: bool) -> Response {
    let error = if quota {
        GoogleError::usage_limits(
            "quotaExceeded",
            "Quota exceeded: Your project exceeded quota for streaming insert bytes. For more \
             information, see https://cloud.google.com/bigquery/docs/troubleshoot-quotas \
             (injected)",
        )
    } else {
        GoogleError::usage_limits(
            "rateLimitExceeded",
            "Exceeded rate limits: too many api requests per user per method for this \
             user_method. For more information, see \
             https://cloud.google.com/bigquery/docs/troubleshoot-quotas (injected)",
        )
    };
    error.into_response()
}
