//! The `/v2` the daemon uses when configured for v2.1, as its document describes it:
//! organizations, leads of an organization or a group (the v2 list envelope with
//! `pagination.total`, offset cursors, 422 past the cursor depth), one lead, and
//! `PUT /leads/{id}`, whose `globalOptedOut` is the same consent change as v3's opt-out and
//! opt-in (account sync, the consent webhook).

use axum::extract::{Path, State};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{ApiError, ApiResult, AppState, JsonBody, Params};
use crate::validate;
use crate::wire::{
    Kind, Lead, Organization, V2GroupScope, V2Lead, V2LeadUpdate, V2Organization, V2Page,
    V2Pagination,
};
use crate::world::{Refusal, World};

pub(super) fn routes() -> Router<AppState> {
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
        kind: Kind::Organization,
        name: o.name.clone(),
        created_at: o.created_at.clone(),
    }
}

fn v2_lead(l: &Lead) -> V2Lead {
    V2Lead {
        id: l.id.clone(),
        kind: Kind::Lead,
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

/// Where a v2 page starts and how long it is. v2 cursors are offsets into the result set
/// (opaque to clients); the service refuses, with 422, any page that starts at or past its
/// cursor depth (100,000 objects; `v2_cursor_depth` here, so a test need not seed that many).
struct Window {
    offset: usize,
    limit: usize,
    depth: usize,
}

impl Window {
    fn of(params: &Params, s: &AppState) -> ApiResult<Self> {
        // v2.1 documents 400 for a malformed request and keeps 422 for the cursor depth.
        let limit = params
            .limit(s.config.default_page_size)
            .map_err(|e| ApiError::bad_request(e.0.message))?;
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
        let depth = s.config.v2_cursor_depth;
        if offset >= depth {
            return Err(ApiError(Refusal::new(
                422,
                format!("cursor paging beyond {depth} objects is not supported"),
            )));
        }
        Ok(Self {
            offset,
            limit,
            depth,
        })
    }

    /// The page of `items` (the whole result set, in order) this window covers; only the
    /// page's items are converted.
    fn page<'a, S: 'a, T>(
        &self,
        items: impl Iterator<Item = &'a S>,
        convert: impl Fn(&S) -> T,
    ) -> V2Page<T> {
        let mut total = 0;
        let mut page = Vec::new();
        let last = (self.offset + self.limit).min(self.depth);
        for item in items {
            if (self.offset..last).contains(&total) {
                page.push(convert(item));
            }
            total += 1;
        }
        let end = last.min(total);
        let has_next_page = end < total;
        V2Page {
            items: page,
            pagination: V2Pagination {
                cursor: has_next_page.then(|| URL_SAFE_NO_PAD.encode(format!("offset:{end}"))),
                has_next_page,
                total: total as u64,
            },
        }
    }
}

async fn organizations(
    State(s): State<AppState>,
    params: Params,
) -> ApiResult<Json<V2Page<V2Organization>>> {
    let window = Window::of(&params, &s)?;
    Ok(Json(
        s.read(|w| window.page(w.organizations.values(), v2_org)),
    ))
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
) -> ApiResult<Json<V2Page<V2Lead>>> {
    let window = Window::of(&params, &s)?;
    let page = s.read(|w: &World| {
        w.organization(&id)?;
        let leads = w.leads.values().filter(|l| l.organization_id == id);
        Ok::<_, Refusal>(window.page(leads, v2_lead))
    })?;
    Ok(Json(page))
}

async fn group_leads(
    State(s): State<AppState>,
    Path(id): Path<String>,
    params: Params,
) -> ApiResult<Json<V2Page<V2Lead>>> {
    let scope: V2GroupScope = params.parse("scope")?.unwrap_or_default();
    let window = Window::of(&params, &s)?;
    let page = s.read(|w: &World| {
        if !w.groups.contains_key(&id) {
            return Err(Refusal::not_found("group", &id));
        }
        let leads = w.leads.values().filter(|l| {
            let active = l.active_group_ids.contains(&id);
            let inactive = l.inactive_group_ids.contains(&id);
            match scope {
                V2GroupScope::Active => active,
                V2GroupScope::Inactive => inactive,
                V2GroupScope::All => active || inactive,
            }
        });
        Ok(window.page(leads, v2_lead))
    })?;
    Ok(Json(page))
}

async fn lead(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<V2Lead>> {
    s.read(|w| w.lead(&id).map(|l| Json(v2_lead(l))).map_err(ApiError))
}

/// `tagIds` replaces the list and must name tags of the lead's organization; `email` must
/// look like an address; `globalOptedOut` goes through the same consent path as v3 (with
/// account sync, every lead of the account with the number follows; each lead that changed
/// is announced by a `consentUpdate-v1` webhook).
async fn update_lead(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<V2LeadUpdate>,
) -> ApiResult<Json<V2Lead>> {
    if let Some(email) = &body.email
        && !validate::is_email(email)
    {
        return Err(ApiError::bad_request(format!(
            "email `{email}` is not an email address"
        )));
    }
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
