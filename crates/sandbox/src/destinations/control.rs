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

/// The body of a control that opts a number out there.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PhoneNumber {
    phone_number: String,
}

/// A control that opts the number its body names out (`{"phoneNumber"}`), by `opt_out`:
/// what the person became, shown under `key`, and whether they were made (`None`: not a
/// number). 200 `{key, "created"}`, or 400.
pub(super) fn opted_out<T: serde::Serialize>(
    bytes: &Bytes,
    key: &str,
    opt_out: impl FnOnce(&str) -> Option<(T, bool)>,
) -> Response {
    match body::<PhoneNumber>(bytes) {
        Ok(b) => match opt_out(&b.phone_number) {
            Some((made, created)) => Json(json!({ key: made, "created": created })).into_response(),
            None => refuse(StatusCode::BAD_REQUEST, "not a phone number"),
        },
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

/// The body of a seed.
#[derive(Deserialize)]
struct Seed {
    count: u64,
}

/// Most people or profiles one seed makes.
const MOST_SEEDED: u64 = 1_000_000;

/// A control that makes `{"count"}` more people or profiles, by `seed`: 201 `{"count"}`, or
/// 400.
pub(super) fn seeded(bytes: &Bytes, seed: impl FnOnce(u64)) -> Response {
    match body::<Seed>(bytes) {
        Ok(b) if b.count <= MOST_SEEDED => {
            seed(b.count);
            (StatusCode::CREATED, Json(json!({ "count": b.count }))).into_response()
        }
        Ok(_) => refuse(
            StatusCode::BAD_REQUEST,
            format!("count: at most {MOST_SEEDED}"),
        ),
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

/// The body of a hostile mode switched on or off.
#[derive(Deserialize)]
struct Switch {
    on: bool,
}

/// A control that switches a hostile mode (`{"on"}`), by `set`: 204, or 400.
pub(super) fn switched(bytes: &Bytes, set: impl FnOnce(bool)) -> Response {
    match body::<Switch>(bytes) {
        Ok(b) => {
            set(b.on);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
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
