//! What a test (in process, or over HTTP under `/_control`) can make the sandbox do: people
//! texting STOP/START, messages sent and moved on, faults, and the whole truth to compare
//! against.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use super::api::{ApiError, ApiResult, AppState, JsonBody};
use super::config::{ApiFaults, DeliveryFaults};
use super::deliver::{DeliveryCounts, DeliveryRecord};
use super::shared::{ApiRequest, Shared, StatsSnapshot};
use super::wire::{Lead, MessageType, Organization, WebhookRegistration};
use super::world::{Refusal, SandboxMessage};

/// Everything the sandbox holds that a comparison needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Truth {
    pub organizations: Vec<Organization>,
    pub leads: Vec<Lead>,
    pub messages: Vec<SandboxMessage>,
    pub registrations: Vec<WebhookRegistration>,
}

impl Shared {
    pub(crate) fn truth(&self) -> Truth {
        self.read(|w| Truth {
            organizations: w.organizations.values().cloned().collect(),
            leads: w.leads.values().cloned().collect(),
            messages: w.messages.values().cloned().collect(),
            registrations: w
                .registrations
                .values()
                .map(|r| r.resource.clone())
                .collect(),
        })
    }

    /// A person texts STOP (`stop`) or START to an organization. Returns the leads whose
    /// consent changed (several with account sync).
    pub(crate) fn text(
        &self,
        organization_id: &str,
        phone: &str,
        stop: bool,
    ) -> Result<Vec<Lead>, Refusal> {
        self.with_world(|w| w.text_keyword(organization_id, phone, stop))
    }

    pub(crate) fn send_message(
        &self,
        lead_id: &str,
        kind: MessageType,
    ) -> Result<SandboxMessage, Refusal> {
        self.with_world(|w| w.send_message(lead_id, kind))
    }

    /// Moves the named messages (all that can move, if none named) one status on.
    pub(crate) fn advance_messages(&self, ids: &[String]) -> Vec<SandboxMessage> {
        self.with_world(|w| w.advance_messages(ids))
    }

    pub(crate) fn set_api_faults(&self, faults: ApiFaults) {
        self.api_faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .faults = faults;
    }

    /// The next resource requests are answered with these statuses, in order.
    pub(crate) fn fail_next(&self, statuses: &[u16]) {
        self.api_faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fail_next
            .extend(statuses.iter().copied());
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TextBody {
    organization_id: String,
    phone_number: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendBody {
    lead_id: String,
    #[serde(rename = "type")]
    kind: Option<MessageType>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct AdvanceBody {
    ids: Vec<String>,
}

#[derive(Deserialize)]
struct FailNextBody {
    statuses: Vec<u16>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Faults {
    #[serde(default)]
    api: Option<ApiFaults>,
    #[serde(default)]
    delivery: Option<DeliveryFaults>,
}

#[derive(Serialize)]
struct Changed<T> {
    changed: Vec<T>,
}

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/_control/truth", get(truth))
        .route("/_control/stats", get(stats))
        .route("/_control/requests", get(requests))
        .route("/_control/stop", post(stop))
        .route("/_control/start", post(start))
        .route("/_control/messages", post(send))
        .route("/_control/messages/advance", post(advance))
        .route("/_control/faults", get(get_faults).put(put_faults))
        .route("/_control/fail_next", post(fail_next))
        .route("/_control/tokens/revoke", post(revoke))
        .route("/_control/deliveries", get(deliveries))
        .route("/_control/deliveries/counts", get(delivery_counts))
        .route("/_control/settle", post(settle))
}

async fn truth(State(s): State<AppState>) -> Json<Truth> {
    Json(s.truth())
}

async fn stats(State(s): State<AppState>) -> Json<StatsSnapshot> {
    Json(s.stats())
}

async fn requests(State(s): State<AppState>) -> Json<Vec<ApiRequest>> {
    Json(s.requests())
}

async fn stop(
    State(s): State<AppState>,
    JsonBody(b): JsonBody<TextBody>,
) -> ApiResult<Json<Changed<Lead>>> {
    let changed = s.text(&b.organization_id, &b.phone_number, true)?;
    Ok(Json(Changed { changed }))
}

async fn start(
    State(s): State<AppState>,
    JsonBody(b): JsonBody<TextBody>,
) -> ApiResult<Json<Changed<Lead>>> {
    let changed = s.text(&b.organization_id, &b.phone_number, false)?;
    Ok(Json(Changed { changed }))
}

async fn send(
    State(s): State<AppState>,
    JsonBody(b): JsonBody<SendBody>,
) -> ApiResult<(StatusCode, Json<SandboxMessage>)> {
    let message = s.send_message(&b.lead_id, b.kind.unwrap_or(MessageType::SMS))?;
    Ok((StatusCode::CREATED, Json(message)))
}

async fn advance(
    State(s): State<AppState>,
    body: Option<Json<AdvanceBody>>,
) -> Json<Changed<SandboxMessage>> {
    let ids = body.map(|Json(b)| b.ids).unwrap_or_default();
    Json(Changed {
        changed: s.advance_messages(&ids),
    })
}

async fn get_faults(State(s): State<AppState>) -> Json<Faults> {
    let api = s
        .api_faults
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .faults
        .clone();
    Json(Faults {
        api: Some(api),
        delivery: Some(s.deliverer.faults()),
    })
}

/// Replaces the fault settings named in the body.
async fn put_faults(State(s): State<AppState>, JsonBody(b): JsonBody<Faults>) -> Json<Faults> {
    if let Some(api) = b.api {
        s.set_api_faults(api);
    }
    if let Some(delivery) = b.delivery {
        s.deliverer.set_faults(delivery);
    }
    get_faults(State(s)).await
}

async fn fail_next(
    State(s): State<AppState>,
    JsonBody(b): JsonBody<FailNextBody>,
) -> ApiResult<StatusCode> {
    if let Some(bad) = b.statuses.iter().find(|s| !(400..=599).contains(*s)) {
        return Err(ApiError::bad_request(format!(
            "{bad} is not an error status"
        )));
    }
    s.fail_next(&b.statuses);
    Ok(StatusCode::NO_CONTENT)
}

async fn revoke(State(s): State<AppState>) -> StatusCode {
    s.revoke_tokens();
    StatusCode::NO_CONTENT
}

/// The most recent delivery records (a bounded window; totals are under `/counts`).
async fn deliveries(State(s): State<AppState>) -> Json<Vec<DeliveryRecord>> {
    Json(s.deliverer.records())
}

async fn delivery_counts(State(s): State<AppState>) -> Json<DeliveryCounts> {
    Json(s.deliverer.counts())
}

/// Waits (up to 10 s) until no delivery is pending; 200 when settled, 504 otherwise.
async fn settle(State(s): State<AppState>) -> StatusCode {
    if s.deliverer.settle(Duration::from_secs(10)).await {
        StatusCode::OK
    } else {
        StatusCode::GATEWAY_TIMEOUT
    }
}
