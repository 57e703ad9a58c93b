//! Health, metrics, the mirror (leads, messages) and the daemon's status.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use chrono::Utc;
use serde_json::Value;

use super::consent::{ByNumber, InAccount, checked_id, required_phone};
use super::schemas::{LeadItems, MessageRecord};
use super::{AdminError, AdminState};
use crate::ingest::ErrorBody;
use crate::ledger::{self, Items};
use crate::metrics;
use crate::model::text::quoted;
use crate::model::{DestinationStatus, Lead, Scope};

/// What `/healthz` answers.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok`.
    status: &'static str,
}

#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    summary = "The process is up",
    responses((status = 200, description = "success", body = Health))
)]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// This daemon's counters from memory; gauges read from the database now, so they are
/// never stale.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    summary = "Prometheus metrics (text exposition format)",
    responses((status = 200, description = "success", content_type = "text/plain", body = String))
)]
pub async fn metrics(
    State(state): State<Arc<AdminState>>,
) -> Result<impl IntoResponse, AdminError> {
    let backlog = ledger::backlog(&state.pool).await?;
    let lag = backlog
        .oldest_pending_at
        .map(|t| (Utc::now() - t).as_seconds_f64().max(0.0))
        .unwrap_or(0.0);
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let honouring = crate::compliance::backlog(&state.pool, &state.compliance, Utc::now()).await?;
    let review = review_gauges(&state).await?;
    let destinations = crate::sender::views(&state.pool, &state.destinations).await?;
    let text = state.metrics.render(metrics::Gauges {
        outbox_backlog: count(backlog.pending),
        apply_lag_seconds: lag,
        quarantined: count(backlog.quarantined),
        pushes_pending: count(backlog.pushes_pending),
        subscriber_lag: crate::sender::views(&state.pool, &state.subscribers)
            .await?
            .into_iter()
            .map(|s| (s.name, count(s.lag_entries)))
            .collect(),
        registration_ok: crate::registrations::last_check(&state.pool, &state.accounts)
            .await?
            .map(|check| check.ok),
        destination_lag: destinations
            .iter()
            .map(|d| (d.name.clone(), count(d.lag_entries)))
            .collect(),
        destination_error: destinations
            .into_iter()
            .map(|d| (d.name, u64::from(d.state == DestinationStatus::Error)))
            .collect(),
        optout_oldest_pending: honouring.oldest_pending_secs,
        optouts_overdue: honouring.overdue,
        review_waiting: count(review.0),
        review_oldest_due_seconds: review.1,
        review_oldest_deadline_used: review.2,
    });
    Ok(([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text))
}

/// Optional fields the service leaves out rather than sending null.
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(mut map) => {
            map.retain(|_, v| !v.is_null());
            Value::Object(map)
        }
        other => other,
    }
}

/// The path of one lead or message: its id.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
pub struct IdPath {
    #[param(schema_with = crate::model::text::id_schema)]
    id: String,
}

#[utoipa::path(
    get,
    path = "/v1/leads/{id}",
    operation_id = "getLead",
    summary = "One mirrored lead, as the service's v3 Lead resource",
    params(IdPath, InAccount),
    responses(
        (status = 200, description = "success", body = Lead),
        (status = 400, description = "invalid parameters or body", body = ErrorBody),
        (status = 404, description = "not found, or no such account served", body = ErrorBody),
    )
)]
pub async fn lead(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<String>,
    query: Result<Query<InAccount>, QueryRejection>,
) -> Result<Json<Value>, AdminError> {
    checked_id("leadId", Some(&id))?;
    let account = state.account(query?.0.account_id.as_deref())?;
    ledger::lead(&state.pool, &id, &account)
        .await?
        .map(|lead| Json(without_nulls(lead)))
        .ok_or_else(|| AdminError::NotFound(format!("no lead {} in the mirror", quoted(&id))))
}

#[utoipa::path(
    get,
    path = "/v1/leads",
    operation_id = "findLeads",
    summary = "Mirrored leads with a number",
    params(ByNumber),
    responses(
        (status = 200, description = "success", body = LeadItems),
        (status = 400, description = "invalid parameters or body", body = ErrorBody),
    )
)]
pub async fn find_leads(
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ByNumber>, QueryRejection>,
) -> Result<Json<Items<Value>>, AdminError> {
    let Query(query) = query?;
    let account = query.account()?;
    let scope = Scope::organization(query.organization()?).in_account(account.as_ref());
    let phone = required_phone(query.phone_number.clone())?;
    let leads = ledger::leads_in(&state.pool, &phone, scope).await?;
    Ok(Json(Items {
        items: leads.into_iter().map(without_nulls).collect(),
    }))
}

#[utoipa::path(
    get,
    path = "/v1/messages/{id}",
    operation_id = "getMessage",
    summary = "The tracked delivery status of one message",
    params(IdPath, InAccount),
    responses(
        (status = 200, description = "success", body = MessageRecord),
        (status = 400, description = "invalid parameters or body", body = ErrorBody),
        (status = 404, description = "not found, or no such account served", body = ErrorBody),
    )
)]
pub async fn message(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<String>,
    query: Result<Query<InAccount>, QueryRejection>,
) -> Result<Json<Value>, AdminError> {
    checked_id("messageId", Some(&id))?;
    let account = state.account(query?.0.account_id.as_deref())?;
    ledger::message(&state.pool, &id, &account)
        .await?
        .map(|message| Json(without_nulls(message)))
        .ok_or_else(|| AdminError::NotFound(format!("no message {} is tracked", quoted(&id))))
}

#[utoipa::path(
    get,
    path = "/v1/status",
    operation_id = "getStatus",
    summary = "Backlog, quarantine, reconciliation, pushes and the last error",
    responses((status = 200, description = "success", body = ledger::Status))
)]
pub async fn status(
    State(state): State<Arc<AdminState>>,
) -> Result<Json<ledger::Status>, AdminError> {
    let mut status = ledger::status_of(&state.pool, &state.accounts).await?;
    status.subscribers = crate::sender::views(&state.pool, &state.subscribers).await?;
    Ok(Json(status))
}

/// The review queue's gauges: replies waiting, seconds until the oldest is due, and the part
/// of its deadline passed.
async fn review_gauges(state: &AdminState) -> Result<(i64, Option<f64>, f64), AdminError> {
    use crate::store::ReviewStore as _;
    let (waiting, oldest) = state.pool.review_waiting().await?;
    let Some(received) = oldest else {
        return Ok((waiting, None, 0.0));
    };
    let now = Utc::now();
    let due = state.compliance.calendar.deadline(received.0);
    let whole = (due - received.0).as_seconds_f64().max(1.0);
    let passed = (now - received.0).as_seconds_f64().max(0.0);
    Ok((waiting, Some((due - now).as_seconds_f64()), passed / whole))
}
