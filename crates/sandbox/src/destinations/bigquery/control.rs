//! `/_control/bigquery/...`: the fake's truth, and what a test does to it (its faults and
//! latency are with the other fakes', `/_control/bigquery/faults` and `.../latency`).
//!
//! - `GET /_control/bigquery`: the truth.
//! - `POST /_control/bigquery/keys` `{"clientEmail","publicKeyPem"}`: the token endpoint
//!   accepts JWTs of that account signed with that RSA key: 204, or 400 if not a key.
//! - `POST /_control/bigquery/datasets` `{"projectId","datasetId"}`: a dataset exists: 201
//!   (200 if it did).
//! - `PUT` (or `POST`) `/_control/bigquery/token_lifetime` `{"secs"}`: the `expires_in` of
//!   the tokens issued from now on (3599 by default).
//! - `PUT` (or `POST`) `/_control/bigquery/dedup_window` `{"ms"}`: how long an `insertId` is
//!   remembered (60,000 by default; 0: never de-duplicated).
//! - `POST /_control/bigquery/refusals` `{"field","value","reason"?,"message"?}`: rows whose
//!   `field` equals `value` get a per-row error; `DELETE` clears them.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;

use super::{BigQueryRowRefusal, BigQueryTruth};
use crate::destinations::FakesState;
use crate::destinations::control::{body, refuse};

/// The routes of the module's doc.
pub(crate) fn routes() -> Router<FakesState> {
    Router::new()
        .route("/_control/bigquery", get(truth))
        .route("/_control/bigquery/keys", post(add_key))
        .route("/_control/bigquery/datasets", post(add_dataset))
        .route(
            "/_control/bigquery/token_lifetime",
            put(token_lifetime).post(token_lifetime),
        )
        .route(
            "/_control/bigquery/dedup_window",
            put(dedup_window).post(dedup_window),
        )
        .route(
            "/_control/bigquery/refusals",
            post(add_refusal).delete(clear_refusals),
        )
}

/// `GET /_control/bigquery`.
async fn truth(State(fakes): State<FakesState>) -> Json<BigQueryTruth> {
    Json(fakes.bigquery_truth())
}

/// The body of `POST .../keys`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Key {
    client_email: String,
    public_key_pem: String,
}

/// `POST /_control/bigquery/keys`.
async fn add_key(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    let key = match body::<Key>(&bytes) {
        Ok(key) => key,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
    };
    match fakes
        .bigquery()
        .add_key(&key.client_email, &key.public_key_pem)
    {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

/// The body of `POST .../datasets`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Dataset {
    project_id: String,
    dataset_id: String,
}

/// `POST /_control/bigquery/datasets`: the datasets, after.
async fn add_dataset(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    match body::<Dataset>(&bytes) {
        Ok(d) if d.project_id.is_empty() || d.dataset_id.is_empty() => refuse(
            StatusCode::BAD_REQUEST,
            "projectId and datasetId must not be empty",
        ),
        Ok(d) => {
            let added = fakes.bigquery().add_dataset(&d.project_id, &d.dataset_id);
            let status = if added {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            (status, Json(fakes.bigquery_truth().datasets)).into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

/// The body of `PUT .../token_lifetime`.
#[derive(Deserialize)]
struct Lifetime {
    secs: u64,
}

/// `PUT /_control/bigquery/token_lifetime`.
async fn token_lifetime(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    match body::<Lifetime>(&bytes) {
        Ok(l) => {
            fakes.bigquery().set_token_lifetime(l.secs);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

/// The body of `PUT .../dedup_window`.
#[derive(Deserialize)]
struct Window {
    ms: u64,
}

/// `PUT /_control/bigquery/dedup_window`.
async fn dedup_window(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    match body::<Window>(&bytes) {
        Ok(w) => {
            fakes
                .bigquery()
                .set_dedup_window(Duration::from_millis(w.ms));
            StatusCode::NO_CONTENT.into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

/// The body of `POST .../refusals`.
#[derive(Deserialize)]
struct Refusal {
    field: String,
    value: String,
    reason: Option<String>,
    message: Option<String>,
}

/// `POST /_control/bigquery/refusals`: the refusals, after.
async fn add_refusal(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    match body::<Refusal>(&bytes) {
        Ok(r) => {
            let refusal = BigQueryRowRefusal::new(&r.field, &r.value, r.reason, r.message);
            fakes.bigquery().refuse_rows(refusal);
            (StatusCode::CREATED, Json(fakes.bigquery_truth().refusals)).into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

/// `DELETE /_control/bigquery/refusals`.
async fn clear_refusals(State(fakes): State<FakesState>) -> StatusCode {
    fakes.bigquery().clear_refusals();
    StatusCode::NO_CONTENT
}
