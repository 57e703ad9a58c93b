//! Health, metrics, the mirror (leads, messages) and the daemon's status.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use chrono::Utc;
use serde_json::Value;

use super::consent::{ByNumber, checked_id, required_phone};
use super::{AdminError, AdminState};
use crate::ledger::{self, Items};
use crate::metrics;
use crate::model::text::quoted;

pub async fn healthz() -> Json<Value> {
    Json(serde_json::json!({"status": "ok"}))
}

/// This daemon's counters from memory; gauges read from the database now, so they are
/// never stale.
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
    let text = state.metrics.render(metrics::Gauges {
        outbox_backlog: count(backlog.pending),
        apply_lag_seconds: lag,
        quarantined: count(backlog.quarantined),
        pushes_pending: count(backlog.pushes_pending),
        subscriber_lag: crate::subscribers::views(&state.pool, &state.subscribers)
            .await?
            .into_iter()
            .map(|s| (s.name, count(s.lag_entries)))
            .collect(),
        registration_ok: crate::registrations::last_check(&state.pool)
            .await?
            .map(|check| check.ok),
        optout_oldest_pending: honouring.oldest_pending_secs,
        optouts_overdue: honouring.overdue,
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

pub async fn lead(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AdminError> {
    checked_id("leadId", Some(&id))?;
    ledger::lead(&state.pool, &id)
        .await?
        .map(|lead| Json(without_nulls(lead)))
        .ok_or_else(|| AdminError::NotFound(format!("no lead {} in the mirror", quoted(&id))))
}

pub async fn find_leads(
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ByNumber>, QueryRejection>,
) -> Result<Json<Items<Value>>, AdminError> {
    let Query(query) = query?;
    let organization = query.organization()?;
    let phone = required_phone(query.phone_number.clone())?;
    let leads = ledger::leads(&state.pool, &phone, organization).await?;
    Ok(Json(Items {
        items: leads.into_iter().map(without_nulls).collect(),
    }))
}

pub async fn message(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AdminError> {
    checked_id("messageId", Some(&id))?;
    ledger::message(&state.pool, &id)
        .await?
        .map(|message| Json(without_nulls(message)))
        .ok_or_else(|| AdminError::NotFound(format!("no message {} is tracked", quoted(&id))))
}

pub async fn status(
    State(state): State<Arc<AdminState>>,
) -> Result<Json<ledger::Status>, AdminError> {
    let mut status = ledger::status(&state.pool).await?;
    status.subscribers = crate::subscribers::views(&state.pool, &state.subscribers).await?;
    Ok(Json(status))
}
