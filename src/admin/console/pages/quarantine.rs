//! Quarantined deliveries, and their replay.

use std::sync::Arc;
use std::time::Duration;

use askama::Template;
use axum::Form;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::CsrfForm;
use crate::admin::AdminState;
use crate::admin::console::session::Session;
use crate::admin::console::{ConsoleError, Frame, render};
use crate::ledger::{self, StoredEvent};
use crate::model::Requeue;

/// Longest wait for a replayed delivery to be applied before the page answers.
const REPLAY_SETTLE: Duration = Duration::from_secs(5);
/// Quarantined deliveries listed, newest first.
const QUARANTINE_LISTED: i64 = 500;
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
    let states = crate::worker::settled(&state.pool, &[id], REPLAY_SETTLE).await?;
    let outcome = match states {
        s if s.applied > 0 => "applied",
        s if s.quarantined > 0 => "quarantined",
        _ => "pending",
    };
    Ok(Redirect::to(&format!("/quarantine?replayed={id}&outcome={outcome}")).into_response())
}
