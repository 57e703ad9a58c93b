//! `/van/v4`: HTTP Basic (the application name, and `{apiKey}|{mode}`), the committee's
//! result codes and contact types, canvass responses and a person's phones, every error in
//! VAN's `{"errors":[{"code","text","properties"}]}`. The people's endpoints are
//! `van_people`'s.

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::FakesState;
use super::van::Van;
use super::van_people;

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

    fn unauthorized(text: &str) -> Self {
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

/// Who is calling: the committee of the key (by position) and the database mode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller {
    pub committee: usize,
    pub mode: u8,
}

/// Checks the Basic credentials and hands the handlers the caller.
pub(crate) async fn auth(
    State(fakes): State<FakesState>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = caller(&fakes.van(), request.headers());
    match caller {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

fn caller(van: &Van, headers: &HeaderMap) -> Result<Caller, VanError> {
    let encoded = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .ok_or_else(|| VanError::unauthorized("Basic authentication is required"))?;
    let decoded = STANDARD
        .decode(encoded.trim())
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| VanError::unauthorized("The credentials are not valid Basic credentials"))?;
    let (application, password) = decoded
        .split_once(':')
        .ok_or_else(|| VanError::unauthorized("The credentials are not valid Basic credentials"))?;
    if application.trim().is_empty() {
        return Err(VanError::unauthorized(
            "The user name must be the application name",
        ));
    }
    let (key, mode) = password.rsplit_once('|').ok_or_else(|| {
        VanError::unauthorized("The password must be the API key, `|`, and the database mode")
    })?;
    let mode = match mode {
        "0" => 0,
        "1" => 1,
        _ => {
            return Err(VanError::unauthorized(
                "The database mode must be 0 (MyVoters) or 1 (MyCampaign)",
            ));
        }
    };
    let committee = van
        .committee_of(key)
        .ok_or_else(|| VanError::unauthorized("The API key is not valid"))?;
    match van.committees[committee].revoked {
        Some(403) => Err(VanError::new(
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            "The API key has been revoked",
        )),
        Some(_) => Err(VanError::unauthorized("The API key has been revoked")),
        None => Ok(Caller { committee, mode }),
    }
}

pub(crate) async fn no_such_endpoint() -> VanError {
    VanError::not_found("No such endpoint")
}

pub(super) fn routes() -> Router<FakesState> {
    Router::new()
        .route("/canvassResponses/resultCodes", get(result_codes))
        .route("/canvassResponses/contactTypes", get(contact_types))
        .route(
            "/people/{van_id}/canvassResponses",
            post(van_people::canvass),
        )
        .route(
            "/people/{van_id}",
            get(van_people::person).post(van_people::update_person),
        )
}

async fn result_codes(
    State(fakes): State<FakesState>,
    Extension(caller): Extension<Caller>,
) -> Response {
    let van = fakes.van();
    Json(&van.committees[caller.committee].result_codes).into_response()
}

async fn contact_types(
    State(fakes): State<FakesState>,
    Extension(caller): Extension<Caller>,
) -> Response {
    let van = fakes.van();
    Json(van.committees[caller.committee].contact_types()).into_response()
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
