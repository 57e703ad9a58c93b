//! `/v1/consent`: current consent, batch lookup, the change feed, and local changes.

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use bytes::Bytes;
use chrono::Utc;
use serde::{Deserialize, Serialize};

use super::auth::Actor;
use super::{AdminError, AdminState};
use crate::apply::{self, LocalChange, Recorded};
use crate::ingest::ErrorBody;
use crate::ledger::{self, ConsentRecord, LedgerEntry};
use crate::model::text::{bounded, id_schema};
use crate::model::{AccountId, Scope, id_problem, phone};

/// Most numbers in one lookup.
pub const MAX_LOOKUP: usize = 10_000;
/// Change feed page size when none is asked for, and the largest allowed.
pub const DEFAULT_CHANGES: i64 = 1_000;
pub const MAX_CHANGES: i64 = 10_000;
/// Longest `wait=` of the change feed, in seconds.
pub const MAX_WAIT_SECS: u64 = 60;

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct ByNumber {
    /// A phone number: E.164 (e.g. +15551234567), or as people write it (+1 (555) 123-4567;
    /// a national number is read as American) when it is a possible number.
    /// The pattern is [`phone::E164_PATTERN`] (a test keeps them equal).
    #[param(
        required = true,
        value_type = String,
        pattern = "^\\+[1-9][0-9]{1,14}$",
        example = "+15551234567"
    )]
    pub phone_number: Option<String>,
    #[param(schema_with = organization_schema)]
    pub organization_id: Option<String>,
    #[param(schema_with = account_schema)]
    pub account_id: Option<String>,
}

/// The account of one lead or message (`accountId`): the first served when none is named.
#[derive(Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct InAccount {
    #[param(schema_with = one_account_schema)]
    pub account_id: Option<String>,
}

/// `accountId` naming the one account a lead or message id is of.
fn one_account_schema() -> utoipa::openapi::schema::Object {
    let mut schema = id_schema();
    schema.description =
        Some("The account the id is of (the name of an [[account]]; default: the first)".into());
    schema
}

/// `accountId` of a query: an id ([`id_schema`]).
fn account_schema() -> utoipa::openapi::schema::Object {
    let mut schema = id_schema();
    schema.description = Some("Only this account (the name of an [[account]])".into());
    schema
}

/// `organizationId` of a query: an id ([`id_schema`]).
fn organization_schema() -> utoipa::openapi::schema::Object {
    let mut schema = id_schema();
    schema.description = Some("Only this organization".into());
    schema
}

impl ByNumber {
    /// `organizationId`, if given, checked as every id is ([`checked_id`]).
    pub fn organization(&self) -> Result<Option<&str>, AdminError> {
        checked_id("organizationId", self.organization_id.as_deref())
    }

    /// `accountId`, if given, checked as every id is. A filter, not a lookup: a name no
    /// account can have matches nothing, as a name no account served has.
    pub fn account(&self) -> Result<Option<AccountId>, AdminError> {
        Ok(checked_id("accountId", self.account_id.as_deref())?.map(AccountId::stored))
    }
}

/// An id given to the admin API (`field` names it: `organizationId`, `leadId`, ...), refused
/// with 400 when it breaks the rule of ids ([`id_problem`]: length, no control character).
pub fn checked_id<'a>(field: &str, id: Option<&'a str>) -> Result<Option<&'a str>, AdminError> {
    match id.and_then(|id| id_problem(field, id)) {
        Some(problem) => Err(AdminError::BadRequest(problem)),
        None => Ok(id),
    }
}

/// Most characters of a JSON decoder's message an error quotes (it quotes the body).
const DECODER_MESSAGE_CHARS: usize = 200;

/// The number of a query, as the ledger keeps it (`+1 (555) 000-1111` finds
/// `+15550001111`).
pub fn required_phone(phone: Option<String>) -> Result<String, AdminError> {
    let phone = phone.ok_or_else(|| AdminError::BadRequest("phoneNumber is required".into()))?;
    phone::canonical(&phone).map_err(|e| {
        AdminError::BadRequest(format!(
            "phoneNumber: {e} (an E.164 number is expected, e.g. +15551234567)"
        ))
    })
}

pub fn json_body<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, AdminError> {
    let body = body?;
    serde_json::from_slice(&body).map_err(|e| {
        AdminError::BadRequest(format!(
            "invalid body: {}",
            bounded(&e.to_string(), DECODER_MESSAGE_CHARS)
        ))
    })
}

#[utoipa::path(
    get,
    path = "/v1/consent",
    operation_id = "getConsent",
    summary = "Current consent of a number in each organization (empty items when unknown)",
    params(ByNumber),
    responses(
        (status = 200, description = "success", body = ledger::CurrentConsent),
        (status = 400, description = "invalid parameters or body", body = ErrorBody),
    )
)]
pub async fn current(
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ByNumber>, QueryRejection>,
) -> Result<Json<ledger::CurrentConsent>, AdminError> {
    let Query(query) = query?;
    let account = query.account()?;
    let scope = Scope::organization(query.organization()?).in_account(account.as_ref());
    let phone = required_phone(query.phone_number.clone())?;
    let current = ledger::current_with_suppression(&state.pool, &phone, scope).await?;
    Ok(Json(current))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LookupRequest {
    /// Numbers as `phoneNumber` takes them, up to 10,000 (413 past it).
    #[schema(schema_with = phone_list_schema)]
    phone_numbers: Vec<String>,
    /// Only this organization (null: every one).
    #[serde(default)]
    #[schema(schema_with = nullable_id_schema)]
    organization_id: Option<String>,
}

/// The numbers of a lookup: at most [`MAX_LOOKUP`].
fn phone_list_schema() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(phone::schema())
        .max_items(Some(MAX_LOOKUP))
        .build()
}

/// An id, or null.
fn nullable_id_schema() -> utoipa::openapi::schema::Object {
    let mut schema = id_schema();
    schema.schema_type = utoipa::openapi::schema::SchemaType::from_iter([
        utoipa::openapi::schema::Type::String,
        utoipa::openapi::schema::Type::Null,
    ]);
    schema
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct LookupResult {
    /// Records of the numbers known, in request order, organizations sorted.
    items: Vec<ConsentRecord>,
    /// Numbers with no consent record.
    unknown: Vec<String>,
}

#[utoipa::path(
    post,
    path = "/v1/consent/lookup",
    operation_id = "lookupConsent",
    summary = "Current consent of up to 10,000 numbers",
    request_body = LookupRequest,
    responses(
        (status = 200, description = "success", body = LookupResult),
        (status = 400, description = "invalid parameters or body", body = ErrorBody),
        (status = 413, description = "body or batch too large", body = ErrorBody),
    )
)]
pub async fn lookup(
    State(state): State<Arc<AdminState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<LookupResult>, AdminError> {
    let request: LookupRequest = json_body(body)?;
    let organization = checked_id("organizationId", request.organization_id.as_deref())?;
    if request.phone_numbers.len() > MAX_LOOKUP {
        return Err(AdminError::TooLarge(format!(
            "at most {MAX_LOOKUP} phoneNumbers per lookup"
        )));
    }
    // Each number as asked and as the ledger keeps it.
    let mut asked = Vec::with_capacity(request.phone_numbers.len());
    for (i, given) in request.phone_numbers.iter().enumerate() {
        let kept = phone::canonical(given)
            .map_err(|e| AdminError::BadRequest(format!("phoneNumbers[{i}]: {e}")))?;
        asked.push((given.as_str(), kept));
    }
    let mut seen = HashSet::with_capacity(asked.len());
    let phones: Vec<&str> = asked
        .iter()
        .map(|(_, kept)| kept.as_str())
        .filter(|p| seen.insert(*p))
        .collect();
    let items = ledger::lookup(&state.pool, &phones, organization).await?;
    let known: HashSet<&str> = items.iter().map(|r| r.phone_number.as_str()).collect();
    let mut seen = HashSet::with_capacity(asked.len());
    let unknown = asked
        .iter()
        .filter(|(given, kept)| !known.contains(kept.as_str()) && seen.insert(*given))
        .map(|(given, _)| (*given).to_owned())
        .collect();
    Ok(Json(LookupResult { items, unknown }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ChangesQuery {
    /// Last seq seen (default 0: from the start).
    after: Option<i64>,
    /// Entries per page, 1..=10000 (default 1000).
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<i64>,
    /// When nothing is newer than `after`, answer as soon as something is, or empty after
    /// this many seconds (0..=60, default 0).
    #[param(minimum = 0, maximum = 60)]
    wait: Option<u64>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ChangePage {
    items: Vec<LedgerEntry>,
    /// Pass as `after` for the next page (unchanged when the page is empty).
    next: i64,
}

#[utoipa::path(
    get,
    path = "/v1/consent/changes",
    operation_id = "consentChanges",
    summary = "The ledger as a change feed: entries after `after`, in seq order",
    params(ChangesQuery),
    responses(
        (status = 200, description = "success", body = ChangePage),
        (status = 400, description = "invalid parameters or body", body = ErrorBody),
    )
)]
pub async fn changes(
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ChangesQuery>, QueryRejection>,
) -> Result<Json<ChangePage>, AdminError> {
    let Query(query) = query?;
    let after = query.after.unwrap_or(0);
    let limit = query.limit.unwrap_or(DEFAULT_CHANGES);
    if !(1..=MAX_CHANGES).contains(&limit) {
        return Err(AdminError::BadRequest(format!(
            "limit must be between 1 and {MAX_CHANGES}"
        )));
    }
    // Seqs become visible in seq order on either backend (SQLite: one writer at a time;
    // PostgreSQL: appenders hold the ledger head until they commit), so reading
    // `seq > after` never skips an entry that commits later with a smaller seq.
    let wait = query.wait.unwrap_or(0);
    if wait > MAX_WAIT_SECS {
        return Err(AdminError::BadRequest(format!(
            "wait must be between 0 and {MAX_WAIT_SECS} seconds"
        )));
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(wait);
    // Taken before the first read, so that an entry committed after it ends the wait.
    let mut follower = crate::signal::Follower::new();
    let mut items = ledger::changes(&state.pool, after, limit).await?;
    let _waiting = (items.is_empty() && wait > 0).then(|| state.metrics.change_feed_wait());
    while items.is_empty() {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            break;
        }
        tokio::select! {
            _ = state.stop.cancelled() => break,
            _ = follower.wait(left.min(crate::signal::FALLBACK_POLL)) => {}
        }
        items = ledger::changes(&state.pool, after, limit).await?;
    }
    let next = items.last().map_or(after, |e| e.seq);
    Ok(Json(ChangePage { items, next }))
}

#[derive(Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = LocalChange)]
pub struct LocalChangeBody {
    #[schema(schema_with = phone::schema)]
    phone_number: String,
    #[schema(schema_with = required_id_schema)]
    organization_id: String,
    opted_out: bool,
    /// An opt-out's tag (not with `optedOut: false`).
    #[serde(default)]
    #[schema(schema_with = nullable_id_schema)]
    tag_id: Option<String>,
    #[serde(default)]
    #[schema(max_length = 500)]
    reason: Option<String>,
    /// The account it is made in (default: the first account served).
    #[serde(default)]
    #[schema(schema_with = nullable_id_schema)]
    account_id: Option<String>,
}

/// `LocalChange` of the document with the rule its fields cannot say alone: a `tagId` goes
/// with an opt-out only (`optedOut: true`), else it is absent or null.
pub(super) fn tag_only_with_an_opt_out(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::schema::{AllOfBuilder, AnyOfBuilder, ObjectBuilder, Schema, Type};
    let Some(schemas) = document.components.as_mut().map(|c| &mut c.schemas) else {
        return;
    };
    let Some(fields) = schemas.remove("LocalChange") else {
        return;
    };
    let opt_out = ObjectBuilder::new().property(
        "optedOut",
        ObjectBuilder::new()
            .schema_type(Type::Boolean)
            .enum_values(Some([true])),
    );
    let no_tag =
        ObjectBuilder::new().property("tagId", ObjectBuilder::new().schema_type(Type::Null));
    let rule = AnyOfBuilder::new().item(opt_out).item(no_tag);
    let schema = AllOfBuilder::new().item(fields).item(rule).build();
    schemas.insert("LocalChange".into(), Schema::AllOf(schema).into());
}

/// An id that must hold something besides white space.
fn required_id_schema() -> utoipa::openapi::schema::Object {
    let mut schema = id_schema();
    schema.min_length = Some(1);
    schema.pattern = Some(crate::model::text::SAFE_NONBLANK_PATTERN.into());
    schema
}

#[utoipa::path(
    post,
    path = "/v1/consent",
    operation_id = "recordConsentChange",
    summary = "Record a local consent change and queue it for the service",
    request_body = LocalChangeBody,
    responses(
        (status = 202, description = "success", body = Recorded),
        (status = 400, description = "invalid parameters or body", body = ErrorBody),
        (status = 404, description = "no such account is served (accountId)", body = ErrorBody),
        (status = 413, description = "body or batch too large", body = ErrorBody),
    )
)]
pub async fn record(
    State(state): State<Arc<AdminState>>,
    Extension(actor): Extension<Actor>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<Recorded>), AdminError> {
    let body: LocalChangeBody = json_body(body)?;
    let change = LocalChange {
        account: state.account(body.account_id.as_deref())?,
        organization_id: body.organization_id,
        phone_number: body.phone_number,
        opted_out: body.opted_out,
        tag_id: body.tag_id,
        reason: body.reason,
        actor: actor.0,
    };
    let recorded = apply::record_local(&state.pool, &change, Utc::now()).await?;
    crate::pusher::wake_all(&state.wake);
    Ok((StatusCode::ACCEPTED, Json(recorded)))
}
