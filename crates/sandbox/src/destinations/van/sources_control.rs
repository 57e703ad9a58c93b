//! `/_control/van/...` for the read side: a user marking a person (`mark`), changes seeded
//! in bulk (`seed`), and how a committee's export jobs behave (`export`).
//!
//! - `POST /_control/van/mark` `{"apiKey","vanId"|"phoneNumber","mark":"doNotText"|
//!   "optOut"|"optIn","user"}` (mark defaults to `doNotText`, user to "Phone banker"):
//!   201 with the change logged.
//! - `POST /_control/van/seed` `{"apiKey","count","doNotText":false}`: 201
//!   `{"firstVanId","count"}`.
//! - `PUT /_control/van/export` `{"apiKey", ...VanExportSettings}`: 200 with the settings.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use super::{VanExportSettings, VanMark, VanTarget};
use crate::destinations::FakesState;
use crate::destinations::control::{body, refuse};

/// The user a mark is made by unless named.
pub(crate) const DEFAULT_USER: &str = "Phone banker";

pub(super) fn routes() -> Router<FakesState> {
    Router::new()
        .route("/_control/van/mark", post(mark))
        .route("/_control/van/seed", post(seed))
        .route("/_control/van/export", put(export))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Mark {
    api_key: String,
    van_id: Option<u64>,
    phone_number: Option<String>,
    mark: Option<VanMark>,
    user: Option<String>,
}

async fn mark(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    let mark: Mark = match body(&bytes) {
        Ok(mark) => mark,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
    };
    let target = match (mark.van_id, mark.phone_number) {
        (Some(id), None) => VanTarget::VanId(id),
        (None, Some(phone)) => VanTarget::PhoneNumber(phone),
        _ => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "give vanId or phoneNumber, not both",
            );
        }
    };
    let user = mark.user.unwrap_or_else(|| DEFAULT_USER.into());
    let what = mark.mark.unwrap_or(VanMark::DoNotText);
    match fakes.van().mark(&mark.api_key, &target, what, &user) {
        Ok(change) => (StatusCode::CREATED, Json(change)).into_response(),
        Err(why) => refuse(StatusCode::NOT_FOUND, why),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Seed {
    api_key: String,
    count: u64,
    #[serde(default)]
    do_not_text: bool,
}

async fn seed(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    let seed: Seed = match body(&bytes) {
        Ok(seed) => seed,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
    };
    match fakes
        .van()
        .seed(&seed.api_key, seed.count, seed.do_not_text)
    {
        Some(first) => (
            StatusCode::CREATED,
            Json(json!({"firstVanId": first, "count": seed.count})),
        )
            .into_response(),
        None => refuse(StatusCode::NOT_FOUND, "no committee has this key"),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Export {
    api_key: String,
    #[serde(flatten)]
    settings: VanExportSettings,
}

async fn export(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    let export: Export = match body(&bytes) {
        Ok(export) => export,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
    };
    if fakes
        .van()
        .set_export(&export.api_key, export.settings.clone())
    {
        Json(export.settings).into_response()
    } else {
        refuse(StatusCode::NOT_FOUND, "no committee has this key")
    }
}
