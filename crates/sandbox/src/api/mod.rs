//! The sandbox's HTTP surface: `/v3` as documented (plus webhook registrations), the `/v2`
//! reads and consent update of the v2.1 document, all answering errors with the service's
//! error body; every resource request is logged (`/_control/requests`).

mod leads;
mod paging;
mod resources;
mod token;
mod v2;
mod webhooks;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, OriginalUri, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header, request::Parts};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use super::shared::{ApiRequest, Shared};
use super::validate::{self, BadLimit};
use super::wire::ErrorBody;
use super::world::Refusal;

pub(crate) type AppState = Arc<Shared>;

/// An error answered with the service's error body.
#[derive(Debug)]
pub(crate) struct ApiError(pub Refusal);

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        Self(refusal)
    }
}

impl ApiError {
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self(Refusal::bad_request(message))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let Refusal {
            status,
            message,
            service_code,
        } = self.0;
        let body = ErrorBody {
            code: status,
            message,
            service_error_code: service_code,
        };
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(body)).into_response()
    }
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// Query parameters, with the documented checks.
pub(crate) struct Params(pub BTreeMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(map) = Query::<BTreeMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request(format!("malformed query: {e}")))?;
        Ok(Self(map))
    }
}

impl Params {
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// Filter helper: absent, or equal.
    pub(crate) fn matches(&self, name: &str, value: &str) -> bool {
        self.get(name).is_none_or(|wanted| wanted == value)
    }

    pub(crate) fn bool(&self, name: &str) -> ApiResult<Option<bool>> {
        match self.get(name) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(other) => Err(ApiError::bad_request(format!(
                "{name}: `{other}` is not a boolean"
            ))),
        }
    }

    /// `limit`: an integer-valued number from 1 to 1000.
    pub(crate) fn limit(&self, default: usize) -> ApiResult<usize> {
        let Some(raw) = self.get("limit") else {
            return Ok(default);
        };
        validate::limit(raw).map_err(|bad| match bad {
            BadLimit::NotANumber => {
                ApiError::bad_request(format!("limit: `{raw}` is not a number"))
            }
            BadLimit::OutOfRange => ApiError(Refusal::unprocessable(
                "INVALID_LIMIT",
                format!("limit must be an integer from 1 to 1000, got {raw}"),
            )),
        })
    }

    /// A query value that must be one of an enumeration's serde names.
    pub(crate) fn parse<T: DeserializeOwned>(&self, name: &str) -> ApiResult<Option<T>> {
        match self.get(name) {
            None => Ok(None),
            Some(raw) => serde_json::from_value(serde_json::Value::String(raw.to_owned()))
                .map(Some)
                .map_err(|_| {
                    ApiError::bad_request(format!("{name}: `{raw}` is not an accepted value"))
                }),
        }
    }
}

/// A JSON body; anything unreadable is a 400 with the error body.
pub(crate) struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::bad_request(format!("unreadable body: {e}")))?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(format!("malformed body: {e}")))
    }
}

/// Counts and logs resource requests, and injects the configured 429s and 5xx before
/// anything else.
async fn faults(State(shared): State<AppState>, request: Request, next: Next) -> Response {
    shared.stats.api_requests.fetch_add(1, Ordering::Relaxed);
    // Nested routers see the path without their prefix; the log keeps the version.
    let uri = request
        .extensions()
        .get::<OriginalUri>()
        .map_or_else(|| request.uri().clone(), |original| original.0.clone());
    let method = request.method().to_string();
    let response = answer(&shared, request, next).await;
    shared.log_request(ApiRequest {
        method,
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        status: response.status().as_u16(),
    });
    response
}

async fn answer(shared: &AppState, request: Request, next: Next) -> Response {
    if let Some((status, retry_after)) = shared.draw_fault() {
        shared.stats.injected_faults.fetch_add(1, Ordering::Relaxed);
        let message = if status == 429 {
            "too many requests"
        } else {
            "injected server error"
        };
        let mut response = ApiError(Refusal::new(status, message)).into_response();
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        return response;
    }
    next.run(request).await
}

/// Bearer authentication of every endpoint but the token endpoint.
async fn bearer(State(shared): State<AppState>, request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let problem = match token {
        None => Some("missing bearer token"),
        Some(token) => shared.check_token(token),
    };
    match problem {
        Some(message) => ApiError(Refusal::new(401, message)).into_response(),
        None => next.run(request).await,
    }
}

async fn not_found() -> ApiError {
    ApiError(Refusal::new(404, "no such endpoint"))
}

/// `/v3/...` and `/v2/...`.
pub(crate) fn router(shared: AppState) -> Router {
    let v3 = Router::new()
        .merge(resources::routes())
        .merge(leads::routes())
        .merge(webhooks::routes())
        .route_layer(middleware::from_fn_with_state(shared.clone(), bearer))
        .route_layer(middleware::from_fn_with_state(shared.clone(), faults))
        .merge(token::routes_v3());
    let v2 = v2::routes()
        .route_layer(middleware::from_fn_with_state(shared.clone(), bearer))
        .route_layer(middleware::from_fn_with_state(shared.clone(), faults))
        .merge(token::routes_v2());
    Router::new()
        .nest("/v3", v3)
        .nest("/v2", v2)
        .fallback(not_found)
        .with_state(shared)
}
