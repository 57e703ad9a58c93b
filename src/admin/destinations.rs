//! `/v1/destinations`: the configured destinations (VAN, Action Network), their outcomes,
//! and retrying or rewinding one.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::subscribers::{ReplayBody, replay_error, replayed, retried};
use super::{AdminError, AdminState};
use crate::ingest::ErrorBody;
use crate::model::{DestinationView, OutcomeKind, OutcomeRecord};
use crate::sender::destinations;
use crate::settings::DestinationSettings;

/// The configured destinations.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DestinationItems {
    items: Vec<DestinationView>,
}

/// One destination's outcomes.
#[derive(Serialize, utoipa::ToSchema)]
pub struct OutcomeItems {
    items: Vec<OutcomeRecord>,
}

/// The path of one destination: its name.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct DestinationPath {
    /// A configured destination's name (404 for any other).
    name: String,
}

/// Which outcomes are listed.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutcomesQuery {
    /// Only these; every outcome when absent.
    state: Option<OutcomeKind>,
    /// Only entries after this seq (the next page after the last seq listed).
    after: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/v1/destinations",
    operation_id = "listDestinations",
    summary = "The configured destinations: cursor, lag, state, last error and outcomes",
    responses((status = 200, description = "success", body = DestinationItems))
)]
pub async fn list(
    State(state): State<Arc<AdminState>>,
) -> Result<Json<DestinationItems>, AdminError> {
    let items = crate::sender::views(&state.pool, &state.destinations).await?;
    Ok(Json(DestinationItems { items }))
}

#[utoipa::path(
    get,
    path = "/v1/destinations/{name}/outcomes",
    operation_id = "listDestinationOutcomes",
    summary = "A destination's entries with their outcome and reason, in seq order (1,000 at most)",
    params(DestinationPath, OutcomesQuery),
    responses(
        (status = 200, description = "success", body = OutcomeItems),
        (status = 400, description = "invalid parameters", body = ErrorBody),
        (status = 404, description = "not found", body = ErrorBody),
    )
)]
pub async fn outcomes(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    query: Result<Query<OutcomesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<OutcomeItems>, AdminError> {
    let Query(query) = query?;
    let after = query.after.unwrap_or(0);
    destinations::outcomes(&state.pool, &state.destinations, &name, query.state, after)
        .await
        .map(|items| Json(OutcomeItems { items }))
        .map_err(replay_error)
}

#[utoipa::path(
    post,
    path = "/v1/destinations/{name}/retry",
    operation_id = "retryDestination",
    summary = "End a destination's error (its key, its lookups) and try its next entry now",
    params(DestinationPath),
    responses(
        (status = 200, description = "success", body = DestinationView),
        (status = 404, description = "not found", body = ErrorBody),
    )
)]
pub async fn retry(
    state: State<Arc<AdminState>>,
    name: Path<String>,
) -> Result<Json<DestinationView>, AdminError> {
    retried::<DestinationSettings>(state, name).await
}

#[utoipa::path(
    post,
    path = "/v1/destinations/{name}/replay",
    operation_id = "replayDestination",
    summary = "Rewind a destination: entries from `fromSeq` on that were unmatched or refused are tried again (what was sent stays sent)",
    params(DestinationPath),
    request_body = ReplayBody,
    responses(
        (status = 200, description = "success", body = DestinationView),
        (status = 400, description = "invalid parameters or body", body = ErrorBody),
        (status = 404, description = "not found", body = ErrorBody),
        (status = 413, description = "body or batch too large", body = ErrorBody),
    )
)]
pub async fn replay(
    state: State<Arc<AdminState>>,
    name: Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<DestinationView>, AdminError> {
    replayed::<DestinationSettings>(state, name, body).await
}
