//! What a fake destination can be made to do wrong, per fake: fail the next requests with a
//! status (429 with `Retry-After`), answer garbage, redirect to another host, answer a huge
//! body, never answer, answer late, act at once and answer late, or say a quota or a rate
//! limit was hit (in BigQuery's words). Also the fake's request log and counts.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{OriginalUri, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::Fake;

/// One misbehaviour, for one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum FakeFault {
    /// An error status, in the fake's own error body; a 429 carries `Retry-After` when
    /// `retry_after_secs` is set.
    #[serde(rename_all = "camelCase")]
    Status {
        status: u16,
        #[serde(default)]
        retry_after_secs: Option<u64>,
    },
    /// 200 with a body that is not JSON.
    Garbage,
    /// 301 to another host (`location`, or [`REDIRECT_ELSEWHERE`] and the request's path).
    #[serde(rename_all = "camelCase")]
    Redirect {
        #[serde(default)]
        location: Option<String>,
    },
    /// 200 with a JSON body of [`HUGE_BODY_BYTES`].
    Huge,
    /// No answer at all, until the sandbox stops.
    Hang,
    /// The request is acted on at once (what it writes is kept), and answered only after
    /// `after_ms`: a client that gave up waiting never learns that it was.
    #[serde(rename_all = "camelCase")]
    Late { after_ms: u64 },
    /// A quota exhausted: BigQuery's 403 `quotaExceeded` (the other fakes' 403).
    #[serde(alias = "quota_exceeded")]
    QuotaExceeded,
    /// A rate limit hit: BigQuery's 403 `rateLimitExceeded` (the other fakes' 429).
    #[serde(alias = "rate_limit")]
    RateLimit,
}

/// Where [`FakeFault::Redirect`] points when no location is given: a host that is not the
/// sandbox.
pub const REDIRECT_ELSEWHERE: &str = "http://elsewhere.invalid";

/// The size of [`FakeFault::Huge`]'s body: 10 MiB.
pub const HUGE_BODY_BYTES: usize = 10 * 1024 * 1024;

/// Requests kept in a fake's log: the most recent.
const LOG_CAP: usize = 10_000;

/// One request a fake answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FakeRequest {
    pub method: String,
    /// The full path, prefix included (`/van/v4/people/101/canvassResponses`).
    pub path: String,
    pub status: u16,
}

/// How many requests a fake answered, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FakeRequestCounts {
    /// Every request that reached the fake's API (a hung one included).
    pub total: u64,
    /// Requests answered with an injected fault.
    pub injected_faults: u64,
    /// Answered requests by status.
    pub by_status: BTreeMap<u16, u64>,
    /// The most recent answered requests, oldest first.
    pub recent: Vec<FakeRequest>,
}

/// The fault settings of one fake, as `/_control/.../faults` shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FakeFaults {
    /// What the next requests get, in order.
    pub queued: Vec<FakeFault>,
    /// Added before every answer.
    pub latency_ms: u64,
}

#[derive(Default)]
struct Board {
    queue: VecDeque<FakeFault>,
    latency: Duration,
    counts: FakeRequestCounts,
    log: VecDeque<FakeRequest>,
}

/// The faults and the request log of one fake.
pub(crate) struct Switchboard {
    board: Mutex<Board>,
    dialect: Fake,
    /// A hung request ends when the sandbox stops, so shutdown never waits on it.
    cancel: CancellationToken,
}

impl Switchboard {
    pub(crate) fn new(dialect: Fake, cancel: CancellationToken) -> Self {
        Self {
            board: Mutex::new(Board::default()),
            dialect,
            cancel,
        }
    }

    fn board(&self) -> MutexGuard<'_, Board> {
        self.board.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next `count` requests get `fault` (after any already queued).
    pub(crate) fn push(&self, count: usize, fault: FakeFault) {
        let mut board = self.board();
        board
            .queue
            .extend(std::iter::repeat_n(fault, count.min(100_000)));
    }

    pub(crate) fn set_latency(&self, latency: Duration) {
        self.board().latency = latency;
    }

    /// Nothing queued, no latency.
    pub(crate) fn clear(&self) {
        let mut board = self.board();
        board.queue.clear();
        board.latency = Duration::ZERO;
    }

    pub(crate) fn faults(&self) -> FakeFaults {
        let board = self.board();
        FakeFaults {
            queued: board.queue.iter().cloned().collect(),
            latency_ms: u64::try_from(board.latency.as_millis()).unwrap_or(u64::MAX),
        }
    }

    pub(crate) fn counts(&self) -> FakeRequestCounts {
        let board = self.board();
        FakeRequestCounts {
            recent: board.log.iter().cloned().collect(),
            ..board.counts.clone()
        }
    }

    /// Counts the request, applies the latency and the next queued fault (before
    /// authentication, as a proxy or an overloaded server would), and logs the answer.
    pub(crate) async fn run(&self, request: Request, next: Next) -> Response {
        let path = request.extensions().get::<OriginalUri>().map_or_else(
            || request.uri().path().to_owned(),
            |u| u.0.path().to_owned(),
        );
        let method = request.method().to_string();
        let (fault, latency) = {
            let mut board = self.board();
            board.counts.total += 1;
            let fault = board.queue.pop_front();
            if fault.is_some() {
                board.counts.injected_faults += 1;
            }
            (fault, board.latency)
        };
        if !latency.is_zero() {
            tokio::select! {
                _ = self.cancel.cancelled() => return unavailable(),
                _ = tokio::time::sleep(latency) => {}
            }
        }
        let response = match fault {
            None => next.run(request).await,
            Some(FakeFault::Hang) => {
                self.cancel.cancelled().await;
                return unavailable();
            }
            Some(FakeFault::Late { after_ms }) => {
                let response = next.run(request).await;
                tokio::select! {
                    _ = self.cancel.cancelled() => return unavailable(),
                    _ = tokio::time::sleep(Duration::from_millis(after_ms)) => {}
                }
                response
            }
            Some(fault) => self.answer(fault, &path),
        };
        let status = response.status().as_u16();
        let mut board = self.board();
        *board.counts.by_status.entry(status).or_default() += 1;
        if board.log.len() >= LOG_CAP {
            board.log.pop_front();
        }
        board.log.push_back(FakeRequest {
            method,
            path,
            status,
        });
        response
    }

    fn answer(&self, fault: FakeFault, path: &str) -> Response {
        match fault {
            FakeFault::Status {
                status,
                retry_after_secs,
            } => {
                let status =
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut response = self.dialect.injected(status);
                if let Some(secs) = retry_after_secs.filter(|_| status.as_u16() == 429) {
                    response
                        .headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
                }
                response
            }
            FakeFault::Garbage => (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                "{\"errors\": [ this is not JSON <html>",
            )
                .into_response(),
            FakeFault::Redirect { location } => {
                let location = location.unwrap_or_else(|| format!("{REDIRECT_ELSEWHERE}{path}"));
                let mut response = StatusCode::MOVED_PERMANENTLY.into_response();
                if let Ok(value) = HeaderValue::from_str(&location) {
                    response.headers_mut().insert(header::LOCATION, value);
                }
                response
            }
            FakeFault::Huge => {
                let mut body = Vec::with_capacity(HUGE_BODY_BYTES);
                body.extend_from_slice(b"{\"padding\":\"");
                body.resize(HUGE_BODY_BYTES - 2, b'x');
                body.extend_from_slice(b"\"}");
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "application/json")],
                    Body::from(body),
                )
                    .into_response()
            }
            FakeFault::QuotaExceeded => self.dialect.limited(true),
            FakeFault::RateLimit => self.dialect.limited(false),
            FakeFault::Hang | FakeFault::Late { .. } => unavailable(),
        }
    }
}

/// What a request cut short by the sandbox stopping gets.
fn unavailable() -> Response {
    StatusCode::SERVICE_UNAVAILABLE.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_read_and_write_the_documented_json() {
        let fault: FakeFault =
            serde_json::from_str(r#"{"kind":"status","status":429,"retryAfterSecs":7}"#)
                .expect("parses");
        assert_eq!(
            fault,
            FakeFault::Status {
                status: 429,
                retry_after_secs: Some(7)
            }
        );
        let hang: FakeFault = serde_json::from_str(r#"{"kind":"hang"}"#).expect("parses");
        assert_eq!(hang, FakeFault::Hang);
        for (json, fault) in [
            (r#"{"kind":"quotaExceeded"}"#, FakeFault::QuotaExceeded),
            (r#"{"kind":"quota_exceeded"}"#, FakeFault::QuotaExceeded),
            (r#"{"kind":"rateLimit"}"#, FakeFault::RateLimit),
            (r#"{"kind":"rate_limit"}"#, FakeFault::RateLimit),
        ] {
            assert_eq!(
                serde_json::from_str::<FakeFault>(json).expect("parses"),
                fault
            );
        }
    }
}
