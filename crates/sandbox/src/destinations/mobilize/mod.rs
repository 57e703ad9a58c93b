//! `/mobilize/v1`: Mobilize's API (the events platform campaigns recruit volunteers on), as
//! a source only: the daemon reads an organization's people, never writes them. Its
//! controls: `control.rs`; its listing: `listing.rs`.
//!
//! Written from Mobilize's public API document (the `mobilizeamerica/api` README: the
//! response envelope, bearer keys, errors, the Person object, and `GET
//! /v1/organizations/:organization_id/people?updated_since=`) and from a client of it
//! (Parsons' `MobilizeAmerica.get_people`, which sends `Authorization: Bearer KEY` and
//! follows `next` until it is null). What is followed, and where the fake goes further:
//!
//! - A list is `{"count","next","previous","data"}`: `count` the objects across all pages,
//!   `next` and `previous` URLs or null. An error is `{"data": null, "error": {...}}`, the
//!   object keyed by the parameter at fault (`{"per_page": ["..."]}`), as the document's
//!   example is, or `detail` (Django REST framework's words, `Not found.`).
//! - A missing, malformed or wrong key is answered **403**: the document says requests "made
//!   with malformed, missing or otherwise incorrect API keys will return HTTP status 403".
//! - A Person: `id`, `person_id` (the same, as the document says), `user_id` (the canonical
//!   id, another number), `created_date` and `modified_date` (Unix seconds, integers),
//!   `given_name`, `family_name`, `email_addresses` `[{primary, address}]`, `phone_numbers`
//!   `[{primary, number}]`, `postal_addresses` `[{primary, postal_code}]`, and
//!   `sms_opt_in_status` (`OPT_IN`, `OPT_OUT` or `UNSPECIFIED`, for the organization asked).
//!   Fields the document does not describe (`blocked_date`, `user`) are not served.
//! - `updated_since` (Unix seconds) keeps the people whose `modified_date` is at or after it.
//! - The people come ordered by `modified_date`, then `id`, `per_page` at a time (default 25,
//!   as documented; at most 100, not documented: more is a 400). `next` and `previous` are
//!   absolute URLs on the host the client called, carrying an opaque `cursor` (the position,
//!   base64, as Django REST framework's cursor pagination writes it): a walk sees each
//!   person once, and one modified during the walk once more, at its end. The document's
//!   `page` parameter is not served; a cursor that cannot be read is a 404 `Invalid cursor`.
//! - One organization, [`MOBILIZE_ORGANIZATION_ID`], which the key belongs to; any other id
//!   is a 404 `Not found.`.
//!
//! Seeded with one person per number of the sandbox's leads (the first lead's name and postal
//! code; an `@example.org` address when it has no email), opted in, created and modified at
//! the seed. Numbers are kept as the leads hold them (E.164); the document's own example
//! (`"1234567890"`) shows a number may come as it was typed, which a hostile control plays.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::FakesState;
use super::faults::FakeRequestCounts;
use crate::wire::Lead;

/// Its test controls under `/_control/mobilize`.
mod control;
/// `GET /organizations/{organization_id}/people`.
mod listing;

pub(super) use control::routes as control_routes;
pub use listing::{
    DEFAULT_PER_PAGE as MOBILIZE_DEFAULT_PER_PAGE, MAX_PER_PAGE as MOBILIZE_MAX_PER_PAGE,
};

/// The one organization of the fake, which its key belongs to.
pub const MOBILIZE_ORGANIZATION_ID: u64 = 4242;

/// The first person's `id` (and `person_id`); the next people follow it.
const FIRST_PERSON_ID: u64 = 1001;

/// A person's `user_id` is its `id` plus this: another number, as in Mobilize.
const USER_ID_OFFSET: u64 = 700_000;

/// `sms_opt_in_status`: the person agreed to texts from the organization.
pub const OPT_IN: &str = "OPT_IN";
/// `sms_opt_in_status`: the person asked for no more texts from the organization.
pub const OPT_OUT: &str = "OPT_OUT";

/// An error answer: `{"data": null, "error": error}`.
pub(crate) fn error(status: StatusCode, error: Value) -> Response {
    (status, Json(json!({ "data": null, "error": error }))).into_response()
}

/// An error answer with a `detail`: `{"data": null, "error": {"detail": text}}`.
pub(crate) fn detail(status: StatusCode, text: impl Into<String>) -> Response {
    error(status, json!({ "detail": text.into() }))
}

/// An email address of a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MobilizeEmail {
    /// Always true.
    pub primary: bool,
    pub address: String,
}

/// A phone number of a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MobilizePhone {
    /// Always true.
    pub primary: bool,
    /// As stored: E.164 for the seeded people, anything for a hostile one.
    pub number: String,
}

/// A postal address of a person: its zip code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MobilizeAddress {
    /// Always true.
    pub primary: bool,
    pub postal_code: String,
}

/// A person as Mobilize serves it (the Person object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MobilizePerson {
    /// The person's id in Mobilize.
    pub id: u64,
    /// The same as `id`.
    pub person_id: u64,
    /// The canonical id, another number.
    pub user_id: u64,
    /// Unix seconds.
    pub created_date: i64,
    /// Unix seconds.
    pub modified_date: i64,
    /// Empty when unknown.
    pub given_name: String,
    /// Empty when unknown.
    pub family_name: String,
    pub email_addresses: Vec<MobilizeEmail>,
    pub phone_numbers: Vec<MobilizePhone>,
    pub postal_addresses: Vec<MobilizeAddress>,
    /// `OPT_IN`, `OPT_OUT` or `UNSPECIFIED`.
    pub sms_opt_in_status: String,
}

/// Everything the Mobilize fake holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MobilizeTruth {
    /// [`MOBILIZE_ORGANIZATION_ID`].
    pub organization_id: u64,
    /// In the order they were made.
    pub people: Vec<MobilizePerson>,
    /// People listings answered 200.
    pub listings_served: u64,
    /// Hostile: the first page's `next` link, as given.
    pub next_href: Option<String>,
    pub requests: FakeRequestCounts,
}

/// The Mobilize fake's state.
pub(crate) struct Mobilize {
    key: String,
    people: Vec<MobilizePerson>,
    /// The `id` of the next person made.
    next_id: u64,
    /// Hostile: the first page's `next` link is this text, as given.
    next_href: Option<String>,
    /// People listings answered 200.
    listings_served: u64,
    /// The people's indices in the listing's order (`modified_date`, then `id`), made
    /// when a listing needs it after a change: a walk of 100,000 people sorts them once.
    order: Option<Vec<usize>>,
}

impl Mobilize {
    /// One person per number of `leads`, opted in, made and modified at `at` (Unix seconds).
    pub(crate) fn new(key: String, leads: &[Lead], at: i64) -> Self {
        let mut mobilize = Self {
            key,
            people: Vec::new(),
            next_id: FIRST_PERSON_ID,
            next_href: None,
            listings_served: 0,
            order: None,
        };
        for lead in leads {
            let number = &lead.phone_number;
            let known = mobilize
                .people
                .iter()
                .any(|p| p.phone_numbers.iter().any(|q| &q.number == number));
            if known {
                continue;
            }
            let person = mobilize.make(number.clone(), OPT_IN, at);
            person.given_name = lead.first_name.clone().unwrap_or_default();
            person.family_name = lead.last_name.clone().unwrap_or_default();
            let address = lead.email.clone().unwrap_or_else(|| example_email(person));
            person.email_addresses = vec![MobilizeEmail {
                primary: true,
                address,
            }];
            if let Some(postal_code) = lead.postal_code.clone() {
                person.postal_addresses = vec![MobilizeAddress {
                    primary: true,
                    postal_code,
                }];
            }
        }
        mobilize
    }

    /// A new person with one number, `status`, made and modified at `at`: no name, no email.
    fn make(&mut self, number: String, status: &str, at: i64) -> &mut MobilizePerson {
        let id = self.next_id;
        self.next_id += 1;
        self.order = None;
        self.people.push(MobilizePerson {
            id,
            person_id: id,
            user_id: id + USER_ID_OFFSET,
            created_date: at,
            modified_date: at,
            given_name: String::new(),
            family_name: String::new(),
            email_addresses: Vec::new(),
            phone_numbers: vec![MobilizePhone {
                primary: true,
                number,
            }],
            postal_addresses: Vec::new(),
            sms_opt_in_status: status.to_owned(),
        });
        let last = self.people.len() - 1;
        &mut self.people[last]
    }

    /// `count` people opted out of texts, one number each (`+1312500NNNN` on), made and
    /// modified at `at`: a listing as large as a campaign's.
    pub(crate) fn seed(&mut self, count: u64, at: i64) {
        let first = 13_125_000_000 + self.people.len() as u64;
        for n in 0..count {
            self.make(format!("+{}", first + n), OPT_OUT, at);
        }
    }

    /// The people in the listing's order, `modified_date` then `id`.
    pub(crate) fn ordered(&mut self) -> Vec<&MobilizePerson> {
        let people = &self.people;
        let order = self.order.get_or_insert_with(|| {
            let mut order: Vec<usize> = (0..people.len()).collect();
            order.sort_by_key(|&at| (people[at].modified_date, people[at].id));
            order
        });
        order.iter().map(|&at| &people[at]).collect()
    }

    /// Everything it holds, with the request counts of its switchboard.
    pub(crate) fn truth(&self, requests: FakeRequestCounts) -> MobilizeTruth {
        MobilizeTruth {
            organization_id: MOBILIZE_ORGANIZATION_ID,
            people: self.people.clone(),
            listings_served: self.listings_served,
            next_href: self.next_href.clone(),
            requests,
        }
    }

    /// People listings answered 200.
    pub(crate) fn listings_served(&self) -> u64 {
        self.listings_served
    }
}

/// The address of a seeded person whose lead has none: `ana.nguyen.1001@example.org`.
fn example_email(person: &MobilizePerson) -> String {
    let name: String = [person.given_name.as_str(), person.family_name.as_str()]
        .iter()
        .filter(|n| !n.is_empty())
        .map(|n| n.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(".");
    let name = if name.is_empty() {
        "supporter".into()
    } else {
        name
    };
    format!("{name}.{}@example.org", person.id)
}

/// The key of `Authorization: Bearer KEY`, if the header is there (`Some("")` when it is
/// not a bearer key).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().unwrap_or("");
    let key = value
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("Bearer"))
        .map_or("", |(_, key)| key.trim());
    Some(key)
}

/// The key must be the configured one: else 403, as Mobilize documents.
pub(crate) async fn auth(
    State(fakes): State<FakesState>,
    request: Request,
    next: Next,
) -> Response {
    let refusal = {
        let mobilize = fakes.mobilize();
        match bearer(request.headers()) {
            None => Some("Authentication credentials were not provided."),
            Some(key) if mobilize.key.is_empty() || key != mobilize.key => Some("Invalid token."),
            Some(_) => None,
        }
    };
    match refusal {
        None => next.run(request).await,
        Some(text) => detail(StatusCode::FORBIDDEN, text),
    }
}

/// Any other path under `/mobilize/v1`: 404 `Not found.`.
pub(crate) async fn no_such_endpoint() -> Response {
    detail(StatusCode::NOT_FOUND, "Not found.")
}

/// The API, nested under `/mobilize/v1` (behind [`auth`] and the faults).
pub(super) fn routes() -> Router<FakesState> {
    Router::new().route(
        "/organizations/{organization_id}/people",
        get(listing::list),
    )
}

#[cfg(test)]
mod tests;
