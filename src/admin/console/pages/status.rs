//! The daemon's status, with the deliveries chart, and a subscriber tried at once.

use std::sync::Arc;

use askama::Template;
use axum::Form;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DurationRound as _, SecondsFormat, Utc};
use serde::Deserialize;

use crate::admin::AdminState;
use crate::admin::console::session::Session;
use crate::admin::console::views::{self, Chart, query_value};
use crate::admin::console::{ConsoleError, Frame, render};
use crate::ledger::{self, Status};
use crate::sender::ReplayError;

use super::CsrfForm;

#[derive(Deserialize)]
pub struct StatusQuery {
    /// The subscriber just tried at once.
    retried: Option<String>,
    /// The destination just tried at once.
    retried_destination: Option<String>,
}

/// A destination's row.
pub struct DestinationRow {
    pub view: crate::model::DestinationView,
    pub lag: String,
}

/// A subscriber's row.
pub struct SubscriberRow {
    pub view: crate::model::SubscriberView,
    pub lag: String,
}

/// A source's row: its view, and its state as a word.
struct SourceRow {
    view: crate::sources::SourceView,
    state: String,
}

#[derive(Template)]
#[template(path = "console/status.html")]
struct StatusPage {
    frame: Frame,
    status: Status,
    /// Age of the oldest unapplied delivery.
    apply_lag: String,
    subscribers: Vec<SubscriberRow>,
    destinations: Vec<DestinationRow>,
    sources: Vec<SourceRow>,
    /// Who a revocation binds.
    callers: Vec<crate::model::caller::CallerView>,
    chart: Chart,
    generated_at: String,
    notice: Option<String>,
}

pub async fn status(
    session: Session,
    State(state): State<Arc<AdminState>>,
    query: Result<Query<StatusQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let now = Utc::now();
    let status = ledger::status_of(&state.pool, &state.accounts).await?;
    let subscribers = crate::sender::views(&state.pool, &state.subscribers).await?;
    let destinations = crate::sender::views(&state.pool, &state.destinations).await?;
    let sources = crate::sources::views(&state.pool, &state.sources.current()).await?;
    // From the start of the chart's first minute.
    let since = now - chrono::Duration::minutes(views::CHART_MINUTES - 1);
    let since = since
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap_or(since);
    let rows = ledger::deliveries_per_minute(&state.pool, since).await?;
    let apply_lag = match &status.oldest_pending_at {
        None => "none: nothing is waiting".to_owned(),
        Some(oldest) => views::duration((now - oldest.at()).as_seconds_f64().max(0.0)),
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
        destinations: destinations
            .into_iter()
            .map(|view| DestinationRow {
                lag: views::duration(view.lag_seconds),
                view,
            })
            .collect(),
        sources: sources
            .into_iter()
            .map(|view| SourceRow {
                state: serde_json::to_value(view.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                view,
            })
            .collect(),
        callers: state
            .callers
            .current()
            .iter()
            .map(|c| crate::model::caller::CallerView::of(c, now))
            .collect(),
        chart: Chart::new(&rows, now),
        generated_at: now.to_rfc3339_opts(SecondsFormat::Secs, true),
        status,
        notice: match (query.retried, query.retried_destination) {
            (Some(name), _) => Some(format!(
                "Subscriber {name} was tried now; its row shows how it went."
            )),
            (None, Some(name)) => Some(format!(
                "Destination {name} was tried now; its row shows how it went."
            )),
            (None, None) => None,
        },
    };
    Ok(render(StatusCode::OK, &page))
}

/// The status page's "Try now" of a subscriber waiting out a backoff.
pub async fn retry_subscriber(
    session: Session,
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    session.check_form(&headers, form.csrf.as_deref())?;
    crate::sender::retry(
        &state.pool,
        &state.subscribers,
        state.senders.as_ref(),
        &name,
    )
    .await
    .map_err(|error| match error {
        ReplayError::Database(error) => ConsoleError::Database(error),
        other => ConsoleError::NotFound(other.to_string()),
    })?;
    tracing::info!(subscriber = %name, actor = %session.actor, "subscriber tried at once from the console");
    let name = query_value(&name);
    Ok(Redirect::to(&format!("/status?retried={name}")).into_response())
}

/// The status page's "Try now" of a destination in error or waiting out a backoff.
pub async fn retry_destination(
    session: Session,
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    session.check_form(&headers, form.csrf.as_deref())?;
    crate::sender::retry(
        &state.pool,
        &state.destinations,
        state.senders.as_ref(),
        &name,
    )
    .await
    .map_err(|error| match error {
        ReplayError::Database(error) => ConsoleError::Database(error),
        other => ConsoleError::NotFound(other.to_string()),
    })?;
    tracing::info!(destination = %name, actor = %session.actor, "destination tried at once from the console");
    let name = query_value(&name);
    Ok(Redirect::to(&format!("/status?retried_destination={name}")).into_response())
}
