//! GET /leads, POST /leads (upsert), PATCH /leads (operations).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};

use super::paging::page;
use super::{ApiError, ApiResult, AppState, JsonBody, Params};
use crate::validate;
use crate::wire::{Lead, LeadPatch, LeadStatusInGroup, LeadUpsert, Page};

pub(super) fn routes() -> Router<AppState> {
    Router::new().route(
        "/leads",
        get(list_leads).post(upsert_lead).patch(patch_lead),
    )
}

async fn list_leads(State(s): State<AppState>, params: Params) -> ApiResult<Json<Page<Lead>>> {
    let limit = s.config.default_page_size;
    if let Some(phone) = params.get("phoneNumber").filter(|p| !validate::is_e164(p)) {
        return Err(ApiError::bad_request(format!(
            "phoneNumber `{phone}` is not E.164"
        )));
    }
    let status: LeadStatusInGroup = params.parse("leadStatusInGroup")?.unwrap_or_default();
    let group = params.get("groupId");
    // Start the scan at the cursor: walking from the first lead on every page would make a
    // full listing quadratic in the number of leads.
    let after = params
        .get("cursor")
        .map(super::paging::decode_cursor)
        .transpose()?;
    s.read(|w| {
        let from = match &after {
            Some(after) => std::ops::Bound::Excluded(after.clone()),
            None => std::ops::Bound::Unbounded,
        };
        let items = w
            .leads
            .range((from, std::ops::Bound::Unbounded))
            .filter(|(_, l)| {
                let in_group = group.is_none_or(|g| {
                    let active = l.active_group_ids.iter().any(|x| x == g);
                    let inactive = l.inactive_group_ids.iter().any(|x| x == g);
                    match status {
                        LeadStatusInGroup::Active => active,
                        LeadStatusInGroup::Inactive => inactive,
                        LeadStatusInGroup::All => active || inactive,
                    }
                });
                params.matches("id", &l.id)
                    && params.matches("phoneNumber", &l.phone_number)
                    && params.matches("organizationId", &l.organization_id)
                    && in_group
            });
        page(items, &params, limit).map(Json)
    })
}

async fn upsert_lead(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<LeadUpsert>,
) -> ApiResult<(StatusCode, Json<Lead>)> {
    let (lead, created) = s.with_world(|w| w.upsert_lead(body))?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(lead)))
}

async fn patch_lead(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<LeadPatch>,
) -> ApiResult<StatusCode> {
    s.with_world(|w| w.patch_lead(&body.id, body.operation))?;
    Ok(StatusCode::NO_CONTENT)
}
