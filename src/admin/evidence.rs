//! `GET /v1/consent/evidence`: the evidence bundle of a number.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use chrono::Utc;

use super::consent::{ByNumber, required_phone};
use super::{AdminError, AdminState};
use crate::evidence::{self, Bundle};
use crate::ingest::ErrorBody;
use crate::model::Scope;

#[utoipa::path(
    get,
    path = "/v1/consent/evidence",
    operation_id = "consentEvidence",
    summary = "The evidence bundle of a number: each ledger entry with its hash and what it stands on (404 when unknown)",
    params(ByNumber),
    responses(
        (status = 200, description = "success", body = Bundle),
        (status = 400, description = "invalid parameters or body", body = ErrorBody),
        (status = 404, description = "not found", body = ErrorBody),
    )
)]
pub async fn bundle(
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ByNumber>, QueryRejection>,
) -> Result<Json<Bundle>, AdminError> {
    let Query(query) = query?;
    let account = query.account()?;
    let scope = Scope::organization(query.organization()?).in_account(account.as_ref());
    let phone = required_phone(query.phone_number.clone())?;
    evidence::bundle(&state.pool, &phone, scope, Utc::now())
        .await?
        .map(Json)
        .ok_or_else(|| AdminError::NotFound(format!("no ledger entry for {phone}")))
}
