//! `/v1/sources`: the configured sources (VAN, Action Network read back; Twilio posted to), their watermark,
//! last run, state and counts.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use super::{AdminError, AdminState};
use crate::sources::SourceView;

/// The configured sources.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SourceItems {
    items: Vec<SourceView>,
}

#[utoipa::path(
    get,
    path = "/v1/sources",
    operation_id = "listSources",
    summary = "The configured sources: state, last error, watermark, last run and what their records came to",
    responses((status = 200, description = "success", body = SourceItems))
)]
pub async fn list(State(state): State<Arc<AdminState>>) -> Result<Json<SourceItems>, AdminError> {
    let sources = state.sources.current();
    let items = crate::sources::views(&state.pool, &sources).await?;
    Ok(Json(SourceItems { items }))
}
