//! The fakes' test controls, unauthenticated like the rest of `/_control`: their faults and
//! latency (each fake's truth and switches are its own: `van/control.rs`,
//! `action_network/control.rs`, `bigquery/control.rs`, `mobilize/control.rs`,
//! `mobile_commons/control.rs`).

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::faults::FakeFault;
use super::{Fake, FakesState};

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

pub(super) fn refuse(status: StatusCode, text: impl Into<String>) -> Response {
    (status, Json(json!({ "error": text.into() }))).into_response()
}

/// The body as `T`, or why not.
pub(super) fn body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("malformed body: {e}"))
}

/// A fake's `/faults` (GET, POST, DELETE) and `/latency` (PUT) under `/_control/{name}`.
fn fault_routes(name: &str, fake: Fake) -> Router<FakesState> {
    Router::new()
        .route(
            &format!("/_control/{name}/faults"),
            get(move |s: State<FakesState>| faults(s, fake))
                .post(move |s: State<FakesState>, b: Bytes| push(s, b, fake))
                .delete(move |s: State<FakesState>| clear(s, fake)),
        )
        .route(
            &format!("/_control/{name}/latency"),
            put(move |s: State<FakesState>, b: Bytes| latency(s, b, fake)),
        )
}

pub(super) fn routes() -> Router<FakesState> {
    fault_routes("van", Fake::Van)
        .merge(fault_routes("actionnetwork", Fake::ActionNetwork))
        .merge(fault_routes("bigquery", Fake::BigQuery))
        .merge(fault_routes("mobilize", Fake::Mobilize))
        .merge(fault_routes("mobile_commons", Fake::MobileCommons))
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
