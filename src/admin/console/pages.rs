//! The console's pages and forms.

use std::sync::Arc;
use std::time::Duration;

use askama::Template;
use axum::Form;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{AppendHeaders, IntoResponse, Redirect, Response};
use chrono::{DurationRound as _, SecondsFormat, Utc};
use serde::Deserialize;

use super::session::{self, Session};
use super::views::{self, Chart, TimelineEntry, query_value};
use super::{ConsoleError, Frame, render};
use crate::admin::AdminState;
use crate::apply::{self, LocalChange, LocalError};
use crate::client::validate;
use crate::ledger::{self, ConsentRecord, Status, StoredEvent};
use crate::model::Requeue;

/// Longest wait for a replayed delivery to be applied before the page answers.
const REPLAY_SETTLE: Duration = Duration::from_secs(5);
/// A wrong token is answered this late, to slow down guessing.
const SIGNIN_FAILURE_DELAY: Duration = Duration::from_millis(500);
/// Quarantined deliveries listed, newest first.
const QUARANTINE_LISTED: i64 = 500;
/// Said on the sign-in page of a daemon without tokens.
const NO_TOKENS: &str =
    "No admin token is configured (admin.tokens or admin.tokens_file), so no one can sign in yet.";
/// Longest reason kept with a local change.
const MAX_REASON_CHARS: usize = 500;

impl From<FormRejection> for ConsoleError {
    fn from(rejection: FormRejection) -> Self {
        ConsoleError::BadRequest(rejection.body_text())
    }
}

impl From<QueryRejection> for ConsoleError {
    fn from(rejection: QueryRejection) -> Self {
        ConsoleError::BadRequest(rejection.body_text())
    }
}

/// An optional text field: absent and blank alike are `None`.
fn given(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// `/?phoneNumber=…`: the lookup page of a number.
fn lookup_href(phone: &str, organization: Option<&str>) -> String {
    let mut href = format!("/?phoneNumber={}", query_value(phone));
    if let Some(organization) = organization {
        href.push_str(&format!("&organizationId={}", query_value(organization)));
    }
    href
}

// --- Look up a number ---

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LookupQuery {
    phone_number: Option<String>,
    organization_id: Option<String>,
    /// Set by the change form: the seq of the change just recorded.
    recorded: Option<i64>,
    /// With `recorded`: whether it became the current state.
    current: Option<bool>,
}

/// A current consent state, with its change link.
pub struct CurrentRow {
    pub record: ConsentRecord,
    pub ago: String,
    pub change_href: String,
}

/// What the ledger holds of the number looked up.
pub struct Found {
    pub current: Vec<CurrentRow>,
    pub timeline: Vec<TimelineEntry>,
    pub evidence_href: String,
    pub chain_head_seq: i64,
}

#[derive(Template)]
#[template(path = "console/lookup.html")]
struct LookupPage {
    frame: Frame,
    phone: String,
    organization: String,
    error: Option<String>,
    notice: Option<String>,
    /// A number was looked up (`found` is `None` when the ledger does not know it).
    searched: bool,
    found: Option<Found>,
}

pub async fn lookup(
    session: Session,
    State(state): State<Arc<AdminState>>,
    query: Result<Query<LookupQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let phone = given(query.phone_number).unwrap_or_default();
    let organization = given(query.organization_id);
    let mut page = LookupPage {
        frame: Frame::of(&session, "lookup"),
        phone: phone.clone(),
        organization: organization.clone().unwrap_or_default(),
        error: None,
        notice: query.recorded.map(|seq| match query.current {
            Some(false) => format!(
                "Recorded as ledger entry #{seq}. A newer event was already in place, so the current state did not change."
            ),
            _ => format!("Recorded as ledger entry #{seq}; it is being sent to the service."),
        }),
        searched: false,
        found: None,
    };
    if phone.is_empty() {
        return Ok(render(StatusCode::OK, &page));
    }
    if !validate::is_e164(&phone) {
        page.error = Some(format!(
            "{phone} is not a number in E.164 form: a +, the country code and the number, with no spaces (e.g. +15551234567)."
        ));
        return Ok(render(StatusCode::BAD_REQUEST, &page));
    }
    page.searched = true;
    let now = Utc::now();
    let current = ledger::current(&state.pool, &phone, organization.as_deref()).await?;
    let bundle = crate::evidence::bundle(&state.pool, &phone, organization.as_deref(), now).await?;
    page.found = bundle.map(|bundle| Found {
        current: current
            .into_iter()
            .map(|record| CurrentRow {
                ago: views::ago(&record.changed_at, now),
                change_href: format!(
                    "/change?phoneNumber={}&organizationId={}&optedOut={}",
                    query_value(&record.phone_number),
                    query_value(&record.organization_id),
                    !record.opted_out
                ),
                record,
            })
            .collect(),
        evidence_href: format!(
            "/evidence?{}",
            lookup_href(&phone, organization.as_deref()).trim_start_matches("/?")
        ),
        chain_head_seq: bundle.chain_head.seq,
        timeline: bundle.items.into_iter().map(TimelineEntry::from).collect(),
    });
    Ok(render(StatusCode::OK, &page))
}

/// The evidence bundle of a number, as a file.
pub async fn evidence(
    _session: Session,
    State(state): State<Arc<AdminState>>,
    query: Result<Query<LookupQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let phone = given(query.phone_number)
        .filter(|p| validate::is_e164(p))
        .ok_or_else(|| ConsoleError::BadRequest("phoneNumber must be an E.164 number".into()))?;
    let organization = given(query.organization_id);
    let bundle = crate::evidence::bundle(&state.pool, &phone, organization.as_deref(), Utc::now())
        .await?
        .ok_or_else(|| ConsoleError::NotFound(format!("The ledger has no entry for {phone}.")))?;
    let json = serde_json::to_vec_pretty(&bundle)
        .map_err(|e| ConsoleError::BadRequest(format!("cannot encode the bundle: {e}")))?;
    let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
    let disposition = format!("attachment; filename=\"evidence-{digits}.json\"");
    Ok((
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        json,
    )
        .into_response())
}

// --- Status ---

/// A subscriber's row.
pub struct SubscriberRow {
    pub view: crate::model::SubscriberView,
    pub lag: String,
}

#[derive(Template)]
#[template(path = "console/status.html")]
struct StatusPage {
    frame: Frame,
    status: Status,
    /// Age of the oldest unapplied delivery.
    apply_lag: String,
    subscribers: Vec<SubscriberRow>,
    chart: Chart,
    generated_at: String,
}

pub async fn status(
    session: Session,
    State(state): State<Arc<AdminState>>,
) -> Result<Response, ConsoleError> {
    let now = Utc::now();
    let mut status = ledger::status(&state.pool).await?;
    let subscribers = crate::subscribers::views(&state.pool, &state.subscribers).await?;
    status.subscribers = Vec::new();
    // From the start of the chart's first minute.
    let since = now - chrono::Duration::minutes(views::CHART_MINUTES - 1);
    let since = since
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap_or(since);
    let rows = ledger::deliveries_per_minute(&state.pool, since).await?;
    let apply_lag = match &status.oldest_pending_at {
        None => "none: nothing is waiting".to_owned(),
        Some(oldest) => chrono::DateTime::parse_from_rfc3339(oldest)
            .map(|t| views::duration((now - t.to_utc()).as_seconds_f64().max(0.0)))
            .unwrap_or_else(|_| oldest.clone()),
    };
    let page = StatusPage {
        frame: Frame::of(&session, "status"),
        apply_lag,
        subscribers: subscribers
            .into_iter()
            .map(|view| SubscriberRow {
                lag: views::duration(view.lag_seconds),
                view,
            })
            .collect(),
        chart: Chart::new(&rows, now),
        generated_at: now.to_rfc3339_opts(SecondsFormat::Secs, true),
        status,
    };
    Ok(render(StatusCode::OK, &page))
}

// --- Quarantine ---

#[derive(Deserialize)]
pub struct QuarantineQuery {
    replayed: Option<i64>,
    outcome: Option<String>,
}

#[derive(Template)]
#[template(path = "console/quarantine.html")]
struct QuarantinePage {
    frame: Frame,
    rows: Vec<StoredEvent>,
    notice: Option<String>,
}

pub async fn quarantine(
    session: Session,
    State(state): State<Arc<AdminState>>,
    query: Result<Query<QuarantineQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let rows = ledger::events(&state.pool, true, QUARANTINE_LISTED).await?;
    let notice = query.replayed.map(|id| match query.outcome.as_deref() {
        Some("applied") => format!("Delivery #{id} was replayed and applied."),
        Some("quarantined") => format!(
            "Delivery #{id} was replayed and failed again; it is back in quarantine with its new reason."
        ),
        Some("gone") => format!("Delivery #{id} is no longer quarantined; nothing was replayed."),
        _ => format!("Delivery #{id} was put back in the queue; a worker is applying it."),
    });
    let page = QuarantinePage {
        frame: Frame::of(&session, "quarantine"),
        rows,
        notice,
    };
    Ok(render(StatusCode::OK, &page))
}

#[derive(Deserialize)]
pub struct CsrfForm {
    csrf: Option<String>,
}

pub async fn replay(
    session: Session,
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    session.check_form(&headers, form.csrf.as_deref())?;
    let before = crate::worker::states(&state.pool, &[id]).await?;
    if before.quarantined == 0 {
        return Ok(
            Redirect::to(&format!("/quarantine?replayed={id}&outcome=gone")).into_response(),
        );
    }
    let requeued = crate::worker::requeue(&state.pool, Requeue::Id(id)).await?;
    tracing::info!(outbox_id = id, actor = %session.actor, "quarantined delivery replayed from the console");
    if let Some(outbox) = &state.outbox {
        outbox.set_pending(outbox.pending() + requeued.len() as u64);
        outbox.committed.notify_one();
    }
    // The worker (this replica's or another's) takes it at once; the page tells how it went.
    let deadline = tokio::time::Instant::now() + REPLAY_SETTLE;
    let outcome = loop {
        let states = crate::worker::states(&state.pool, &[id]).await?;
        if states.applied > 0 {
            break "applied";
        }
        if states.quarantined > 0 {
            break "quarantined";
        }
        if tokio::time::Instant::now() >= deadline {
            break "pending";
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    Ok(Redirect::to(&format!("/quarantine?replayed={id}&outcome={outcome}")).into_response())
}

// --- A local change ---

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeQuery {
    phone_number: Option<String>,
    organization_id: Option<String>,
    opted_out: Option<bool>,
}

#[derive(Template)]
#[template(path = "console/change.html")]
struct ChangePage {
    frame: Frame,
    phone: String,
    organization: String,
    opted_out: bool,
    reason: String,
    error: Option<String>,
    /// The field the error is about, to point at it.
    error_field: &'static str,
}

pub async fn change_form(
    session: Session,
    query: Result<Query<ChangeQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let page = ChangePage {
        frame: Frame::of(&session, "change"),
        phone: given(query.phone_number).unwrap_or_default(),
        organization: given(query.organization_id).unwrap_or_default(),
        opted_out: query.opted_out.unwrap_or(true),
        reason: String::new(),
        error: None,
        error_field: "",
    };
    Ok(render(StatusCode::OK, &page))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeForm {
    csrf: Option<String>,
    phone_number: Option<String>,
    organization_id: Option<String>,
    /// `out` or `in`.
    consent: Option<String>,
    reason: Option<String>,
}

pub async fn change(
    session: Session,
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    form: Result<Form<ChangeForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    session.check_form(&headers, form.csrf.as_deref())?;
    let page = ChangePage {
        frame: Frame::of(&session, "change"),
        phone: given(form.phone_number).unwrap_or_default(),
        organization: given(form.organization_id).unwrap_or_default(),
        opted_out: form.consent.as_deref() != Some("in"),
        reason: given(form.reason).unwrap_or_default(),
        error: None,
        error_field: "",
    };
    let refuse = |mut page: ChangePage, field: &'static str, message: String| {
        page.error = Some(message);
        page.error_field = field;
        Ok(render(StatusCode::BAD_REQUEST, &page))
    };
    if !validate::is_e164(&page.phone) {
        let message = format!(
            "Phone number: {:?} is not in E.164 form (a +, the country code and the number, e.g. +15551234567).",
            page.phone
        );
        return refuse(page, "phoneNumber", message);
    }
    if page.organization.is_empty() {
        return refuse(page, "organizationId", "Organization: required.".into());
    }
    if !matches!(form.consent.as_deref(), Some("out" | "in")) {
        return refuse(page, "consent", "Consent: choose opt out or opt in.".into());
    }
    if page.reason.is_empty() || page.reason.chars().count() > MAX_REASON_CHARS {
        return refuse(
            page,
            "reason",
            format!(
                "Reason: required, at most {MAX_REASON_CHARS} characters; it is kept as the change's evidence."
            ),
        );
    }
    let change = LocalChange {
        organization_id: page.organization.clone(),
        phone_number: page.phone.clone(),
        opted_out: page.opted_out,
        tag_id: None,
        reason: Some(page.reason.clone()),
        actor: session.actor.clone(),
    };
    let recorded = match apply::record_local(&state.pool, &change, Utc::now()).await {
        Ok(recorded) => recorded,
        Err(LocalError::Invalid(message)) => return refuse(page, "", message),
        Err(LocalError::Database(error)) => return Err(error.into()),
    };
    state.wake.notify_one();
    tracing::info!(seq = recorded.seq, actor = %session.actor, "local consent change recorded from the console");
    let href = format!(
        "{}&recorded={}&current={}",
        lookup_href(&change.phone_number, None),
        recorded.seq,
        recorded.current
    );
    Ok(Redirect::to(&href).into_response())
}

// --- Sign-in and sign-out ---

#[derive(Deserialize)]
pub struct SigninQuery {
    next: Option<String>,
    #[serde(rename = "signedOut")]
    signed_out: Option<bool>,
}

#[derive(Template)]
#[template(path = "console/signin.html")]
struct SigninPage {
    frame: Frame,
    form_token: String,
    next: String,
    error: Option<String>,
    notice: Option<String>,
}

/// Where to go after sign-in: a path of this listener, never another site.
fn local_path(next: Option<&str>) -> String {
    match next {
        Some(path) if path.starts_with('/') && !path.starts_with("//") && !path.contains('\\') => {
            path.to_owned()
        }
        _ => "/".to_owned(),
    }
}

fn signin_page(
    headers: &HeaderMap,
    status: StatusCode,
    next: String,
    error: Option<String>,
    notice: Option<String>,
) -> Response {
    let (form_token, cookie) = session::signin_form(headers);
    let page = SigninPage {
        frame: Frame::signed_out(),
        form_token,
        next,
        error,
        notice,
    };
    let mut response = render(status, &page);
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

pub async fn signin_form(
    session: Option<Session>,
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    query: Result<Query<SigninQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let next = local_path(query.next.as_deref());
    if session.is_some() {
        return Ok(Redirect::to(&next).into_response());
    }
    let notice = query
        .signed_out
        .unwrap_or(false)
        .then(|| "You have signed out.".to_owned());
    let error = state.tokens.is_empty().then(|| NO_TOKENS.to_owned());
    Ok(signin_page(&headers, StatusCode::OK, next, error, notice))
}

#[derive(Deserialize)]
pub struct SigninForm {
    csrf: Option<String>,
    token: Option<String>,
    next: Option<String>,
}

pub async fn signin(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    form: Result<Form<SigninForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    session::check_signin_form(&headers, form.csrf.as_deref())?;
    let next = local_path(form.next.as_deref());
    let token = form.token.unwrap_or_default();
    let Some((signed_in, id)) = session::sign_in(&state, &token).await? else {
        tracing::warn!("console sign-in refused: not one of admin.tokens");
        tokio::time::sleep(SIGNIN_FAILURE_DELAY).await;
        let message = if state.tokens.is_empty() {
            NO_TOKENS
        } else {
            "That is not one of the admin tokens (admin.tokens). Check it and try again."
        };
        return Ok(signin_page(
            &headers,
            StatusCode::UNAUTHORIZED,
            next,
            Some(message.to_owned()),
            None,
        ));
    };
    tracing::info!(actor = %signed_in.actor, "signed in to the console");
    let cookie = session::set_cookie(&headers, session::COOKIE, &id, session::LIFETIME);
    Ok((
        AppendHeaders([
            (header::SET_COOKIE, cookie),
            (
                header::SET_COOKIE,
                session::clear_cookie(session::SIGNIN_COOKIE),
            ),
        ]),
        Redirect::to(&next),
    )
        .into_response())
}

pub async fn signout(
    session: Session,
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    session.check_form(&headers, form.csrf.as_deref())?;
    session::sign_out(&state.pool, &session).await?;
    tracing::info!(actor = %session.actor, "signed out of the console");
    Ok((
        AppendHeaders([(header::SET_COOKIE, session::clear_cookie(session::COOKIE))]),
        Redirect::to("/signin?signedOut=true"),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::local_path;

    #[test]
    fn sign_in_returns_only_to_a_page_of_this_listener() {
        assert_eq!(local_path(Some("/status")), "/status");
        assert_eq!(local_path(Some("//evil.example/")), "/");
        assert_eq!(local_path(Some("https://evil.example/")), "/");
        assert_eq!(local_path(Some("/\\evil.example")), "/");
        assert_eq!(local_path(None), "/");
    }
}
