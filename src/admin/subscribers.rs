//! `/v1/subscribers`: the configured subscribers, and rewinding one; and the one handler of
//! `retry` and of `replay`, which serves subscribers and destinations alike ([`Served`]).

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::consent::json_body;
use super::{AdminError, AdminState};
use crate::ingest::ErrorBody;
use crate::model::SubscriberView;
use crate::sender::{self, ReplayError, Steered};
use crate::settings::{DestinationSettings, SubscriberSettings};

/// Subscribers or destinations, as the admin API serves them: where their settings are.
pub(super) trait Served: Steered + Sized + 'static {
    fn configured(state: &AdminState) -> &[Self];
}

impl Served for SubscriberSettings {
    fn configured(state: &AdminState) -> &[Self] {
        &state.subscribers
    }
}

impl Served for DestinationSettings {
    fn configured(state: &AdminState) -> &[Self] {
        &state.destinations
    }
}

/// The one handler of `POST /v1/{subscribers,destinations}/{name}/retry` (each path
/// declared for the document beside its list: [`retry`], `destinations::retry`).
pub(super) async fn retried<S: Served>(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
) -> Result<Json<S::View>, AdminError> {
    let configured = S::configured(&state);
    sender::retry(&state.pool, configured, state.senders.as_ref(), &name)
        .await
        .map(Json)
        .map_err(replay_error)
}

/// The one handler of `POST /v1/{subscribers,destinations}/{name}/replay` (each path
/// declared for the document beside its list: [`replay`], `destinations::replay`).
pub(super) async fn replayed<S: Served>(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<S::View>, AdminError> {
    let body: ReplayBody = json_body(body)?;
    sender::replay(&state.pool, S::configured(&state), &name, body.from_seq)
        .await
        .map(Json)
        .map_err(replay_error)
}

/// The configured subscribers.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SubscriberItems {
    items: Vec<SubscriberView>,
}

/// The path of one subscriber: its name.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct NamePath {
    /// A configured subscriber's name (404 for any other).
    name: String,
}

#[utoipa::path(
    get,
    path = "/v1/subscribers",
    operation_id = "listSubscribers",
    summary = "The configured subscribers: cursor, lag, state and last error",
    responses((status = 200, description = "success", body = SubscriberItems))
)]
pub async fn list(
    State(state): State<Arc<AdminState>>,
) -> Result<Json<SubscriberItems>, AdminError> {
    let items = sender::views(&state.pool, &state.subscribers).await?;
    Ok(Json(SubscriberItems { items }))
}

#[utoipa::path(
    post,
    path = "/v1/subscribers/{name}/retry",
    operation_id = "retrySubscriber",
    summary = "Try the next delivery to a subscriber now instead of at the end of its backoff",
    params(NamePath),
    responses(
        (status = 200, description = "success", body = SubscriberView),
        (status = 404, description = "not found", body = ErrorBody),
    )
)]
pub async fn retry(
    state: State<Arc<AdminState>>,
    name: Path<String>,
) -> Result<Json<SubscriberView>, AdminError> {
    retried::<SubscriberSettings>(state, name).await
}

/// A refused replay or retry, as the admin API answers it.
pub(super) fn replay_error(error: ReplayError) -> AdminError {
    match error {
        // The name is the request's: quoted only up to a bound.
        ReplayError::Unknown(name) => AdminError::NotFound(format!(
            "no subscriber named {} is configured",
            crate::model::text::quoted(&name)
        )),
        ReplayError::UnknownDestination(name) => AdminError::NotFound(format!(
            "no destination named {} is configured",
            crate::model::text::quoted(&name)
        )),
        ReplayError::BeforeTheStart | ReplayError::Forward { .. } => {
            AdminError::BadRequest(error.to_string())
        }
        ReplayError::Database(error) => AdminError::Database(error),
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = ReplayRequest)]
pub(super) struct ReplayBody {
    /// The first seq to send again; at most one past the cursor.
    #[schema(minimum = 1)]
    #[serde(deserialize_with = "integral")]
    pub(super) from_seq: i64,
}

/// A JSON integer, written with or without a zero fraction (`7.0`): JSON Schema's
/// `integer`, which the document promises, takes both.
fn integral<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    let number = serde_json::Number::deserialize(deserializer)?;
    if let Some(n) = number.as_i64() {
        return Ok(n);
    }
    match number.as_f64() {
        Some(f) if f.fract() == 0.0 && (i64::MIN as f64..i64::MAX as f64).contains(&f) => {
            Ok(f as i64)
        }
        _ => Err(serde::de::Error::custom(format!(
            "invalid value: {number}, expected an integer"
        ))),
    }
}

#[utoipa::path(
    post,
    path = "/v1/subscribers/{name}/replay",
    operation_id = "replaySubscriber",
    summary = "Rewind a subscriber: entries from `fromSeq` on are sent again (a disabled subscriber is enabled)",
    params(NamePath),
    request_body = ReplayBody,
    responses(
        (status = 200, description = "success", body = SubscriberView),
        (status = 400, description = "invalid parameters or body", body = ErrorBody),
        (status = 404, description = "not found", body = ErrorBody),
        (status = 413, description = "body or batch too large", body = ErrorBody),
    )
)]
pub async fn replay(
    state: State<Arc<AdminState>>,
    name: Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<SubscriberView>, AdminError> {
    replayed::<SubscriberSettings>(state, name, body).await
}
