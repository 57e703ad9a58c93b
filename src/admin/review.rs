//! `/v1/review`: the replies put to a person (a revocation word among other words), each
//! due by the compliance deadline from its receipt, and their decisions.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use serde::{Deserialize, Serialize};

use crate::ingest::ErrorBody;

use super::{AdminError, AdminState};
use crate::apply::reviewed::{self, ReviewError};
use crate::model::review::{ReviewDecision, ReviewItem};

/// Most replies listed.
const MOST_LISTED: i64 = 1_000;

/// The replies.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ReviewItems {
    items: Vec<ReviewItem>,
}

/// Which replies are listed.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReviewQuery {
    /// The decided replies too, after those waiting.
    #[serde(default)]
    all: bool,
}

/// A reply's id.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ReplyPath {
    /// The reply's id, as listed.
    #[allow(dead_code)] // Read as text: an id that is no number names no reply (404).
    id: String,
}

#[utoipa::path(
    get,
    path = "/v1/review",
    operation_id = "listReview",
    summary = "The replies waiting for a person's decision, oldest first, with when each is due",
    params(ReviewQuery),
    responses(
        (status = 200, description = "success", body = ReviewItems),
        (status = 400, description = "bad query", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ReviewQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<ReviewItems>, AdminError> {
    let Query(query) = query?;
    let calendar = &state.compliance.calendar;
    let items = crate::ledger::review::items(&state.pool, calendar, query.all, MOST_LISTED).await?;
    Ok(Json(ReviewItems { items }))
}

#[utoipa::path(
    post,
    path = "/v1/review/{id}",
    operation_id = "decideReply",
    summary = "Decide a reply: an opt-out (as of its receipt, sent on as any opt-out) or not",
    params(ReplyPath),
    request_body = ReviewDecision,
    responses(
        (status = 200, description = "decided", body = ReviewItem),
        (status = 400, description = "bad request", body = ErrorBody),
        (status = 404, description = "no such reply", body = ErrorBody),
        (status = 409, description = "decided already", body = ErrorBody),
    )
)]
pub async fn decide(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ReviewItem>, AdminError> {
    let id: i64 = id.parse().map_err(|_| {
        AdminError::NotFound(format!(
            "no reply {} is kept for review",
            crate::model::text::quoted(&id)
        ))
    })?;
    let decision: ReviewDecision = super::consent::json_body(body)?;
    let decided = decide_reply(&state, id, &decision).await?;
    Ok(Json(decided))
}

/// Records `decision` of reply `id` and wakes the pushers: the API's and the console's way.
pub(super) async fn decide_reply(
    state: &AdminState,
    id: i64,
    decision: &ReviewDecision,
) -> Result<ReviewItem, AdminError> {
    let sources = crate::apply::InForce::new(
        state.sources.current().as_ref().clone(),
        state.accounts.clone(),
    );
    let decided = reviewed::decide(&state.pool, &sources, id, decision, chrono::Utc::now())
        .await
        .map_err(|e| match e {
            ReviewError::NotFound(_) => AdminError::NotFound(e.to_string()),
            ReviewError::Decided { .. } => AdminError::Conflict(e.to_string()),
            ReviewError::Invalid(_) | ReviewError::SourceGone { .. } => {
                AdminError::BadRequest(e.to_string())
            }
            ReviewError::Database(e) => AdminError::Database(e),
        })?;
    crate::pusher::wake_all(&state.wake);
    Ok(crate::ledger::review::item(
        &state.compliance.calendar,
        decided,
    ))
}
