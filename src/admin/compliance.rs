//! `GET /v1/compliance`: the compliance report (the contract's JSON form).

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use chrono::Utc;
use serde::Deserialize;

use super::{AdminError, AdminState};
use crate::compliance::{self, Report, Window};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComplianceQuery {
    since: Option<String>,
    until: Option<String>,
    organization_id: Option<String>,
}

pub async fn report(
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ComplianceQuery>, QueryRejection>,
) -> Result<Json<Report>, AdminError> {
    let Query(query) = query?;
    let rules = &state.compliance;
    let now = Utc::now();
    let window = Window::parse(
        query.since.as_deref(),
        query.until.as_deref(),
        query.organization_id,
        &rules.calendar,
        now,
    )
    .map_err(|e| AdminError::BadRequest(e.to_string()))?;
    Ok(Json(
        compliance::report(&state.pool, rules, &window, now).await?,
    ))
}
