//! `/van/v4/changedEntityExportJobs...`, scoped to the caller's committee, errors in VAN's
//! body (`{"errors":[{"code","text","properties"}]}`). The wire, as VAN documents it:
//!
//! - `GET /changedEntityExportJobs/resources`: `["ContactHistory","Contacts"]`.
//! - `GET /changedEntityExportJobs/fields/{resourceType}`: `[{"fieldName":"PhoneOptInStatusID",
//!   "fieldType":"N","maxTextboxCharacters":null,"isCoreField":false,"availableValues":
//!   [{"id":1,"name":"Opt-In"},{"id":2,"name":"Unknown"},{"id":3,"name":"Opt-Out"}]}, ...]`
//!   (`catalog.rs` lists them); an unknown resource is 404 `NOT_FOUND`.
//! - `GET /changedEntityExportJobs/changeTypes/{resourceType}`: `[{"changeTypeId",
//!   "changeTypeName","description"}]`.
//! - `POST /changedEntityExportJobs` `{"dateChangedFrom":"2026-11-28T06:00:00Z",
//!   "dateChangedTo"?, "resourceType":"Contacts","requestedFields":["Phone",
//!   "PhoneOptInStatusID"],"excludeChangesFromSelf":true,"fileSizeKbLimit"?}`: 201 with the job
//!   object, `"jobStatus":"Pending"`. The window is `[from, to)`, `to` now by default; a
//!   `dateChangedFrom` older than 90 days, a `to` not after it or in the future, an unknown
//!   resource or field: 400 `INVALID_PARAMETER` naming the property.
//! - `GET /changedEntityExportJobs/{exportJobId}`: the job object `{"exportJobId","jobStatus"
//!   (Pending, InProcess, Complete, Error),"resourceType","dateChangedFrom","dateChangedTo",
//!   "requestedFields","excludeChangesFromSelf","fileSizeKbLimit","files":[{"downloadUrl",
//!   "dateExpired"}],"message","code","exportedRecordCount"}`, one poll further on; another
//!   committee's job or an unknown id is 404.
//!
//! The files and their columns: `files.rs` and `catalog.rs`.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use super::catalog::{CHANGE_TYPES, RESOURCES, field_answers};
use super::changes::Resource;
use super::export::{ExportJob, JobRequest, RETENTION_DAYS};
use super::wire::{Caller, VanError, VanErrorItem, invalid, parse};
use crate::destinations::FakesState;

/// `GET /changedEntityExportJobs/resources`.
pub(super) async fn resources() -> Json<[&'static str; 2]> {
    Json(RESOURCES)
}

fn unknown_resource(name: &str) -> VanError {
    VanError::not_found(format!("Resource type `{name}` is not available"))
}

/// `GET /changedEntityExportJobs/fields/{resourceType}`.
pub(super) async fn fields(Path(name): Path<String>) -> Result<Response, VanError> {
    let resource = Resource::named(&name).ok_or_else(|| unknown_resource(&name))?;
    Ok(Json(field_answers(resource)).into_response())
}

/// `GET /changedEntityExportJobs/changeTypes/{resourceType}`.
pub(super) async fn change_types(Path(name): Path<String>) -> Result<Json<Value>, VanError> {
    Resource::named(&name).ok_or_else(|| unknown_resource(&name))?;
    let types: Vec<Value> = CHANGE_TYPES
        .iter()
        .map(|(id, name, description)| {
            json!({"changeTypeId": id, "changeTypeName": name, "description": description})
        })
        .collect();
    Ok(Json(Value::Array(types)))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewJob {
    date_changed_from: Option<String>,
    date_changed_to: Option<String>,
    resource_type: Option<String>,
    requested_fields: Option<Vec<String>>,
    exclude_changes_from_self: Option<bool>,
    file_size_kb_limit: Option<u64>,
}

/// A VAN timestamp: RFC 3339 (`Z` or an offset); a date and time without an offset, or a
/// date alone, taken as UTC.
fn parse_time(raw: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(raw) {
        return Some(t.with_timezone(&Utc));
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S%.f") {
        return Some(t.and_utc());
    }
    NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

/// The window `[from, to)` of a request, or why not.
fn window(
    body: &NewJob,
    now: DateTime<Utc>,
    errors: &mut Vec<VanErrorItem>,
) -> (DateTime<Utc>, DateTime<Utc>) {
    let from = match body.date_changed_from.as_deref() {
        None => {
            errors.push(invalid(&["dateChangedFrom"], "dateChangedFrom is required"));
            None
        }
        Some(raw) => {
            let parsed = parse_time(raw);
            match parsed {
                None => errors.push(invalid(
                    &["dateChangedFrom"],
                    format!("`{raw}` is not a valid date"),
                )),
                Some(t) if t < now - Duration::days(RETENTION_DAYS) => errors.push(invalid(
                    &["dateChangedFrom"],
                    "dateChangedFrom must be within the last 90 days",
                )),
                Some(_) => {}
            }
            parsed
        }
    };
    let to = match body.date_changed_to.as_deref() {
        None => Some(now),
        Some(raw) => {
            let parsed = parse_time(raw);
            match (parsed, from) {
                (None, _) => errors.push(invalid(
                    &["dateChangedTo"],
                    format!("`{raw}` is not a valid date"),
                )),
                (Some(to), Some(from)) if to <= from => errors.push(invalid(
                    &["dateChangedTo"],
                    "dateChangedTo must be more recent than dateChangedFrom",
                )),
                (Some(to), _) if to > now + Duration::minutes(1) => errors.push(invalid(
                    &["dateChangedTo"],
                    "dateChangedTo must be no later than the present",
                )),
                _ => {}
            }
            parsed
        }
    };
    (from.unwrap_or(now), to.unwrap_or(now))
}

/// The resource of a request, or why not.
fn resource(body: &NewJob, errors: &mut Vec<VanErrorItem>) -> Option<Resource> {
    match body.resource_type.as_deref() {
        None => {
            errors.push(invalid(&["resourceType"], "resourceType is required"));
            None
        }
        Some(name) => {
            let found = Resource::named(name);
            if found.is_none() {
                errors.push(invalid(
                    &["resourceType"],
                    format!("`{name}` is not a valid resourceType"),
                ));
            }
            found
        }
    }
}

/// The requested fields by their canonical names; an error for each the resource lacks.
fn requested(
    body: &NewJob,
    resource: Resource,
    errors: &mut Vec<VanErrorItem>,
) -> Vec<&'static str> {
    let mut fields = Vec::new();
    for name in body.requested_fields.iter().flatten() {
        match resource
            .fields()
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
        {
            Some(f) => fields.push(f.name),
            None => errors.push(invalid(
                &["requestedFields"],
                format!(
                    "`{name}` is not a valid field for resourceType {}",
                    resource.name()
                ),
            )),
        }
    }
    fields
}

/// `POST /changedEntityExportJobs`: 201 with the job object.
pub(super) async fn create(
    State(fakes): State<FakesState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, VanError> {
    let body: NewJob = parse(&body)?;
    // To the millisecond, as the job answers it: the window used is the window shown.
    let now = super::changes::now_ms();
    let mut errors = Vec::new();
    let resource = resource(&body, &mut errors);
    let (from, to) = window(&body, now, &mut errors);
    let requested_fields = resource.map_or_else(Vec::new, |r| requested(&body, r, &mut errors));
    if body.file_size_kb_limit == Some(0) {
        errors.push(invalid(
            &["fileSizeKbLimit"],
            "fileSizeKbLimit must be positive",
        ));
    }
    let Some(resource) = resource.filter(|_| errors.is_empty()) else {
        return Err(VanError::invalid(errors));
    };
    let request = JobRequest {
        resource,
        requested_fields,
        from,
        to,
        exclude_self: body.exclude_changes_from_self.unwrap_or(false),
        file_size_kb_limit: body.file_size_kb_limit,
    };
    let mut van = fakes.van();
    let id = van.next_job_id();
    let committee = &van.committees[caller.committee];
    let job = ExportJob::new(
        id,
        caller.committee,
        request,
        (&committee.changes, &committee.seeds),
        committee.export.clone(),
    );
    let answer = job.answer("Pending", host(&headers));
    van.add_job(job);
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// The host the client called, for the download URLs.
fn host(headers: &HeaderMap) -> &str {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost")
}

/// `GET /changedEntityExportJobs/{exportJobId}`: the job, one poll further on.
pub(super) async fn status(
    State(fakes): State<FakesState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(raw): Path<String>,
) -> Result<Json<Value>, VanError> {
    let mut van = fakes.van();
    let job = raw
        .parse::<u64>()
        .ok()
        .and_then(|id| van.jobs.get_mut(&id))
        .filter(|job| job.committee == caller.committee)
        .ok_or_else(|| VanError::not_found(format!("Export job {raw} not found")))?;
    let status = job.poll();
    Ok(Json(job.answer(status, host(&headers))))
}
