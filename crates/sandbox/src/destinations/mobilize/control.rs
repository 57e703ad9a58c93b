//! `/_control/mobilize/...`: the fake's truth, and what a test does to it (its faults and
//! latency are under `/_control/mobilize/faults` and `/latency`, as every fake's).
//!
//! - `GET /_control/mobilize`: the truth.
//! - `POST /_control/mobilize/opt-out` `{"phoneNumber"}`: a supporter opts out of the
//!   organization's texts (`sms_opt_in_status` `OPT_OUT`, `modified_date` now; a person is
//!   made when nobody has the number): 200 `{"person","created"}`; 400 if it is no number.
//! - `PUT /_control/mobilize/next_href` `{"href"}` (a string, or null): hostile, the first
//!   page's `next` link is this text as given (`http://elsewhere.invalid/mobilize/v1/...`).
//! - `POST /_control/mobilize/person` `{"number","modifiedDate","smsOptInStatus"}`: hostile,
//!   a person with one number exactly as written (`4155550100`, without its country code),
//!   any `modified_date` (Unix seconds: `4102444800`, in 2100) and any status (default
//!   `OPT_IN`): 201 `{"person"}`.
//! - `POST /_control/mobilize/seed` `{"count"}`: that many more people, each opted out, one
//!   number each (`+1312500NNNN` on), modified now: 201 `{"count"}`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;

use super::{Mobilize, MobilizePerson, MobilizeTruth, OPT_IN, OPT_OUT};
use crate::destinations::FakesState;
use crate::destinations::control::{body, opted_out, refuse, seeded};
use crate::destinations::numbers::digits;

/// The controls, merged beside the API.
pub(crate) fn routes() -> Router<FakesState> {
    Router::new()
        .route("/_control/mobilize", get(truth))
        .route("/_control/mobilize/opt-out", post(opt_out))
        .route("/_control/mobilize/next_href", put(next_href))
        .route("/_control/mobilize/person", post(add_person))
        .route("/_control/mobilize/seed", post(seed))
}

/// `GET /_control/mobilize`.
async fn truth(State(fakes): State<FakesState>) -> Json<MobilizeTruth> {
    Json(fakes.mobilize_truth())
}

impl Mobilize {
    /// The supporter with this number (however it is written) opts out of texts, at `at`
    /// (Unix seconds); a person is made when nobody has it. Returns the person and whether
    /// it was made; `None` if `raw` is not a number.
    pub(crate) fn opt_out(&mut self, raw: &str, at: i64) -> Option<(MobilizePerson, bool)> {
        let wanted = digits(raw)?;
        let found = self.people.iter().position(|p| {
            p.phone_numbers
                .iter()
                .any(|q| digits(&q.number).as_ref() == Some(&wanted))
        });
        let person = match found {
            Some(index) => &mut self.people[index],
            None => self.make(format!("+{wanted}"), OPT_OUT, at),
        };
        person.sms_opt_in_status = OPT_OUT.into();
        person.modified_date = at;
        let person = person.clone();
        self.order = None;
        Some((person, found.is_none()))
    }

    /// Hostile: the first page's `next` link is `href`, as given (`None`: its own).
    pub(crate) fn set_next_href(&mut self, href: Option<String>) {
        self.next_href = href;
    }

    /// A person with one number written as `number`, `status`, modified at `modified_date`,
    /// all as given: what another system may hold. Made now.
    pub(crate) fn add_person(
        &mut self,
        number: &str,
        status: &str,
        modified_date: i64,
    ) -> MobilizePerson {
        let person = self.make(number.to_owned(), status, Utc::now().timestamp());
        person.modified_date = modified_date;
        person.clone()
    }
}

/// `POST /_control/mobilize/opt-out`.
async fn opt_out(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    opted_out(&bytes, "person", |phone| fakes.mobilize_opt_out(phone))
}

/// The body of `next_href`.
#[derive(Deserialize)]
struct NextHref {
    href: Option<String>,
}

/// `PUT /_control/mobilize/next_href`.
async fn next_href(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    match body::<NextHref>(&bytes) {
        Ok(b) => {
            fakes.mobilize_next_href(b.href);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

/// The body of a hostile person.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AddPerson {
    number: String,
    modified_date: i64,
    #[serde(default = "opt_in")]
    sms_opt_in_status: String,
}

/// The status of a hostile person when the body gives none.
fn opt_in() -> String {
    OPT_IN.into()
}

/// `POST /_control/mobilize/person`.
async fn add_person(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    match body::<AddPerson>(&bytes) {
        Ok(b) => {
            let person =
                fakes.mobilize_add_person(&b.number, &b.sms_opt_in_status, b.modified_date);
            (StatusCode::CREATED, Json(json!({ "person": person }))).into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

/// `POST /_control/mobilize/seed`.
async fn seed(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    seeded(&bytes, |count| fakes.mobilize_seed(count))
}
