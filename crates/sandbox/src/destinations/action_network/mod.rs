//! `/actionnetwork/api/v2`: the `OSDI-API-Token` header, the person signup helper
//! (`POST /people`), which matches a person by phone number (then email) or creates one,
//! and answers the OSDI person resource, and the people collection (`GET /people`, paged and
//! filtered: `listing.rs`). Errors are `{"error":"..."}`. Its controls: `control.rs`.

use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::{SecondsFormat, Utc};
use rand::Rng as _;
use serde::{Deserialize, Serialize};

use super::numbers::digits;
use serde_json::{Value, json};

use super::FakesState;
use super::faults::FakeRequestCounts;

mod control;
mod listing;

pub(super) use control::routes as control_routes;

/// The header that carries the key.
const TOKEN_HEADER: &str = "OSDI-API-Token";

const SUBSCRIBED: &str = "subscribed";
const UNSUBSCRIBED: &str = "unsubscribed";

/// An error answer: `{"error":"..."}`.
pub(crate) fn error(status: StatusCode, text: impl Into<String>) -> Response {
    (status, Json(json!({ "error": text.into() }))).into_response()
}

/// A phone number of a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionNetworkPhone {
    pub primary: bool,
    /// Digits, country code first (`12025550143`).
    pub number: String,
    pub number_type: String,
    /// `subscribed` or `unsubscribed`.
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionNetworkEmail {
    pub primary: bool,
    pub address: String,
    pub status: String,
}

/// A person as Action Network holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionNetworkPerson {
    /// `action_network:<uuid>`.
    pub identifier: String,
    pub given_name: Option<String>,
    pub family_name: Option<String>,
    pub phone_numbers: Vec<ActionNetworkPhone>,
    pub email_addresses: Vec<ActionNetworkEmail>,
    pub created_date: String,
    pub modified_date: String,
}

/// One signup helper request that succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionNetworkSignup {
    pub identifier: String,
    /// The numbers of the request, as stored, with the status each was given.
    pub phone_numbers: Vec<ActionNetworkPhone>,
    /// A person was made (no one had the number or the email).
    pub created: bool,
    pub at: String,
}

/// Everything the Action Network fake holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionNetworkTruth {
    pub people: Vec<ActionNetworkPerson>,
    pub signups: Vec<ActionNetworkSignup>,
    pub requests: FakeRequestCounts,
    /// The fault of `GET /people` whose `next` never ends.
    pub endless_next: bool,
}

pub(crate) struct ActionNetwork {
    key: String,
    people: Vec<ActionNetworkPerson>,
    signups: Vec<ActionNetworkSignup>,
    /// Fault: every page of `GET /people` has a `next` link, past the last person.
    endless_next: bool,
    /// Hostile: the first page's `next` link is this text, as given (a relative link to
    /// another host, a foreign URL).
    next_href: Option<String>,
}

impl ActionNetwork {
    pub(crate) fn new(key: String) -> Self {
        Self {
            key,
            people: Vec::new(),
            signups: Vec::new(),
            endless_next: false,
            next_href: None,
        }
    }

    pub(crate) fn truth(&self, requests: FakeRequestCounts) -> ActionNetworkTruth {
        ActionNetworkTruth {
            people: self.people.clone(),
            signups: self.signups.clone(),
            requests,
            endless_next: self.endless_next,
        }
    }
}

/// The key must be the configured one.
pub(crate) async fn auth(
    State(fakes): State<FakesState>,
    request: Request,
    next: Next,
) -> Response {
    let accepted = {
        let an = fakes.action_network();
        token_matches(request.headers(), &an.key)
    };
    if accepted {
        next.run(request).await
    } else {
        error(StatusCode::UNAUTHORIZED, "API Key invalid or not present")
    }
}

fn token_matches(headers: &HeaderMap, key: &str) -> bool {
    headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|given| !key.is_empty() && given == key)
}

pub(crate) async fn no_such_endpoint() -> Response {
    error(StatusCode::NOT_FOUND, "Not found")
}

pub(super) fn routes() -> Router<FakesState> {
    Router::new()
        .route("/people", post(signup).get(listing::list))
        .route("/people/", post(signup))
        .route("/people/{id}", get(person))
}

#[derive(Deserialize)]
struct SignupBody {
    person: Option<PersonBody>,
}

#[derive(Deserialize, Default)]
struct PersonBody {
    given_name: Option<String>,
    family_name: Option<String>,
    #[serde(default)]
    phone_numbers: Vec<PhoneBody>,
    #[serde(default)]
    email_addresses: Vec<EmailBody>,
}

#[derive(Deserialize)]
struct PhoneBody {
    number: Option<String>,
    number_type: Option<String>,
    status: Option<String>,
}

#[derive(Deserialize)]
struct EmailBody {
    address: Option<String>,
    status: Option<String>,
}

fn valid_status(status: Option<&str>) -> bool {
    status.is_none_or(|s| s == SUBSCRIBED || s == UNSUBSCRIBED)
}

fn new_identifier() -> String {
    let mut b = [0u8; 16];
    rand::thread_rng().fill(&mut b[..]);
    // A version 4 UUID.
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "action_network:{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `POST /people`: the person signup helper.
async fn signup(
    State(fakes): State<FakesState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, BadRequest> {
    let person = signup_person(&body)?;
    let contacts = Contacts::of(&person)?;
    let mut an = fakes.action_network();
    let at = now();
    let (index, created) = an.match_or_create(&contacts, &at);
    let record = &mut an.people[index];
    if person.given_name.is_some() {
        record.given_name.clone_from(&person.given_name);
    }
    if person.family_name.is_some() {
        record.family_name.clone_from(&person.family_name);
    }
    let sent = update_phones(record, contacts.phones);
    update_emails(record, contacts.emails);
    record.modified_date.clone_from(&at);
    let resource = resource(record, &headers);
    let identifier = record.identifier.clone();
    an.signups.push(ActionNetworkSignup {
        identifier,
        phone_numbers: sent,
        created,
        at,
    });
    Ok((StatusCode::OK, Json(resource)).into_response())
}

/// A signup refused: 400, with the reason.
struct BadRequest(String);

impl IntoResponse for BadRequest {
    fn into_response(self) -> Response {
        error(StatusCode::BAD_REQUEST, self.0)
    }
}

/// The person of a signup's body.
fn signup_person(body: &[u8]) -> Result<PersonBody, BadRequest> {
    let body: SignupBody = serde_json::from_slice(body)
        .map_err(|e| BadRequest(format!("JSON could not be parsed: {e}")))?;
    body.person
        .ok_or_else(|| BadRequest("A person is required".into()))
}

/// The numbers and addresses of a signup, as stored, each with what the request says of it.
struct Contacts<'a> {
    phones: Vec<(String, &'a PhoneBody)>,
    emails: Vec<(String, &'a EmailBody)>,
}

impl<'a> Contacts<'a> {
    /// The person's numbers and addresses: an invalid number or status is refused, an
    /// entry without a number or an address skipped; at least one must remain.
    fn of(person: &'a PersonBody) -> Result<Self, BadRequest> {
        let mut phones = Vec::new();
        for phone in &person.phone_numbers {
            let Some(raw) = phone.number.as_deref() else {
                continue;
            };
            let number = digits(raw)
                .ok_or_else(|| BadRequest(format!("`{raw}` is not a valid phone number")))?;
            if !valid_status(phone.status.as_deref()) {
                return Err(BadRequest(
                    "A phone number's status must be subscribed or unsubscribed".into(),
                ));
            }
            phones.push((number, phone));
        }
        let mut emails = Vec::new();
        for email in &person.email_addresses {
            let Some(address) = email.address.as_deref().filter(|a| a.contains('@')) else {
                continue;
            };
            if !valid_status(email.status.as_deref()) {
                return Err(BadRequest(
                    "An email address's status must be subscribed or unsubscribed".into(),
                ));
            }
            emails.push((address.to_ascii_lowercase(), email));
        }
        if phones.is_empty() && emails.is_empty() {
            return Err(BadRequest(
                "A valid email address or phone number is required".into(),
            ));
        }
        Ok(Self { phones, emails })
    }
}

impl ActionNetwork {
    /// The index of the person who has one of the numbers (else one of the addresses), or
    /// of a new person made `at`; and whether it was made.
    fn match_or_create(&mut self, contacts: &Contacts<'_>, at: &str) -> (usize, bool) {
        let by_phone = self.people.iter().position(|p| {
            contacts
                .phones
                .iter()
                .any(|(n, _)| p.phone_numbers.iter().any(|q| &q.number == n))
        });
        let matched = by_phone.or_else(|| {
            self.people.iter().position(|p| {
                contacts
                    .emails
                    .iter()
                    .any(|(a, _)| p.email_addresses.iter().any(|e| &e.address == a))
            })
        });
        if let Some(index) = matched {
            return (index, false);
        }
        self.people.push(ActionNetworkPerson {
            identifier: new_identifier(),
            given_name: None,
            family_name: None,
            phone_numbers: Vec::new(),
            email_addresses: Vec::new(),
            created_date: at.to_owned(),
            modified_date: at.to_owned(),
        });
        (self.people.len() - 1, true)
    }
}

/// Adds the numbers the person lacks and sets the type and status the request gives;
/// returns the numbers as stored.
fn update_phones(
    person: &mut ActionNetworkPerson,
    phones: Vec<(String, &PhoneBody)>,
) -> Vec<ActionNetworkPhone> {
    let mut sent = Vec::new();
    for (number, phone) in phones {
        let first = person.phone_numbers.is_empty();
        let slot = match person.phone_numbers.iter().position(|q| q.number == number) {
            Some(i) => i,
            None => {
                // A number nobody subscribed is not on the SMS list until it says so.
                person.phone_numbers.push(ActionNetworkPhone {
                    primary: first,
                    number: number.clone(),
                    number_type: "Mobile".into(),
                    status: UNSUBSCRIBED.into(),
                });
                person.phone_numbers.len() - 1
            }
        };
        let stored = &mut person.phone_numbers[slot];
        if let Some(kind) = &phone.number_type {
            stored.number_type.clone_from(kind);
        }
        if let Some(status) = &phone.status {
            stored.status.clone_from(status);
        }
        sent.push(stored.clone());
    }
    sent
}

/// Adds the addresses the person lacks (subscribed unless the request says otherwise) and
/// sets the status the request gives to those it has.
fn update_emails(person: &mut ActionNetworkPerson, emails: Vec<(String, &EmailBody)>) {
    for (address, email) in emails {
        let first = person.email_addresses.is_empty();
        match person
            .email_addresses
            .iter_mut()
            .find(|e| e.address == address)
        {
            Some(stored) => {
                if let Some(status) = &email.status {
                    stored.status.clone_from(status);
                }
            }
            None => person.email_addresses.push(ActionNetworkEmail {
                primary: first,
                address,
                status: email.status.clone().unwrap_or_else(|| SUBSCRIBED.into()),
            }),
        }
    }
}

/// `GET /`: the API entry point, the links to the group's collections (the key is checked
/// before, as for every endpoint).
pub(super) async fn entry_point(headers: HeaderMap) -> Response {
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let root = format!("http://{host}/actionnetwork/api/v2");
    Json(serde_json::json!({
        "motd": "Welcome to the Action Network OSDI API v2 Entry Point!",
        "max_page_size": 25,
        "_links": {
            "self": {"href": format!("{root}/")},
            "osdi:people": {"href": format!("{root}/people")},
            "osdi:person_signup_helper": {"href": format!("{root}/people")},
        },
    }))
    .into_response()
}

/// `GET /people/{uuid}`.
async fn person(
    State(fakes): State<FakesState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let an = fakes.action_network();
    let wanted = format!("action_network:{id}");
    match an.people.iter().find(|p| p.identifier == wanted) {
        Some(p) => Json(resource(p, &headers)).into_response(),
        None => error(StatusCode::NOT_FOUND, "Not found"),
    }
}

/// The OSDI person resource, its links on the host the client called.
fn resource(person: &ActionNetworkPerson, headers: &HeaderMap) -> Value {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let base = format!("http://{host}/actionnetwork/api/v2");
    let uuid = person
        .identifier
        .strip_prefix("action_network:")
        .unwrap_or(&person.identifier);
    let link = |rest: &str| json!({ "href": format!("{base}/people/{uuid}{rest}") });
    json!({
        "identifiers": [person.identifier],
        "created_date": person.created_date,
        "modified_date": person.modified_date,
        "given_name": person.given_name,
        "family_name": person.family_name,
        "email_addresses": person.email_addresses,
        "phone_numbers": person.phone_numbers,
        "postal_addresses": [],
        "languages_spoken": ["en"],
        "custom_fields": {},
        "_links": {
            "self": link(""),
            "osdi:attendances": link("/attendances"),
            "osdi:signatures": link("/signatures"),
            "osdi:submissions": link("/submissions"),
            "osdi:donations": link("/donations"),
            "osdi:outreaches": link("/outreaches"),
            "osdi:taggings": link("/taggings"),
            "curies": [
                { "name": "osdi", "href": format!("{base}/docs/v2/{{rel}}"), "templated": true },
                { "name": "action_network", "href": format!("{base}/docs/v2/{{rel}}"), "templated": true }
            ]
        }
    })
}
