//! A minimal `/v2` (organizations, leads of an organization or group, one lead, PUT lead) so
//! the v2.1 client is tested for real, including the 422 past the cursor depth.

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{ApiError, ApiResult, AppState, JsonBody, Params};
use crate::client::models::{Lead, Organization};
use crate::client::{V2GroupScope, V2Lead, V2LeadUpdate, V2List, V2Organization, V2Pagination};
use crate::sandbox::world::{Refusal, World};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/organizations", get(organizations))
        .route("/organizations/{id}", get(organization))
        .route("/organizations/{id}/leads", get(organization_leads))
        .route("/groups/{id}/leads", get(group_leads))
        .route("/leads/{id}", get(lead).put(update_lead))
}

fn v2_org(o: &Organization) -> V2Organization {
    V2Organization {
        id: o.id.clone(),
        kind: "organization".into(),
        name: o.name.clone(),
        created_at: o.created_at.clone(),
    }
}

fn v2_lead(l: &Lead) -> V2Lead {
    V2Lead {
        id: l.id.clone(),
        kind: "lead".into(),
        custom_fields: l.custom_fields.clone(),
        global_opted_out: l.global_opted_out,
        group_ids: l
            .active_group_ids
            .iter()
            .chain(&l.inactive_group_ids)
            .cloned()
            .collect(),
        first_name: l.first_name.clone(),
        last_name: l.last_name.clone(),
        notes: l.notes.clone(),
        follow_up: l.follow_up.clone(),
        organization_id: l.organization_id.clone(),
        phone_number: l.phone_number.clone(),
        email: l.email.clone(),
        tag_ids: l.tag_ids.clone(),
        created_at: l.created_at.clone(),
    }
}

/// Offset paging, as v2 does, refusing pages that start at or past the depth cap.
fn offset_page<T>(
    items: Vec<T>,
    params: &Params,
    default: usize,
    depth: usize,
) -> ApiResult<V2List<T>> {
    let limit = params.limit(default)?;
    let offset = match params.get("cursor") {
        None => 0,
        Some(cursor) => URL_SAFE_NO_PAD
            .decode(cursor)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| {
                t.strip_prefix("offset:")
                    .and_then(|n| n.parse::<usize>().ok())
            })
            .ok_or_else(|| ApiError::bad_request("cursor: not a cursor this service issued"))?,
    };
    if offset >= depth {
        return Err(ApiError(Refusal::new(
            422,
            format!("cursor paging beyond {depth} objects is not supported"),
        )));
    }
    let total = items.len();
    let end = (offset + limit).min(total).min(depth);
    let has_next_page = end < total;
    let page: Vec<T> = items
        .into_iter()
        .skip(offset)
        .take(end.saturating_sub(offset))
        .collect();
    Ok(V2List {
        items: page,
        pagination: V2Pagination {
            cursor: has_next_page.then(|| URL_SAFE_NO_PAD.encode(format!("offset:{end}"))),
            has_next_page,
            total: Some(total as u64),
        },
    })
}

async fn organizations(
    State(s): State<AppState>,
    params: Params,
) -> ApiResult<Json<V2List<V2Organization>>> {
    let items: Vec<_> = s.read(|w| w.organizations.values().map(v2_org).collect());
    offset_page(
        items,
        &params,
        s.config.default_page_size,
        s.config.v2_cursor_depth,
    )
    .map(Json)
}

async fn organization(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<V2Organization>> {
    s.read(|w| {
        w.organization(&id)
            .map(|o| Json(v2_org(o)))
            .map_err(ApiError)
    })
}

async fn organization_leads(
    State(s): State<AppState>,
    Path(id): Path<String>,
    params: Params,
) -> ApiResult<Json<V2List<V2Lead>>> {
    let items = s.read(|w: &World| {
        w.organization(&id)?;
        Ok::<_, Refusal>(
            w.leads
                .values()
                .filter(|l| l.organization_id == id)
                .map(v2_lead)
                .collect::<Vec<_>>(),
        )
    })?;
    offset_page(
        items,
        &params,
        s.config.default_page_size,
        s.config.v2_cursor_depth,
    )
    .map(Json)
}

async fn group_leads(
    State(s): State<AppState>,
    Path(id): Path<String>,
    params: Params,
) -> ApiResult<Json<V2List<V2Lead>>> {
    let scope: V2GroupScope = params.parse("scope")?.unwrap_or_default();
    let items = s.read(|w: &World| {
        if !w.groups.contains_key(&id) {
            return Err(Refusal::not_found("group", &id));
        }
        Ok(w.leads
            .values()
            .filter(|l| {
                let active = l.active_group_ids.contains(&id);
                let inactive = l.inactive_group_ids.contains(&id);
                match scope {
                    V2GroupScope::Active => active,
                    V2GroupScope::Inactive => inactive,
                    V2GroupScope::All => active || inactive,
                }
            })
            .map(v2_lead)
            .collect::<Vec<_>>())
    })?;
    offset_page(
        items,
        &params,
        s.config.default_page_size,
        s.config.v2_cursor_depth,
    )
    .map(Json)
}

async fn lead(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<V2Lead>> {
    s.read(|w| w.lead(&id).map(|l| Json(v2_lead(l))).map_err(ApiError))
}

/// `tagIds` replaces the list and must name tags of the lead's organization;
/// `globalOptedOut` goes through the same consent path as v3 (events, account sync).
async fn update_lead(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<V2LeadUpdate>,
) -> ApiResult<Json<V2Lead>> {
    s.with_world(|w| {
        let org = w.lead(&id)?.organization_id.clone();
        if let Some(tags) = &body.tag_ids {
            for tag in tags {
                let ok = w
                    .tags
                    .get(tag)
                    .is_some_and(|t| t.organization_id.as_deref() == Some(org.as_str()));
                if !ok {
                    return Err(ApiError::bad_request(format!(
                        "tag {tag} is not a tag of the lead's organization"
                    )));
                }
            }
        }
        if let Some(lead) = w.leads.get_mut(&id) {
            let set = |slot: &mut Option<String>, value: &Option<String>| {
                if value.is_some() {
                    slot.clone_from(value);
                }
            };
            set(&mut lead.first_name, &body.first_name);
            set(&mut lead.last_name, &body.last_name);
            set(&mut lead.email, &body.email);
            set(&mut lead.notes, &body.notes);
            set(&mut lead.follow_up, &body.follow_up);
            if let Some(tags) = &body.tag_ids {
                lead.tag_ids.clone_from(tags);
            }
        }
        if let Some(opted_out) = body.global_opted_out {
            w.set_consent(&id, opted_out, None);
        }
        Ok(Json(v2_lead(w.lead(&id)?)))
    })
}
