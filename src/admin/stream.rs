//! `GET /v1/consent/stream`: the change feed as Server-Sent Events, for tools that keep a
//! connection open. Each entry is `id: SEQ`, `event: consent`, `data:` the ledger entry; a
//! client that reconnects with `Last-Event-ID` resumes right after the last entry it saw.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::{AdminError, AdminState};
use crate::ledger::{self, LedgerEntry};
use crate::signal::{FALLBACK_POLL, Follower};
use crate::store::Pool;

/// A comment line this often keeps proxies from closing an idle stream.
const HEARTBEAT: Duration = Duration::from_secs(15);
/// Entries read at a time.
const PAGE: i64 = 1_000;

/// One event of the stream (heartbeats are comments, not events).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ConsentEvent {
    /// The entry's seq: what `Last-Event-ID` resumes after.
    id: String,
    event: ConsentEventName,
    /// A LedgerEntry as JSON.
    #[schema(content_media_type = "application/json")]
    data: String,
}

/// The name of every event of the stream.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub enum ConsentEventName {
    Consent,
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// Last seq seen (default 0: from the start); the Last-Event-ID header wins.
    after: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/v1/consent/stream",
    operation_id = "consentStream",
    summary = "The ledger as Server-Sent Events (`id: SEQ`, `event: consent`, `data:` a ledger entry), resuming after `Last-Event-ID` or `after`, with a comment heartbeat every 15 s",
    params(StreamQuery),
    responses(
        (status = 200, description = "Server-Sent Events: `id: SEQ`, `event: consent`, `data:` a LedgerEntry as JSON; `: heartbeat` comments",
         content_type = "text/event-stream", body = ConsentEvent),
        (status = 400, description = "invalid parameters or body", body = crate::ingest::ErrorBody),
    )
)]
pub async fn consent(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    query: Result<Query<StreamQuery>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, axum::Error>>>, AdminError> {
    let Query(query) = query?;
    let resumed = match headers.get("last-event-id") {
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .ok_or_else(|| {
                    AdminError::BadRequest("Last-Event-ID must be a seq (an integer)".into())
                })?,
        ),
        None => None,
    };
    let after = resumed.or(query.after).unwrap_or(0);
    let feed = Feed {
        pool: state.pool.clone(),
        after,
        follower: Follower::new(),
        buffered: VecDeque::new(),
        stop: state.stop.clone(),
    };
    let events = futures::stream::unfold(feed, |mut feed| async move {
        let entry = feed.next().await?;
        let event = Event::default()
            .id(entry.seq.to_string())
            .event("consent")
            .json_data(&entry);
        Some((event, feed))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(HEARTBEAT).text("heartbeat")))
}

/// The entries after `after`, as they commit.
struct Feed {
    pool: Pool,
    after: i64,
    follower: Follower,
    buffered: VecDeque<LedgerEntry>,
    /// The daemon is stopping: the stream ends, and the client resumes elsewhere or later.
    stop: CancellationToken,
}

impl Feed {
    /// The next entry; `None` ends the stream (the daemon stops, or the database failed:
    /// the client reconnects with `Last-Event-ID` and misses nothing).
    async fn next(&mut self) -> Option<LedgerEntry> {
        loop {
            if let Some(entry) = self.buffered.pop_front() {
                self.after = entry.seq;
                return Some(entry);
            }
            // Seqs become visible in order on either backend, so `seq > after` skips nothing.
            match ledger::changes(&self.pool, self.after, PAGE).await {
                Ok(entries) if entries.is_empty() => {
                    tokio::select! {
                        _ = self.stop.cancelled() => return None,
                        _ = self.follower.wait(FALLBACK_POLL) => {}
                    }
                }
                Ok(entries) => self.buffered.extend(entries),
                Err(error) => {
                    tracing::warn!(%error, after = self.after, "consent stream ended: cannot read the ledger");
                    return None;
                }
            }
        }
    }
}
