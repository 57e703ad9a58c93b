//! `/v1/callers`: who a revocation binds ([`crate::model::caller`]): each caller, its
//! members, and whether the revoke-all rule is in force.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use super::AdminState;
use crate::model::caller::CallerView;

/// The callers in force.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CallerItems {
    items: Vec<CallerView>,
}

#[utoipa::path(
    get,
    path = "/v1/callers",
    operation_id = "listCallers",
    summary = "The callers: each one's members, and whether an opt-out given in one binds every member now, and from when",
    responses((status = 200, description = "success", body = CallerItems))
)]
pub async fn list(State(state): State<Arc<AdminState>>) -> Json<CallerItems> {
    let now = chrono::Utc::now();
    let items = state
        .callers
        .current()
        .iter()
        .map(|c| CallerView::of(c, now))
        .collect();
    Json(CallerItems { items })
}
