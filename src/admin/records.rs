//! Health, metrics, the mirror (leads, messages) and the daemon's status.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::consent::{ByNumber, required_phone};
use super::{AdminError, AdminState};
use crate::ledger::{self, Items};
use crate::metrics;

pub async fn healthz() -> Json<Value> {
    Json(serde_json::json!({"status": "ok"}))
}

/// Counters from memory; gauges read from the database now, so they are never stale.
pub async fn metrics(
    State(state): State<Arc<AdminState>>,
) -> Result<impl IntoResponse, AdminError> {
    let (backlog, oldest, quarantined, pushes_pending): (i64, Option<String>, i64, i64) =
        sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM outbox WHERE state = 'pending'),
                    (SELECT MIN(received_at) FROM outbox WHERE state = 'pending'),
                    (SELECT COUNT(*) FROM outbox WHERE state = 'quarantined'),
                    (SELECT COUNT(*) FROM pushes WHERE state = 'pending')",
        )
        .fetch_one(&state.pool)
        .await?;
    let lag = oldest
        .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
        .map(|t| {
            (Utc::now() - t.with_timezone(&Utc))
                .as_seconds_f64()
                .max(0.0)
        })
        .unwrap_or(0.0);
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let text = metrics::global().render(&metrics::Gauges {
        outbox_backlog: count(backlog),
        apply_lag_seconds: lag,
        quarantined: count(quarantined),
        pushes_pending: count(pushes_pending),
    });
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    ))
}

/// The v3 Lead resource, its `globalOptedOut` from the consent state of its number.
const LEAD_JSON: &str = "json_object('id', l.id, 'type', 'lead', 'phoneNumber', l.phone_number,
    'organizationId', l.organization_id, 'activeGroupIds', json(l.active_group_ids),
    'inactiveGroupIds', json(l.inactive_group_ids), 'customFields', json(l.custom_fields),
    'firstName', l.first_name, 'lastName', l.last_name, 'notes', l.notes, 'followUp', l.follow_up,
    'email', l.email, 'postalCode', l.postal_code, 'phoneNumberType', l.phone_number_type,
    'tagIds', json(l.tag_ids), 'globalOptedOut', json(CASE WHEN s.opted_out THEN 'true' ELSE 'false' END),
    'createdAt', l.created_at)
    FROM leads AS l LEFT JOIN consent_state AS s
    ON s.organization_id = l.organization_id AND s.phone_number = l.phone_number";

/// Optional fields the service leaves out rather than sending null.
fn without_nulls(text: &str) -> Value {
    match serde_json::from_str(text) {
        Ok(Value::Object(mut map)) => {
            map.retain(|_, v| !v.is_null());
            Value::Object(map)
        }
        Ok(other) => other,
        Err(_) => Value::Null,
    }
}

pub async fn lead(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AdminError> {
    let found: Option<String> = sqlx::query_scalar(&format!("SELECT {LEAD_JSON} WHERE l.id = ?"))
        .bind(&id)
        .fetch_optional(&state.pool)
        .await?;
    found
        .map(|text| Json(without_nulls(&text)))
        .ok_or_else(|| AdminError::NotFound(format!("no lead {id} in the mirror")))
}

pub async fn find_leads(
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ByNumber>, QueryRejection>,
) -> Result<Json<Items<Value>>, AdminError> {
    let Query(ByNumber {
        phone_number,
        organization_id,
    }) = query?;
    let phone = required_phone(phone_number)?;
    let rows: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT {LEAD_JSON} WHERE l.phone_number = ?1 AND (?2 IS NULL OR l.organization_id = ?2)
         ORDER BY l.organization_id, l.id"
    ))
    .bind(&phone)
    .bind(&organization_id)
    .fetch_all(&state.pool)
    .await?;
    Ok(Json(Items {
        items: rows.iter().map(|t| without_nulls(t)).collect(),
    }))
}

pub async fn message(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AdminError> {
    let found: Option<String> = sqlx::query_scalar(
        "SELECT json_object('id', id, 'threadId', thread_id, 'status', status, 'type', type,
                'createdAt', created_at, 'errorCode', error_code, 'leadId', lead_id,
                'organizationId', organization_id, 'terminal', json(CASE WHEN terminal THEN 'true' ELSE 'false' END),
                'statusAt', status_at, 'source', source, 'updatedAt', updated_at)
         FROM messages WHERE id = ?",
    )
    .bind(&id)
    .fetch_optional(&state.pool)
    .await?;
    found
        .map(|text| Json(without_nulls(&text)))
        .ok_or_else(|| AdminError::NotFound(format!("no message {id} is tracked")))
}

pub async fn status(
    State(state): State<Arc<AdminState>>,
) -> Result<Json<ledger::Status>, AdminError> {
    Ok(Json(ledger::status(&state.pool).await?))
}
