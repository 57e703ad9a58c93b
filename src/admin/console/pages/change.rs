//! The local opt-out/opt-in form.

use crate::model::AccountId;
use std::sync::Arc;

use askama::Template;
use axum::Form;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Utc;
use serde::Deserialize;

use super::{given, lookup_href};
use crate::admin::AdminState;
use crate::admin::console::session::Session;
use crate::admin::console::{ConsoleError, Frame, render};
use crate::apply::{self, LocalChange, LocalError};
use crate::model::MAX_REASON_CHARS;
use crate::model::phone;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeQuery {
    phone_number: Option<String>,
    organization_id: Option<String>,
    account_id: Option<String>,
    opted_out: Option<bool>,
}

#[derive(Template)]
#[template(path = "console/change.html")]
struct ChangePage {
    frame: Frame,
    phone: String,
    organization: String,
    /// The account it is recorded in, chosen among `accounts` when there are several.
    account: String,
    accounts: Vec<AccountId>,
    opted_out: bool,
    reason: String,
    error: Option<String>,
    /// The field the error is about, to point at it.
    error_field: &'static str,
}

pub async fn change_form(
    session: Session,
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ChangeQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let page = ChangePage {
        frame: Frame::of(&session, "change"),
        phone: given(query.phone_number).unwrap_or_default(),
        organization: given(query.organization_id).unwrap_or_default(),
        account: given(query.account_id).unwrap_or_else(|| state.first_account().to_string()),
        accounts: state.accounts.clone(),
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
    account_id: Option<String>,
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
        account: given(form.account_id).unwrap_or_else(|| state.first_account().to_string()),
        accounts: state.accounts.clone(),
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
    if let Err(error) = phone::canonical(&page.phone) {
        let message = format!(
            "Phone number: {error}; it is not in E.164 form (a +, the country code and the number, e.g. +15551234567)."
        );
        return refuse(page, "phoneNumber", message);
    }
    if page.organization.is_empty() {
        return refuse(page, "organizationId", "Organization: required.".into());
    }
    let account = match state.account(Some(&page.account)) {
        Ok(account) => account,
        Err(error) => {
            let message = format!("Account: {error}.");
            return refuse(page, "accountId", message);
        }
    };
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
        account,
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
    crate::pusher::wake_all(&state.wake);
    tracing::info!(seq = recorded.seq, actor = %session.actor, "local consent change recorded from the console");
    let href = format!(
        "{}&recorded={}&current={}",
        lookup_href(&change.phone_number, None),
        recorded.seq,
        recorded.current
    );
    Ok(Redirect::to(&href).into_response())
}
