//! /webhook_registrations and mock_event (beyond the v3 document; shapes from
//! `spec/beyond-the-docs.md`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use chrono::Utc;
use secrecy::ExposeSecret;

use super::paging::page;
use super::{ApiError, ApiResult, AppState, JsonBody, Params};
use crate::deliver::{Job, post as post_signed};
use crate::shared::envelope;
use crate::wire::{
    CreateWebhookRegistration, DeleteOutcome, EventKind, Kind, Lead, MockEvent, MockEventOutcome,
    Page, UpdateWebhookRegistration, WebhookRegistration,
};
use crate::world::{Refusal, now};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/webhook_registrations", get(list).post(create))
        .route("/webhook_registrations/mock_event", post(mock_event))
        .route("/webhook_registrations/{id}", put(update).delete(delete))
}

async fn list(
    State(s): State<AppState>,
    params: Params,
) -> ApiResult<Json<Page<WebhookRegistration>>> {
    let limit = s.config.default_page_size;
    let kind: Option<EventKind> = params.parse("configType")?;
    s.read(|w| {
        let items = w
            .registrations
            .iter()
            .filter(|(_, r)| {
                params.matches("id", &r.resource.id)
                    && kind.is_none_or(|k| k == r.resource.config.kind())
            })
            .map(|(id, r)| (id, &r.resource));
        page(items, &params, limit).map(Json)
    })
}

async fn create(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<CreateWebhookRegistration>,
) -> ApiResult<(StatusCode, Json<WebhookRegistration>)> {
    let registration = s.with_world(|w| w.create_registration(body))?;
    Ok((StatusCode::CREATED, Json(registration)))
}

async fn update(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<UpdateWebhookRegistration>,
) -> ApiResult<Json<WebhookRegistration>> {
    Ok(Json(s.with_world(|w| w.update_registration(&id, body))?))
}

async fn delete(State(s): State<AppState>, Path(id): Path<String>) -> Json<DeleteOutcome> {
    Json(DeleteOutcome {
        success: s.with_world(|w| w.delete_registration(&id)),
    })
}

/// Sends one mock event while the caller waits, and says whether the target would pass
/// validation: a 2xx, plus the ownership header when the sandbox is configured to ask.
async fn mock_event(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<MockEvent>,
) -> ApiResult<Json<MockEventOutcome>> {
    let (target_url, secret, config) = match body {
        MockEvent::WebhookRegistrationId {
            webhook_registration_id,
        } => s.read(|w| {
            w.registrations
                .get(&webhook_registration_id)
                .map(|r| {
                    (
                        r.resource.target_url.clone(),
                        r.secret.clone(),
                        r.resource.config.clone(),
                    )
                })
                .ok_or_else(|| {
                    ApiError(Refusal::not_found(
                        "webhook registration",
                        &webhook_registration_id,
                    ))
                })
        })?,
        MockEvent::MockWebhookRegistration {
            target_url,
            secret_for_hmac,
            config,
        } => (
            target_url,
            Some(secret_for_hmac.expose_secret().to_owned()),
            config,
        ),
    };
    let id = s.next_event_id();
    let kind = config.kind();
    let body = match kind {
        EventKind::ConsentUpdate => envelope(kind, &id, Utc::now(), &mock_lead()),
        EventKind::MessageStatus => envelope(
            kind,
            &id,
            Utc::now(),
            &serde_json::json!({
                "id": "msg_mock", "threadId": "thr_mock", "status": "delivered", "type": "SMS",
                "createdAt": now(), "leadId": "lead_mock", "organizationId": "org_mock"
            }),
        ),
    };
    let job = Job {
        event_id: id,
        event_type: kind.token(),
        registration_id: "mock".into(),
        target_url,
        secret: secret.filter(|s| !s.is_empty()),
        body,
    };
    let response = post_signed(&s.http, &s.config.signing, &job).await;
    let will_pass_validation = response.is_some_and(|r| {
        let confirmed = match &s.config.confirmation_header {
            None => true,
            Some(name) => r
                .headers()
                .get(name.as_str())
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v == s.config.account_id),
        };
        r.status().is_success() && confirmed
    });
    Ok(Json(MockEventOutcome {
        will_pass_validation,
        account_id: s.config.account_id.clone(),
    }))
}

fn mock_lead() -> Lead {
    Lead {
        id: "lead_mock".into(),
        kind: Kind::Lead,
        phone_number: "+15550000000".into(),
        organization_id: "org_mock".into(),
        active_group_ids: Vec::new(),
        inactive_group_ids: Vec::new(),
        custom_fields: Default::default(),
        first_name: Some("Mock".into()),
        last_name: None,
        notes: None,
        follow_up: None,
        email: None,
        postal_code: None,
        phone_number_type: None,
        tag_ids: Vec::new(),
        global_opted_out: true,
        created_at: now(),
    }
}
