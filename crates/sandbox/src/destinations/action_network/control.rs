//! `/_control/actionnetwork/...`: the fake's truth, and what a test does to it.
//!
//! - `GET /_control/actionnetwork`: the truth.
//! - `POST /_control/actionnetwork/unsubscribe` `{"phoneNumber"}`: a supporter unsubscribes
//!   their mobile number (status `unsubscribed`, `modified_date` now; a person is made when
//!   nobody has the number): 200 `{"person","created"}`.
//! - `POST /_control/actionnetwork/seed` `{"count"}`: that many subscribed supporters with a
//!   mobile number each, modified over the last hour: 201 `{"count"}`.
//! - `PUT /_control/actionnetwork/endless_next` `{"on"}`: the fault of a listing whose
//!   `next` never ends.
//! - `PUT /_control/actionnetwork/next_href` `{"href"}` (a string, or null): hostile, the
//!   first page's `next` link is this text as given (`@127.0.0.2:9/people`, `//host/x`).
//! - `POST /_control/actionnetwork/person` `{"number","status","modifiedDate"}`: hostile,
//!   a person with one mobile number exactly as written (without its country code,
//!   `00`-prefixed, not a number) and any `modified_date` (one in 2099): 201 `{"person"}`.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use chrono::{Duration, SecondsFormat, Utc};
use serde::Deserialize;
use serde_json::json;

use super::{
    ActionNetwork, ActionNetworkPerson, ActionNetworkPhone, ActionNetworkTruth, SUBSCRIBED,
    UNSUBSCRIBED, digits, new_identifier, now,
};
use crate::destinations::FakesState;
use crate::destinations::control::{body, opted_out, refuse, seeded, switched};

pub(crate) fn routes() -> Router<FakesState> {
    Router::new()
        .route("/_control/actionnetwork", get(truth))
        .route("/_control/actionnetwork/unsubscribe", post(unsubscribe))
        .route("/_control/actionnetwork/seed", post(seed))
        .route("/_control/actionnetwork/endless_next", put(endless_next))
        .route("/_control/actionnetwork/next_href", put(next_href))
        .route("/_control/actionnetwork/person", post(add_person))
}

async fn truth(State(fakes): State<FakesState>) -> Json<ActionNetworkTruth> {
    Json(fakes.action_network_truth())
}

impl ActionNetwork {
    /// The supporter with this number unsubscribes it (made first when nobody has it).
    /// Returns the person and whether it was made; `None` if the number is not one.
    pub(crate) fn unsubscribe(&mut self, raw: &str) -> Option<(ActionNetworkPerson, bool)> {
        let number = digits(raw)?;
        let at = now();
        let found = self
            .people
            .iter()
            .position(|p| p.phone_numbers.iter().any(|q| q.number == number));
        let index = found.unwrap_or_else(|| {
            self.people
                .push(person(number.clone(), UNSUBSCRIBED, at.clone()));
            self.people.len() - 1
        });
        let person = &mut self.people[index];
        for phone in person
            .phone_numbers
            .iter_mut()
            .filter(|q| q.number == number)
        {
            phone.status = UNSUBSCRIBED.into();
        }
        person.modified_date = at;
        Some((person.clone(), found.is_none()))
    }

    /// `count` subscribed supporters, numbers `+1 201 400 0000` on, modified over the last
    /// hour (the earliest first).
    pub(crate) fn seed(&mut self, count: u64) {
        let start = Utc::now() - Duration::hours(1);
        let step = 3_600_000 / i64::try_from(count.max(1)).unwrap_or(i64::MAX);
        let first = 12_014_000_000 + self.people.len() as u64;
        for i in 0..count {
            let at = start + Duration::milliseconds(step * i64::try_from(i).unwrap_or(0));
            let at = at.to_rfc3339_opts(SecondsFormat::Secs, true);
            self.people
                .push(person((first + i).to_string(), SUBSCRIBED, at));
        }
    }

    pub(crate) fn set_endless_next(&mut self, on: bool) {
        self.endless_next = on;
    }

    pub(crate) fn set_next_href(&mut self, href: Option<String>) {
        self.next_href = href;
    }

    /// A person with one mobile number written as `number`, its `status`, modified at
    /// `modified_date`, all as given: what another system may hold.
    pub(crate) fn add_person(
        &mut self,
        number: &str,
        status: &str,
        modified_date: &str,
    ) -> ActionNetworkPerson {
        let mut made = person(number.to_owned(), status, modified_date.to_owned());
        made.created_date = now();
        self.people.push(made.clone());
        made
    }
}

fn person(number: String, status: &str, at: String) -> ActionNetworkPerson {
    ActionNetworkPerson {
        identifier: new_identifier(),
        given_name: None,
        family_name: None,
        phone_numbers: vec![ActionNetworkPhone {
            primary: true,
            number,
            number_type: "Mobile".into(),
            status: status.into(),
        }],
        email_addresses: Vec::new(),
        created_date: at.clone(),
        modified_date: at,
    }
}

async fn unsubscribe(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    opted_out(&bytes, "person", |phone| {
        fakes.action_network().unsubscribe(phone)
    })
}

async fn seed(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    seeded(&bytes, |count| fakes.action_network().seed(count))
}

async fn endless_next(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    switched(&bytes, |on| fakes.action_network().set_endless_next(on))
}

#[derive(Deserialize)]
struct NextHref {
    href: Option<String>,
}

async fn next_href(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    match body::<NextHref>(&bytes) {
        Ok(b) => {
            fakes.action_network().set_next_href(b.href);
            StatusCode::NO_CONTENT.into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AddPerson {
    number: String,
    status: String,
    modified_date: String,
}

async fn add_person(State(fakes): State<FakesState>, bytes: Bytes) -> Response {
    match body::<AddPerson>(&bytes) {
        Ok(b) => {
            let person = fakes
                .action_network()
                .add_person(&b.number, &b.status, &b.modified_date);
            (StatusCode::CREATED, Json(json!({ "person": person }))).into_response()
        }
        Err(why) => refuse(StatusCode::BAD_REQUEST, why),
    }
}
