//! `/v1/subscribers`: the configured subscribers, and rewinding one.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use bytes::Bytes;
use serde::Deserialize;

use super::consent::json_body;
use super::{AdminError, AdminState};
use crate::ledger::Items;
use crate::model::SubscriberView;
use crate::subscribers::{self, ReplayError};

pub async fn list(
    State(state): State<Arc<AdminState>>,
) -> Result<Json<Items<SubscriberView>>, AdminError> {
    let items = subscribers::views(&state.pool, &state.subscribers).await?;
    Ok(Json(Items { items }))
}

pub async fn retry(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
) -> Result<Json<SubscriberView>, AdminError> {
    subscribers::retry(
        &state.pool,
        &state.subscribers,
        state.senders.as_ref(),
        &name,
    )
    .await
    .map(Json)
    .map_err(replay_error)
}

/// A refused replay or retry, as the admin API answers it.
fn replay_error(error: ReplayError) -> AdminError {
    match error {
        // The name is the request's: quoted only up to a bound.
        ReplayError::Unknown(name) => AdminError::NotFound(format!(
            "no subscriber named {} is configured",
            crate::model::text::quoted(&name)
        )),
        ReplayError::BeforeTheStart | ReplayError::Forward { .. } => {
            AdminError::BadRequest(error.to_string())
        }
        ReplayError::Database(error) => AdminError::Database(error),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReplayBody {
    from_seq: i64,
}

pub async fn replay(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<SubscriberView>, AdminError> {
    let body: ReplayBody = json_body(body)?;
    subscribers::replay(&state.pool, &state.subscribers, &name, body.from_seq)
        .await
        .map(Json)
        .map_err(replay_error)
}
