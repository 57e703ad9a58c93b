//! `/_control/van`: the VAN fake's truth, and what a test changes of it: a key revoked, a
//! committee without "SMS Text", a new person.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use super::VanTruth;
use crate::destinations::FakesState;
use crate::destinations::control::{body, refuse};

pub(crate) fn routes() -> Router<FakesState> {
    Router::new()
        .route("/_control/van", get(van_truth))
        .route("/_control/van/revoke", post(revoke))
        .route("/_control/van/sms_text", post(sms_text))
        .route("/_control/van/people", post(add_person))
        .merge(super::sources_control::routes())
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

async fn van_truth(State(fakes): State<FakesState>) -> Json<VanTruth> {
    Json(fakes.van_truth())
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
