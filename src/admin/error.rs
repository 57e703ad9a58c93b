//! The admin listener's one error type: every failure is JSON `{"code":N,"message":"..."}`,
//! and database causes go to the log, never to the client.

use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::ingest::ErrorBody;
use crate::model::text::bounded;

/// Most characters of an extractor's rejection an error quotes (it may quote the request).
const REJECTION_CHARS: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("a bearer token is required (Authorization: Bearer <token>)")]
    Unauthorized,
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    /// What was asked is done already (a reply decided before).
    #[error("{0}")]
    Conflict(String),
    #[error("no such route")]
    NoRoute,
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    #[error("{0}")]
    TooLarge(String),
    #[error("the database is unavailable")]
    Database(#[from] crate::store::Error),
    #[error(
        "too many failed tokens from this address; try again in {} s",
        .0.retry_after_secs()
    )]
    TooManyFailures(super::guard::Limited),
    #[error(
        "{} long reads (reports, batch lookups) are running already; try again in {} s",
        crate::store::LONG_READS_AT_ONCE,
        BUSY_RETRY_SECS
    )]
    Busy,
}

/// How long a caller told the long reads are busy is asked to wait.
pub const BUSY_RETRY_SECS: u64 = 5;

impl AdminError {
    fn status(&self) -> StatusCode {
        match self {
            AdminError::Unauthorized => StatusCode::UNAUTHORIZED,
            AdminError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AdminError::NotFound(_) | AdminError::NoRoute => StatusCode::NOT_FOUND,
            AdminError::Conflict(_) => StatusCode::CONFLICT,
            AdminError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            AdminError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AdminError::Database(_) => StatusCode::SERVICE_UNAVAILABLE,
            AdminError::TooManyFailures(_) | AdminError::Busy => StatusCode::TOO_MANY_REQUESTS,
        }
    }
}

impl IntoResponse for AdminError {
    fn into_response(self) -> Response {
        if let AdminError::Database(error) = &self {
            tracing::error!(%error, "admin request failed on the database");
        }
        let status = self.status();
        let body = axum::Json(ErrorBody {
            code: status.as_u16(),
            message: self.to_string(),
        });
        match &self {
            AdminError::Unauthorized => {
                (status, [(header::WWW_AUTHENTICATE, "Bearer")], body).into_response()
            }
            AdminError::TooManyFailures(limited) => {
                let retry = limited.retry_after_secs().to_string();
                (status, [(header::RETRY_AFTER, retry)], body).into_response()
            }
            AdminError::Busy => (
                status,
                [(header::RETRY_AFTER, BUSY_RETRY_SECS.to_string())],
                body,
            )
                .into_response(),
            _ => (status, body).into_response(),
        }
    }
}

impl From<QueryRejection> for AdminError {
    fn from(rejection: QueryRejection) -> Self {
        AdminError::BadRequest(bounded(&rejection.body_text(), REJECTION_CHARS))
    }
}

impl From<BytesRejection> for AdminError {
    fn from(rejection: BytesRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            AdminError::TooLarge("request body too large".into())
        } else {
            AdminError::BadRequest(bounded(&rejection.body_text(), REJECTION_CHARS))
        }
    }
}

impl From<crate::apply::LocalError> for AdminError {
    fn from(error: crate::apply::LocalError) -> Self {
        match error {
            crate::apply::LocalError::Invalid(message) => AdminError::BadRequest(message),
            crate::apply::LocalError::Database(error) => AdminError::Database(error),
        }
    }
}

pub async fn not_found() -> AdminError {
    AdminError::NoRoute
}

pub async fn method_not_allowed() -> AdminError {
    AdminError::MethodNotAllowed
}
