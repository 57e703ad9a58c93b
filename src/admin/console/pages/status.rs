//! The daemon's status, with the deliveries chart.

use std::sync::Arc;

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DurationRound as _, SecondsFormat, Utc};

use crate::admin::AdminState;
use crate::admin::console::session::Session;
use crate::admin::console::views::{self, Chart};
use crate::admin::console::{ConsoleError, Frame, render};
use crate::ledger::{self, Status};

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
    let status = ledger::status(&state.pool).await?;
    let subscribers = crate::subscribers::views(&state.pool, &state.subscribers).await?;
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
        chart: Chart::new(&rows, now),
        generated_at: now.to_rfc3339_opts(SecondsFormat::Secs, true),
        status,
    };
    Ok(render(StatusCode::OK, &page))
}
