//! `/van/v4/people/...`: canvass responses, a person's phones, a person.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use super::changes::{VanChangeKind, timestamp};
use super::wire::{Caller, VanError, VanErrorItem, invalid, known, parse};
use super::{
    Committee, SMS_CHANNEL, VanCanvassPhone, VanCanvassResponse, VanContactType, VanPerson,
    VanPhone, national,
};
use crate::destinations::FakesState;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CanvassBody {
    canvass_context: Option<CanvassContext>,
    result_code_id: Option<i64>,
    responses: Option<Vec<serde_json::Value>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CanvassContext {
    contact_type_id: Option<i64>,
    input_type_id: Option<i64>,
    date_canvassed: Option<String>,
    phone: Option<ContextPhone>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContextPhone {
    dialing_prefix: Option<String>,
    phone_number: Option<String>,
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_digit())
}

/// ISO 8601: a date, or a date and time with or without an offset.
fn is_date(s: &str) -> bool {
    chrono::DateTime::parse_from_rfc3339(s).is_ok()
        || chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f").is_ok()
        || chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
}

/// `POST /people/{vanId}/canvassResponses`: 204 when recorded.
pub(super) async fn canvass(
    State(fakes): State<FakesState>,
    Extension(caller): Extension<Caller>,
    Path(raw_id): Path<String>,
    body: Bytes,
) -> Result<StatusCode, VanError> {
    let body: CanvassBody = parse(&body)?;
    let mut van = fakes.van();
    let van_id = known(&van, &raw_id)?;
    let committee = &van.committees[caller.committee];
    let mut errors = Vec::new();
    let responses = body.responses.as_ref().map_or(0, Vec::len);
    check_result_or_responses(body.result_code_id, responses, &mut errors);
    let result_code = result_code(committee, body.result_code_id, &mut errors);
    let context = body.canvass_context.unwrap_or_default();
    let contact_type = contact_type(committee, context.contact_type_id, &mut errors);
    let phone = context_phone(&context, &mut errors);
    check_context(&context, contact_type.as_ref(), &mut errors);
    if !errors.is_empty() {
        return Err(VanError::invalid(errors));
    }
    let phone_key = phone.as_ref().map(|p| {
        (
            p.dialing_prefix.clone().unwrap_or_else(|| "1".into()),
            p.phone_number.clone(),
        )
    });
    let change = result_code.map(|result_code_id| VanChangeKind::CanvassResponse {
        contacts_contact_id: 0,
        result_code_id,
        contact_type_id: contact_type.as_ref().map(|t| t.contact_type_id),
        input_type_id: context.input_type_id,
        date_canvassed: context.date_canvassed.clone().unwrap_or_else(now),
    });
    let record = VanCanvassResponse {
        van_id,
        committee_id: committee.id,
        committee: committee.name.clone(),
        database_mode: caller.mode,
        result_code_id: result_code,
        contact_type_id: contact_type.map(|t| t.contact_type_id),
        input_type_id: context.input_type_id,
        phone,
        date_canvassed: context.date_canvassed,
        responses,
        at: now(),
    };
    van.canvass_responses.push(record);
    // Only a result code makes a contact history record; script responses are elsewhere.
    if let Some(mut change) = change {
        if let VanChangeKind::CanvassResponse {
            contacts_contact_id,
            ..
        } = &mut change
        {
            *contacts_contact_id = van.next_contacts_contact_id();
        }
        van.record_api_change(
            caller.committee,
            &caller.application,
            van_id,
            phone_key,
            change,
        );
    }
    Ok(StatusCode::NO_CONTENT)
}

/// A canvass response carries a result code or responses, never both.
fn check_result_or_responses(
    result_code_id: Option<i64>,
    responses: usize,
    errors: &mut Vec<VanErrorItem>,
) {
    match (result_code_id, responses) {
        (Some(_), n) if n > 0 => errors.push(invalid(
            &["resultCodeId", "responses"],
            "resultCodeId must be null when responses are specified",
        )),
        (None, 0) => errors.push(invalid(
            &["resultCodeId", "responses"],
            "Either resultCodeId or responses must be specified",
        )),
        _ => {}
    }
}

/// The committee's result code `id`, when given; an error when the committee has none such.
fn result_code(
    committee: &Committee,
    id: Option<i64>,
    errors: &mut Vec<VanErrorItem>,
) -> Option<u32> {
    let id = id?;
    let found = committee
        .result_codes
        .iter()
        .find(|r| i64::from(r.result_code_id) == id);
    if found.is_none() {
        errors.push(invalid(
            &["resultCodeId"],
            format!("{id} is not a valid Result Code in the current context"),
        ));
    }
    found.map(|r| r.result_code_id)
}

/// The committee's contact type `id`, when given; an error when the committee has none such.
fn contact_type(
    committee: &Committee,
    id: Option<i64>,
    errors: &mut Vec<VanErrorItem>,
) -> Option<VanContactType> {
    let id = id?;
    let found = committee
        .contact_types()
        .into_iter()
        .find(|t| i64::from(t.contact_type_id) == id);
    if found.is_none() {
        errors.push(invalid(
            &["canvassContext.contactTypeId"],
            format!("{id} is not a valid Contact Type in the current context"),
        ));
    }
    found
}

/// The phone of the canvass context, when given: its number and prefix must be digits.
fn context_phone(
    context: &CanvassContext,
    errors: &mut Vec<VanErrorItem>,
) -> Option<VanCanvassPhone> {
    let given = context.phone.as_ref()?;
    let phone = match given.phone_number.as_deref().filter(|n| is_digits(n)) {
        Some(number) => Some(VanCanvassPhone {
            dialing_prefix: given.dialing_prefix.clone(),
            phone_number: number.to_owned(),
        }),
        None => {
            errors.push(invalid(
                &["canvassContext.phone.phoneNumber"],
                "A phone number of digits is required",
            ));
            None
        }
    };
    if let Some(prefix) = given.dialing_prefix.as_deref().filter(|p| !is_digits(p)) {
        errors.push(invalid(
            &["canvassContext.phone.dialingPrefix"],
            format!("`{prefix}` is not a dialing prefix"),
        ));
    }
    phone
}

/// An SMS contact needs a phone, and the date canvassed must be a date.
fn check_context(
    context: &CanvassContext,
    contact_type: Option<&VanContactType>,
    errors: &mut Vec<VanErrorItem>,
) {
    if contact_type.is_some_and(|t| t.channel_type_name == SMS_CHANNEL) && context.phone.is_none() {
        errors.push(invalid(
            &["canvassContext.phone"],
            "A phone is required for a Contact Type of the SMS channel",
        ));
    }
    if let Some(date) = context.date_canvassed.as_deref().filter(|d| !is_date(d)) {
        errors.push(invalid(
            &["canvassContext.dateCanvassed"],
            format!("`{date}` is not an ISO 8601 date"),
        ));
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PersonBody {
    van_id: Option<serde_json::Value>,
    phones: Option<Vec<PhoneBody>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PhoneBody {
    phone_number: Option<String>,
    dialing_prefix: Option<String>,
    phone_type: Option<String>,
    phone_opt_in_status: Option<String>,
}

/// The documented phone types: home, work, cell, main, fax.
const PHONE_TYPES: [&str; 5] = ["H", "W", "C", "M", "F"];

/// The match response of an update.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MatchResponse {
    van_id: u64,
    status: &'static str,
}

/// `POST /people/{vanId}`: updates the person's phones (number, type, opt-in status).
pub(super) async fn update_person(
    State(fakes): State<FakesState>,
    Extension(caller): Extension<Caller>,
    Path(raw_id): Path<String>,
    body: Bytes,
) -> Result<Response, VanError> {
    let body: PersonBody = parse(&body)?;
    let mut van = fakes.van();
    let van_id = known(&van, &raw_id)?;
    let mut errors = Vec::new();
    check_van_id(body.van_id.as_ref(), van_id, &mut errors);
    let updates = phone_updates(body.phones.unwrap_or_default(), &mut errors);
    if !errors.is_empty() {
        return Err(VanError::invalid(errors));
    }
    let person = van
        .people
        .get_mut(&van_id)
        .ok_or_else(|| VanError::not_found(format!("Person {van_id} not found")))?;
    let changed = update_phones(person, updates);
    for (prefix, national, status) in changed {
        van.record_api_change(
            caller.committee,
            &caller.application,
            van_id,
            Some((prefix, national)),
            VanChangeKind::PhoneOptInStatus { status },
        );
    }
    Ok(Json(MatchResponse {
        van_id,
        status: "UpdatedExistingRecord",
    })
    .into_response())
}

/// A `vanId` in the body, when not null, must be the route's.
fn check_van_id(given: Option<&serde_json::Value>, van_id: u64, errors: &mut Vec<VanErrorItem>) {
    let Some(given) = given else {
        return;
    };
    let same = match given {
        serde_json::Value::Number(n) => n.as_u64() == Some(van_id),
        serde_json::Value::String(s) => s.parse::<u64>().ok() == Some(van_id),
        serde_json::Value::Null => true,
        _ => false,
    };
    if !same {
        errors.push(invalid(&["vanId"], "vanId must be the VAN ID of the route"));
    }
}

/// The phones of the body with a valid number (its digits), each with what it asks; an
/// error for each number, opt-in status or type that is not one.
fn phone_updates(
    phones: Vec<PhoneBody>,
    errors: &mut Vec<VanErrorItem>,
) -> Vec<(String, PhoneBody)> {
    let mut updates = Vec::new();
    for (i, phone) in phones.into_iter().enumerate() {
        let Some(number) = phone.phone_number.as_deref().and_then(phone_digits) else {
            errors.push(invalid(
                &[&format!("phones[{i}].phoneNumber")],
                "A valid phone number is required",
            ));
            continue;
        };
        if let Some(status) = phone
            .phone_opt_in_status
            .as_deref()
            .filter(|s| !matches!(*s, "I" | "O" | "U"))
        {
            errors.push(invalid(
                &[&format!("phones[{i}].phoneOptInStatus")],
                format!("`{status}` is not an opt-in status (I, O or U)"),
            ));
        }
        if let Some(kind) = phone
            .phone_type
            .as_deref()
            .filter(|t| !PHONE_TYPES.contains(t))
        {
            errors.push(invalid(
                &[&format!("phones[{i}].phoneType")],
                format!("`{kind}` is not a phone type (H, W, C, M or F)"),
            ));
        }
        updates.push((number, phone));
    }
    updates
}

/// The digits of a phone number written with separators, when it has 7 to 15 of them.
fn phone_digits(raw: &str) -> Option<String> {
    let digits = crate::destinations::numbers::without_separators(raw);
    (is_digits(&digits) && (7..=15).contains(&digits.len())).then_some(digits)
}

/// Sets the type and opt-in status of the person's phones the updates name, adding those
/// it does not have; returns the phones whose opt-in status changed (prefix, national
/// number, new status).
fn update_phones(
    person: &mut VanPerson,
    updates: Vec<(String, PhoneBody)>,
) -> Vec<(String, String, String)> {
    let mut changed = Vec::new();
    for (number, phone) in updates {
        // Without a prefix the number is under VAN's default, 1.
        let (prefix, national) = match &phone.dialing_prefix {
            Some(prefix) => (prefix.clone(), national(&number)),
            None => super::split_phone(&number),
        };
        let existing = person
            .phones
            .iter_mut()
            .find(|p| p.phone_number == national && p.dialing_prefix == prefix);
        let before = existing
            .as_ref()
            .and_then(|p| p.phone_opt_in_status.clone());
        if let Some(status) = phone
            .phone_opt_in_status
            .clone()
            .filter(|s| before.as_ref() != Some(s))
        {
            changed.push((prefix.clone(), national.clone(), status));
        }
        match existing {
            Some(p) => {
                if phone.phone_type.is_some() {
                    p.phone_type = phone.phone_type;
                }
                if phone.phone_opt_in_status.is_some() {
                    p.phone_opt_in_status = phone.phone_opt_in_status;
                }
            }
            None => person.phones.push(VanPhone {
                dialing_prefix: prefix,
                phone_number: national,
                phone_type: phone.phone_type,
                phone_opt_in_status: phone.phone_opt_in_status,
            }),
        }
    }
    changed
}

#[derive(Deserialize)]
pub(super) struct Expand {
    #[serde(rename = "$expand")]
    expand: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PersonAnswer {
    van_id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    phones: Option<Vec<VanPhone>>,
}

/// `GET /people/{vanId}`: the person, with phones when `$expand` names them.
pub(super) async fn person(
    State(fakes): State<FakesState>,
    Path(raw_id): Path<String>,
    Query(expand): Query<Expand>,
) -> Result<Json<PersonAnswer>, VanError> {
    let van = fakes.van();
    let van_id = known(&van, &raw_id)?;
    let with_phones = expand
        .expand
        .is_some_and(|e| e.split(',').any(|part| part.trim() == "phones"));
    let phones = van.people.get(&van_id).map(|p| p.phones.clone());
    Ok(Json(PersonAnswer {
        van_id,
        phones: phones.filter(|_| with_phones),
    }))
}

/// Now, as VAN's records write a time (RFC 3339, UTC, milliseconds).
fn now() -> String {
    timestamp(chrono::Utc::now())
}
