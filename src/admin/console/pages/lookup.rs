//! Look up a number: its consent now, the timeline with evidence, the bundle as a file.

use std::sync::Arc;

use askama::Template;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;

use super::{given, lookup_href};
use crate::admin::AdminState;
use crate::admin::console::session::Session;
use crate::admin::console::views::{self, TimelineEntry, query_value};
use crate::admin::console::{ConsoleError, Frame, render};
use crate::ledger::{self, ConsentRecord};
use crate::model::{Scope, phone};
use crate::store::DestinationStore as _;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LookupQuery {
    phone_number: Option<String>,
    organization_id: Option<String>,
    /// Set by the change form: the seq of the change just recorded.
    recorded: Option<i64>,
    /// With `recorded`: whether it became the current state.
    current: Option<bool>,
}

/// A current consent state, with its change link.
pub struct CurrentRow {
    pub record: ConsentRecord,
    pub ago: String,
    pub change_href: String,
}

/// What the ledger holds of the number looked up.
pub struct Found {
    pub current: Vec<CurrentRow>,
    pub timeline: Vec<TimelineEntry>,
    pub evidence_href: String,
    pub chain_head_seq: i64,
}

#[derive(Template)]
#[template(path = "console/lookup.html")]
struct LookupPage {
    frame: Frame,
    phone: String,
    organization: String,
    error: Option<String>,
    notice: Option<String>,
    /// A number was looked up (`found` is `None` when the ledger does not know it).
    searched: bool,
    /// Several accounts are served: each row and entry says its account.
    several_accounts: bool,
    found: Option<Found>,
}

pub async fn lookup(
    session: Session,
    State(state): State<Arc<AdminState>>,
    query: Result<Query<LookupQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let phone = given(query.phone_number).unwrap_or_default();
    let organization = given(query.organization_id);
    let mut page = LookupPage {
        frame: Frame::of(&session, "lookup"),
        phone: phone.clone(),
        organization: organization.clone().unwrap_or_default(),
        error: None,
        notice: query.recorded.map(|seq| match query.current {
            Some(false) => format!(
                "Recorded as ledger entry #{seq}. A newer event was already in place, so the current state did not change."
            ),
            _ => format!("Recorded as ledger entry #{seq}; it is being sent to the service."),
        }),
        searched: false,
        several_accounts: state.accounts.len() > 1,
        found: None,
    };
    if phone.is_empty() {
        return Ok(render(StatusCode::OK, &page));
    }
    // As the ledger keeps it: `+1 (555) 000-1111` finds `+15550001111`.
    let phone = match phone::canonical(&phone) {
        Ok(phone) => phone,
        Err(error) => {
            page.error = Some(format!(
                "Phone number: {error}; it is not a number in E.164 form: a +, the country code and the number (e.g. +15551234567)."
            ));
            return Ok(render(StatusCode::BAD_REQUEST, &page));
        }
    };
    page.searched = true;
    let now = Utc::now();
    let current = ledger::current(&state.pool, &phone, organization.as_deref()).await?;
    let scope = Scope::organization(organization.as_deref());
    let bundle = crate::evidence::bundle(&state.pool, &phone, scope, now).await?;
    let mut outcomes = Vec::new();
    if !state.destinations.is_empty() {
        for item in bundle.iter().flat_map(|b| &b.items) {
            let seq = item.entry.seq;
            outcomes.extend(state.pool.outcomes_of_entries(seq, seq).await?);
        }
    }
    page.found = bundle.map(|bundle| Found {
        current: current
            .into_iter()
            .map(|record| CurrentRow {
                ago: views::ago(record.changed_at, now),
                change_href: format!(
                    "/change?phoneNumber={}&organizationId={}&accountId={}&optedOut={}",
                    query_value(&record.phone_number),
                    query_value(&record.organization_id),
                    query_value(&record.account_id),
                    !record.opted_out
                ),
                record,
            })
            .collect(),
        evidence_href: format!(
            "/evidence?{}",
            lookup_href(&phone, organization.as_deref()).trim_start_matches("/?")
        ),
        chain_head_seq: bundle.chain_head.seq,
        timeline: bundle
            .items
            .into_iter()
            .map(|item| TimelineEntry::from(item).with_outcomes(&outcomes))
            .collect(),
    });
    Ok(render(StatusCode::OK, &page))
}

/// The evidence bundle of a number, as a file.
pub async fn evidence(
    _session: Session,
    State(state): State<Arc<AdminState>>,
    query: Result<Query<LookupQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let phone = given(query.phone_number)
        .and_then(|p| phone::canonical(&p).ok())
        .ok_or_else(|| ConsoleError::BadRequest("phoneNumber must be an E.164 number".into()))?;
    let organization = given(query.organization_id);
    let bundle = crate::evidence::bundle(
        &state.pool,
        &phone,
        Scope::organization(organization.as_deref()),
        Utc::now(),
    )
    .await?
    .ok_or_else(|| ConsoleError::NotFound(format!("The ledger has no entry for {phone}.")))?;
    let json = serde_json::to_vec_pretty(&bundle)
        .map_err(|e| ConsoleError::BadRequest(format!("cannot encode the bundle: {e}")))?;
    let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
    let disposition = format!("attachment; filename=\"evidence-{digits}.json\"");
    Ok((
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        json,
    )
        .into_response())
}
