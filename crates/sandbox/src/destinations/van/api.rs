//! `/van/v4`: HTTP Basic (the application name, and `{apiKey}|{mode}`), the committee's
//! result codes and contact types, and the routes of the people's endpoints (`people.rs`)
//! and of the changed-entity export jobs (`export_api.rs`).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::Van;
use super::export_api;
use super::people as van_people;
use super::wire::{Caller, VanError};
use crate::destinations::FakesState;

/// Checks the Basic credentials and hands the handlers the caller.
pub(crate) async fn auth(
    State(fakes): State<FakesState>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = caller(&fakes.van(), request.headers());
    match caller {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(e) => e.into_response(),
    }
}

fn caller(van: &Van, headers: &HeaderMap) -> Result<Caller, VanError> {
    let encoded = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .ok_or_else(|| VanError::unauthorized("Basic authentication is required"))?;
    let decoded = STANDARD
        .decode(encoded.trim())
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| VanError::unauthorized("The credentials are not valid Basic credentials"))?;
    let (application, password) = decoded
        .split_once(':')
        .ok_or_else(|| VanError::unauthorized("The credentials are not valid Basic credentials"))?;
    if application.trim().is_empty() {
        return Err(VanError::unauthorized(
            "The user name must be the application name",
        ));
    }
    let (key, mode) = password.rsplit_once('|').ok_or_else(|| {
        VanError::unauthorized("The password must be the API key, `|`, and the database mode")
    })?;
    let mode = match mode {
        "0" => 0,
        "1" => 1,
        _ => {
            return Err(VanError::unauthorized(
                "The database mode must be 0 (MyVoters) or 1 (MyCampaign)",
            ));
        }
    };
    let committee = van
        .committee_of(key)
        .ok_or_else(|| VanError::unauthorized("The API key is not valid"))?;
    match van.committees[committee].revoked {
        Some(403) => Err(VanError::new(
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            "The API key has been revoked",
        )),
        Some(_) => Err(VanError::unauthorized("The API key has been revoked")),
        None => Ok(Caller {
            committee,
            mode,
            application: application.to_owned(),
        }),
    }
}

pub(crate) async fn no_such_endpoint() -> VanError {
    VanError::not_found("No such endpoint")
}

pub(crate) fn routes() -> Router<FakesState> {
    Router::new()
        .route("/canvassResponses/resultCodes", get(result_codes))
        .route("/canvassResponses/contactTypes", get(contact_types))
        .route(
            "/people/{van_id}/canvassResponses",
            post(van_people::canvass),
        )
        .route(
            "/people/{van_id}",
            get(van_people::person).post(van_people::update_person),
        )
        .route("/changedEntityExportJobs", post(export_api::create))
        .route(
            "/changedEntityExportJobs/resources",
            get(export_api::resources),
        )
        .route(
            "/changedEntityExportJobs/fields/{resource_type}",
            get(export_api::fields),
        )
        .route(
            "/changedEntityExportJobs/changeTypes/{resource_type}",
            get(export_api::change_types),
        )
        .route("/changedEntityExportJobs/{id}", get(export_api::status))
}

async fn result_codes(
    State(fakes): State<FakesState>,
    Extension(caller): Extension<Caller>,
) -> Response {
    let van = fakes.van();
    Json(&van.committees[caller.committee].result_codes).into_response()
}

async fn contact_types(
    State(fakes): State<FakesState>,
    Extension(caller): Extension<Caller>,
) -> Response {
    let van = fakes.van();
    Json(van.committees[caller.committee].contact_types()).into_response()
}
