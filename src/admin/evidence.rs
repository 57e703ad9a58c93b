//! `GET /v1/consent/evidence`: the evidence bundle of a number.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use chrono::Utc;

use super::consent::{ByNumber, required_phone};
use super::{AdminError, AdminState};
use crate::evidence::{self, Bundle};

pub async fn bundle(
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ByNumber>, QueryRejection>,
) -> Result<Json<Bundle>, AdminError> {
    let Query(query) = query?;
    let organization = query.organization()?;
    let phone = required_phone(query.phone_number.clone())?;
    evidence::bundle(&state.pool, &phone, organization, Utc::now())
        .await?
        .map(Json)
        .ok_or_else(|| AdminError::NotFound(format!("no ledger entry for {phone}")))
}
