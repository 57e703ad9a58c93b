//! Replies to review: each reply holding a revocation word among other words, with when it
//! is due, and a form to decide it (an opt-out as of its receipt, or not one) under the
//! signed-in name; the decisions made, below.

use std::sync::Arc;

use askama::Template;
use axum::Form;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Utc;
use serde::Deserialize;

use super::{given, lookup_href};
use crate::admin::console::session::Session;
use crate::admin::console::{ConsoleError, Frame, render};
use crate::admin::{AdminError, AdminState};
use crate::model::review::{Decision, ReviewDecision, ReviewItem};

/// Most replies shown, waiting and decided together.
const LISTED: i64 = 500;

#[derive(Deserialize)]
pub struct ReviewQuery {
    decided: Option<i64>,
    /// `opt_out`, `not_opt_out` or `already`.
    outcome: Option<String>,
}

/// A reply as the page shows it.
struct Row {
    item: ReviewItem,
    lookup: String,
    /// Past its due date.
    overdue: bool,
}

#[derive(Template)]
#[template(path = "console/review.html")]
struct ReviewPage {
    frame: Frame,
    waiting: Vec<Row>,
    decided: Vec<Row>,
    notice: Option<String>,
}

pub async fn review(
    session: Session,
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ReviewQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let calendar = &state.compliance.calendar;
    let items = crate::ledger::review::items(&state.pool, calendar, true, LISTED).await?;
    let now = Utc::now();
    let (waiting, decided): (Vec<Row>, Vec<Row>) = items
        .into_iter()
        .map(|item| Row {
            lookup: lookup_href(&item.phone_number, None),
            overdue: item.decision.is_none() && item.due.at() < now,
            item,
        })
        .partition(|row| row.item.decision.is_none());
    let notice = query.decided.map(|id| match query.outcome.as_deref() {
        Some("opt_out") => {
            format!("Reply #{id} was decided an opt-out: recorded as of its receipt and sent on.")
        }
        Some("not_opt_out") => format!("Reply #{id} was decided not an opt-out."),
        _ => format!("Reply #{id} was decided already; nothing was changed."),
    });
    let page = ReviewPage {
        frame: Frame::of(&session, "review"),
        waiting,
        decided,
        notice,
    };
    Ok(render(StatusCode::OK, &page))
}

#[derive(Deserialize)]
pub struct DecideForm {
    csrf: Option<String>,
    /// `opt_out` or `not_opt_out`.
    decision: Option<String>,
    reason: Option<String>,
}

pub async fn decide(
    session: Session,
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
    headers: HeaderMap,
    form: Result<Form<DecideForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    session.check_form(&headers, form.csrf.as_deref())?;
    let decision = match form.decision.as_deref() {
        Some("opt_out") => Decision::OptOut,
        Some("not_opt_out") => Decision::NotOptOut,
        _ => {
            return Err(ConsoleError::BadRequest(format!(
                "Choose whether reply #{id} is an opt-out or not, then decide."
            )));
        }
    };
    let decision = ReviewDecision {
        decision,
        by: session.actor.clone(),
        reason: given(form.reason),
    };
    let outcome = match crate::admin::review::decide_reply(&state, id, &decision).await {
        Ok(item) => item.decision.unwrap_or_default(),
        Err(AdminError::Conflict(_)) => "already".to_owned(),
        Err(error) => return Err(error.into()),
    };
    tracing::info!(reply = id, actor = %session.actor, outcome, "reply decided from the console");
    Ok(Redirect::to(&format!("/review?decided={id}&outcome={outcome}")).into_response())
}
