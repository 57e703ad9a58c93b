//! What VAN's handlers share: who is calling, VAN's error body
//! (`{"errors":[{"code","text","properties"}]}`), the body read as JSON, a known VAN ID.

use axum::Json;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Van;

/// One error of VAN's error body.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct VanErrorItem {
    code: String,
    text: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    properties: Vec<String>,
}

/// An error answer: a status and one or more errors.
#[derive(Debug)]
pub(crate) struct VanError {
    status: StatusCode,
    errors: Vec<VanErrorItem>,
}

#[derive(Serialize)]
struct ErrorsBody<'a> {
    errors: &'a [VanErrorItem],
}

impl VanError {
    pub(crate) fn new(
        status: StatusCode,
        code: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self {
            status,
            errors: vec![VanErrorItem {
                code: code.into(),
                text: text.into(),
                properties: Vec::new(),
            }],
        }
    }

    pub(super) fn unauthorized(text: &str) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", text)
    }

    pub(super) fn not_found(text: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NOT_FOUND", text)
    }

    pub(super) fn invalid(errors: Vec<VanErrorItem>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            errors,
        }
    }
}

impl IntoResponse for VanError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorsBody {
                errors: &self.errors,
            }),
        )
            .into_response()
    }
}

/// An `INVALID_PARAMETER` error naming the offending properties.
pub(super) fn invalid(properties: &[&str], text: impl Into<String>) -> VanErrorItem {
    VanErrorItem {
        code: "INVALID_PARAMETER".into(),
        text: text.into(),
        properties: properties.iter().map(|p| (*p).to_owned()).collect(),
    }
}

/// Who is calling: the committee of the key (by position), the database mode, and the
/// application name (the Basic user name).
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub committee: usize,
    pub mode: u8,
    pub application: String,
}

/// The body as JSON of `T`, or VAN's 400.
pub(super) fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, VanError> {
    serde_json::from_slice(body).map_err(|e| {
        VanError::invalid(vec![VanErrorItem {
            code: "INVALID_PARAMETER".into(),
            text: format!("The request body could not be read: {e}"),
            properties: Vec::new(),
        }])
    })
}

/// The VAN ID of the route, if a person has it.
pub(super) fn known(van: &Van, raw: &str) -> Result<u64, VanError> {
    raw.parse::<u64>()
        .ok()
        .filter(|id| van.people.contains_key(id))
        .ok_or_else(|| VanError::not_found(format!("Person {raw} not found")))
}
