//! The fakes' test controls, unauthenticated like the rest of `/_control`: their truth, their
//! faults and latency, and VAN's per-committee switches.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::faults::FakeFault;
use super::{ActionNetworkTruth, Fake, FakesState, VanTruth};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PushFault {
    #[serde(default = "one")]
    count: usize,
    fault: FakeFault,
}

fn one() -> usize {
    1
}

#[derive(Deserialize)]
struct Latency {
    ms: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Revoke {
    api_key: String,
    /// 401 or 403; null restores the key.
    status: Option<u16>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SmsText {
    api_key: String,
    present: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewPerson {
    phone_number: String,
}

fn refuse(status: StatusCode, text: impl Into<String>) -> Response {
    (status, Json(json!({ "error": text.into() }))).into_response()
}

/// The body as `T`, or why not.
fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("malformed body: {e}"))
}

pub(super) fn routes() -> Router<FakesState> {
    Router::new()
        .route("/_control/van", get(van_truth))
        .route("/_control/actionnetwork", get(action_network_truth))
        .route(
            "/_control/van/faults",
            get(|s: State<FakesState>| faults(s, Fake::Van))
                .post(|s: State<FakesState>, b: Bytes| push(s, b, Fake::Van))
                .delete(|s: State<FakesState>| clear(s, Fake::Van)),
        )
        .route(
            "/_control/actionnetwork/faults",
            get(|s: State<FakesState>| faults(s, Fake::ActionNetwork))
                .post(|s: State<FakesState>, b: Bytes| push(s, b, Fake::ActionNetwork))
                .delete(|s: State<FakesState>| clear(s, Fake::ActionNetwork)),
        )
        .route(
            "/_control/van/latency",
            put(|s: State<FakesState>, b: Bytes| latency(s, b, Fake::Van)),
        )
        .route(
            "/_control/actionnetwork/latency",
            put(|s: State<FakesState>, b: Bytes| latency(s, b, Fake::ActionNetwork)),
        )
        .route("/_control/van/revoke", post(revoke))
        .route("/_control/van/sms_text", post(sms_text))
        .route("/_control/van/people", post(add_person))
}

async fn van_truth(State(fakes): State<FakesState>) -> Json<VanTruth> {
    Json(fakes.van_truth())
}

async fn action_network_truth(State(fakes): State<FakesState>) -> Json<ActionNetworkTruth> {
    Json(fakes.action_network_truth())
}

async fn faults(State(fakes): State<FakesState>, fake: Fake) -> Response {
    Json(fakes.board(fake).faults()).into_response()
}

/// Queues a fault for the next `count` requests (default 1).
async fn push(State(fakes): State<FakesState>, bytes: Bytes, fake: Fake) -> Response {
    let push: PushFault = match body(&bytes) {
        Ok(push) => push,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
    };
    if let FakeFault::Status { status, .. } = &push.fault
        && !(400..=599).contains(status)
    {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("{status} is not an error status"),
        );
    }
    let board = fakes.board(fake);
    board.push(push.count, push.fault);
    Json(board.faults()).into_response()
}

async fn clear(State(fakes): State<FakesState>, fake: Fake) -> StatusCode {
    fakes.board(fake).clear();
    StatusCode::NO_CONTENT
}

async fn latency(State(fakes): State<FakesState>, bytes: Bytes, fake: Fake) -> Response {
    match body::<Latency>(&bytes) {
        Ok(latency) => {
            let board = fakes.board(fake);
            board.set_latency(Duration::from_millis(latency.ms));
            Json(board.faults()).into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

async fn revoke(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    let revoke: Revoke = match body(&bytes) {
        Ok(revoke) => revoke,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
    };
    if let Some(status) = revoke.status.filter(|s| !matches!(s, 401 | 403)) {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("a revoked key answers 401 or 403, not {status}"),
        );
    }
    if fakes.van_revoke(&revoke.api_key, revoke.status) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        refuse(StatusCode::NOT_FOUND, "no committee has this key")
    }
}

async fn sms_text(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    match body::<SmsText>(&bytes) {
        Ok(b) if fakes.van_sms_text(&b.api_key, b.present) => {
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(_) => refuse(StatusCode::NOT_FOUND, "no committee has this key"),
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

async fn add_person(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    match body::<NewPerson>(&bytes) {
        Ok(b) => {
            let van_id = fakes.van_add_person(&b.phone_number);
            (StatusCode::CREATED, Json(json!({ "vanId": van_id }))).into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}
