//! The public ingest listener: verify each delivery on its exact bytes, commit it to the
//! outbox, and only then answer. Applying is the worker's job, not the request's.

use crate::rejections::Rejections;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use chrono::Utc;
use http_body_util::{BodyExt, Limited};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::events;
use crate::metrics::Metrics;
use crate::model::AccountId;
use crate::outbox::{CommitError, Committed, Delivery, OutboxWriter, RejectedDelivery};
use crate::settings::{Account, IngestSettings, Live, WebhookSettings};
use crate::signature::{Rejection, Verifier};

/// Seconds a client is asked to wait when the daemon cannot take a delivery now.
const RETRY_AFTER_SECS: u64 = 5;

/// What the ingest handlers share.
pub struct IngestState {
    /// Replaced whole when `serve` reloads `[webhook] secrets`.
    verifier: Live<Verifier>,
    writer: OutboxWriter,
    pool: crate::store::Pool,
    max_body_bytes: usize,
    max_backlog: u64,
    rejections: Arc<Rejections>,
    /// Each answer is counted here, by outcome.
    metrics: Arc<Metrics>,
    /// The account whose deliveries arrive here.
    account: AccountId,
}

/// One account's ingest route: the account (its ingest path and `[webhook]`) and the
/// verifier of its secrets, which a reload replaces.
pub type AccountRoute = (Account, Live<Verifier>);

/// An account's ingest path the router cannot take: one the settings should have refused
/// ([`crate::settings::ingest_path_problem`]), or a path taken twice.
#[derive(Debug, thiserror::Error)]
#[error("account {account:?}: cannot receive deliveries on its ingest path: {problem}")]
pub struct RouteError {
    pub account: AccountId,
    pub problem: String,
}

/// Checks every account's path as the settings do, before the router is given any (axum
/// panics on a path it cannot route): so that no configuration, however it was made, can
/// make building the router panic.
fn routable<'a>(
    paths: impl IntoIterator<Item = (&'a AccountId, &'a str)>,
) -> Result<(), RouteError> {
    let mut taken = std::collections::HashMap::new();
    for (account, path) in paths {
        let refused = |problem: String| RouteError {
            account: account.clone(),
            problem,
        };
        if let Some(problem) = crate::settings::ingest_path_problem(path) {
            return Err(refused(problem));
        }
        if let Some(other) = taken.insert(path, account) {
            return Err(refused(format!(
                "{} is also account {other:?}'s",
                crate::model::text::quoted(path)
            )));
        }
    }
    Ok(())
}

/// The ingest router: `POST {ingest.path}` of each account served, `POST /sources/{name}`
/// of each source a system posts to ([`posted`]), `GET /healthz`, `GET /readyz`, under
/// `[ingest]`'s limits. A delivery is verified by the verifier of the account whose path it
/// arrived on, as that verifier is at the time, and only by it; a post, by the source's
/// tokens in force. An error, never a panic, for a path that cannot be routed.
pub fn router(
    (accounts, sources, limits): (Vec<AccountRoute>, crate::apply::InForce, &IngestSettings),
    writer: OutboxWriter,
    pool: crate::store::Pool,
    rejections: Arc<Rejections>,
    metrics: Arc<Metrics>,
) -> Result<Router, RouteError> {
    routable(
        accounts
            .iter()
            .map(|(account, _)| (&account.id, account.ingest_path.as_str())),
    )?;
    let mut router = Router::new();
    let mut first = None;
    // One account's confirmation header goes on every answer, as it did before accounts;
    // with several, each on its own path's.
    let whole = match accounts.as_slice() {
        [(account, _)] => confirmation_header(&account.webhook),
        _ => None,
    };
    let several = accounts.len() > 1;
    for (account, verifier) in accounts {
        let state = Arc::new(IngestState {
            metrics: metrics.clone(),
            verifier,
            writer: writer.clone(),
            pool: pool.clone(),
            max_body_bytes: limits.max_body_bytes,
            max_backlog: limits.max_backlog,
            rejections: rejections.clone(),
            account: account.id.clone(),
        });
        let route = post(receive).with_state(state.clone());
        let route = match confirmation_header(&account.webhook).filter(|_| several) {
            Some(header) => route.layer(with_header(header)),
            None => route,
        };
        router = router.route(&account.ingest_path, route);
        first.get_or_insert(state);
    }
    let posts = Arc::new(posted::PostedState {
        sources,
        writer: writer.clone(),
        max_body_bytes: limits.max_body_bytes,
        max_backlog: limits.max_backlog,
        rejections: rejections.clone(),
        metrics: metrics.clone(),
        large_posts: tokio::sync::Semaphore::new(posted::LARGE_POSTS_AT_ONCE),
    });
    let router = router.route("/sources/{name}", post(posted::receive).with_state(posts));
    let Some(state) = first else {
        return Ok(router);
    };
    let router = router
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz).with_state(state.clone()))
        .fallback_service(axum::handler::Handler::with_state(not_found, state));
    Ok(match whole {
        Some(header) => router.layer(with_header(header)),
        None => router,
    })
}

/// A layer that puts `header` on every answer.
fn with_header(
    (name, value): (HeaderName, HeaderValue),
) -> tower_http::set_header::SetResponseHeaderLayer<HeaderValue> {
    tower_http::set_header::SetResponseHeaderLayer::overriding(name, value)
}

fn confirmation_header(w: &WebhookSettings) -> Option<(HeaderName, HeaderValue)> {
    if w.confirmation_header.is_empty() {
        return None;
    }
    let name = HeaderName::try_from(w.confirmation_header.as_str()).ok()?;
    let value = HeaderValue::try_from(w.account_id.as_str()).ok()?;
    Some((name, value))
}

/// The answer to an accepted or duplicate delivery.
#[derive(Debug, Serialize)]
struct Ack {
    status: &'static str,
    id: i64,
}

/// Every way a delivery is refused. Clients see the status and a short message; causes
/// go to the log.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("{0}")]
    Unauthorized(Rejection),
    #[error("body is not JSON")]
    NotJson,
    #[error("body larger than {0} bytes")]
    TooLarge(usize),
    #[error("backlog full, retry later")]
    BacklogFull,
    #[error("cannot store the delivery now, retry later")]
    Unavailable(CommitError),
    #[error("cannot read the body")]
    BadBody,
    #[error("{0}")]
    BodyTimedOut(crate::listener::BodyTimedOut),
    #[error("not found")]
    NotFound,
    /// A post to a source whose signature does not verify (Twilio's answer is 403).
    #[error("the signature does not verify")]
    Forbidden,
    /// A post to a source without the credentials it must carry: 401, with the challenge
    /// (`WWW-Authenticate`) the system answers.
    #[error("the credentials are missing or not the source's")]
    Challenged(&'static str),
}

/// The JSON body of every error.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody {
    pub code: u16,
    pub message: String,
}

impl IngestError {
    fn status(&self) -> StatusCode {
        match self {
            IngestError::Unauthorized(_) | IngestError::Challenged(_) => StatusCode::UNAUTHORIZED,
            IngestError::NotJson | IngestError::BadBody => StatusCode::BAD_REQUEST,
            IngestError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            IngestError::BacklogFull | IngestError::Unavailable(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            IngestError::NotFound => StatusCode::NOT_FOUND,
            IngestError::Forbidden => StatusCode::FORBIDDEN,
            IngestError::BodyTimedOut(_) => StatusCode::REQUEST_TIMEOUT,
        }
    }
}

impl IntoResponse for IngestError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = axum::Json(ErrorBody {
            code: status.as_u16(),
            message: self.to_string(),
        });
        if let IngestError::Challenged(challenge) = self {
            // Refused on its headers, before its body was read: the connection cannot carry
            // another request (the rest of the body would be read as one).
            let headers = [
                (header::WWW_AUTHENTICATE, challenge),
                (header::CONNECTION, "close"),
            ];
            return (status, headers, body).into_response();
        }
        match status {
            StatusCode::SERVICE_UNAVAILABLE => {
                let retry = [(header::RETRY_AFTER, RETRY_AFTER_SECS.to_string())];
                (status, retry, body).into_response()
            }
            // Answered before the body was read whole: the connection cannot carry another
            // request, and says so (a keep-alive client would otherwise write its next one
            // into a closed connection).
            StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT => {
                (status, [(header::CONNECTION, "close")], body).into_response()
            }
            _ => (status, body).into_response(),
        }
    }
}

#[tracing::instrument(name = "delivery", skip_all, fields(dedup_key))]
async fn receive(
    State(state): State<Arc<IngestState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<axum::Json<Ack>, IngestError> {
    let answer = take(&state, headers, body).await;
    Answered(&answer).emit(&state.metrics, Some(&state.account));
    answer.map(|committed| {
        axum::Json(match committed {
            Committed::Accepted(id) => Ack {
                status: "accepted",
                id,
            },
            Committed::Duplicate(id) => Ack {
                status: "duplicate",
                id,
            },
        })
    })
}

/// Reads, verifies and commits one delivery.
async fn take(
    state: &IngestState,
    headers: HeaderMap,
    body: Body,
) -> Result<Committed, IngestError> {
    let received_at = Utc::now();
    let body = read_limited(&headers, body, state.max_body_bytes).await?;
    let verified = match state
        .verifier
        .current()
        .verify(&headers, &body, received_at.timestamp())
    {
        Ok(verified) => verified,
        Err(rejection) => {
            state.rejections.record(RejectedDelivery {
                account: state.account.to_string(),
                received_at,
                reason: rejection.to_string(),
                headers: headers_as_pairs(&headers),
                body,
            });
            return Err(IngestError::Unauthorized(rejection));
        }
    };
    let received =
        events::receive(&body, received_at).map_err(|events::NotJson| IngestError::NotJson)?;
    let dedup_key = dedup_key(received.id, verified.webhook_id.as_deref(), &body);
    tracing::Span::current().record("dedup_key", dedup_key.as_str());
    if state.writer.state().pending() >= state.max_backlog {
        return Err(IngestError::BacklogFull);
    }
    let (kept, verified_header) = headers_as_received(&headers, &verified.signature);
    let delivery = Delivery {
        account: state.account.to_string(),
        dedup_key,
        received_at,
        body,
        headers: kept,
        secret_index: verified.secret_index,
        verified_header,
    };
    state
        .writer
        .commit(delivery, received.event)
        .await
        .map_err(IngestError::Unavailable)
}

/// One answer to a delivery as an event: its log line and its count emitted together, so
/// the two cannot drift (the line's `outcome` is the count's label). Every answer is logged
/// once.
struct Answered<'a>(&'a Result<Committed, IngestError>);

impl Answered<'_> {
    /// Logs and counts the answer to a delivery on `account`'s path (`None`: on no
    /// account's).
    fn emit(&self, metrics: &Metrics, account: Option<&AccountId>) {
        if let Some(outcome) = self.logged() {
            metrics.delivery(account, outcome);
        }
    }

    /// Logs the answer; what it is counted as (`None`: not counted).
    fn logged(&self) -> Option<crate::metrics::Delivery> {
        use crate::metrics::Delivery as Outcome;
        let counted = match self.0 {
            Ok(Committed::Accepted(id)) => {
                let outcome = Outcome::Accepted;
                tracing::info!(id = *id, outcome = outcome.label(), "delivery committed");
                outcome
            }
            Ok(Committed::Duplicate(id)) => {
                let outcome = Outcome::Duplicate;
                tracing::info!(
                    id = *id,
                    outcome = outcome.label(),
                    "delivery already committed"
                );
                outcome
            }
            Err(IngestError::Unauthorized(rejection)) => {
                // Counted, sampled and logged once per period (crate::rejections): an
                // unverified request costs no write and no log line of its own.
                let outcome = Outcome::Rejected;
                tracing::debug!(reason = %rejection, outcome = outcome.label(), "delivery refused: signature");
                outcome
            }
            Err(IngestError::Forbidden | IngestError::Challenged(_)) => {
                let outcome = Outcome::Rejected;
                tracing::debug!(outcome = outcome.label(), "post refused: signature");
                outcome
            }
            Err(IngestError::NotFound) => {
                // Unverified: no log line of its own (a scan of paths costs nothing here).
                let outcome = Outcome::UnknownPath;
                tracing::debug!(
                    outcome = outcome.label(),
                    "delivery refused: no account's path"
                );
                outcome
            }
            Err(IngestError::BacklogFull) => {
                let outcome = Outcome::BacklogFull;
                tracing::warn!(outcome = outcome.label(), "delivery refused: backlog full");
                outcome
            }
            Err(IngestError::Unavailable(error)) => {
                let outcome = Outcome::Unavailable;
                tracing::warn!(%error, outcome = outcome.label(), "delivery refused: not committed");
                outcome
            }
            Err(error) => {
                // Refused before verification or parsing: counted when too large or not JSON.
                let outcome = match error {
                    IngestError::TooLarge(_) => Some(Outcome::TooLarge),
                    IngestError::NotJson => Some(Outcome::NotJson),
                    _ => None,
                };
                let label = match (outcome, error) {
                    (Some(outcome), _) => outcome.label(),
                    (None, IngestError::BodyTimedOut(_)) => "body_timeout",
                    (None, _) => "bad_body",
                };
                if matches!(error, IngestError::NotJson) {
                    // Verified: the sender is the service, and its body is worth a line.
                    tracing::warn!(reason = %error, outcome = label, "delivery refused: body");
                } else {
                    // Before verification (too large, too slow, cut off): counted, and no
                    // line of its own, so a flood of them cannot flood the log.
                    tracing::debug!(reason = %error, outcome = label, "delivery refused: body");
                }
                outcome?
            }
        };
        Some(counted)
    }
}

/// Reads the body, refusing it as soon as it passes `limit` bytes.
async fn read_limited(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, IngestError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(IngestError::TooLarge(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(IngestError::TooLarge(limit)),
        Err(e) => Err(match crate::listener::body_timeout(&*e) {
            Some(timeout) => IngestError::BodyTimedOut(timeout),
            None => IngestError::BadBody,
        }),
    }
}

/// The key that makes a redelivery a duplicate: the event's `id`, else the Standard
/// Webhooks message id, else the SHA-256 of the exact bytes.
fn dedup_key(event_id: Option<String>, webhook_id: Option<&str>, body: &[u8]) -> String {
    match (event_id, webhook_id) {
        (Some(id), _) => format!("event:{id}"),
        (None, Some(id)) => format!("webhook:{id}"),
        (None, None) => format!("sha256:{}", hex::encode(Sha256::digest(body))),
    }
}

/// Longest `/readyz` takes to answer.
const READY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

async fn healthz() -> impl IntoResponse {
    axum::Json(serde_json::json!({"status": "ok"}))
}

async fn readyz(State(state): State<Arc<IngestState>>) -> Response {
    // Answered within READY_WAIT whatever the database does: a check that does not finish
    // by then is a database that is not ready.
    let check = async {
        let migrated = crate::store::migrations_applied(&state.pool)
            .await
            .unwrap_or(false);
        (migrated, migrated && state.writer.probe().await)
    };
    let (migrated, writable) = tokio::time::timeout(READY_WAIT, check)
        .await
        .unwrap_or((false, false));
    let body = serde_json::json!({
        "status": if writable { "ready" } else { "not ready" },
        "migrations": migrated,
        "writable": writable,
    });
    let status = if writable {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

/// Anything else: 404. A delivery posted to a path that is no account's is counted with
/// the refusals (`unknown_path`); nothing of it is read or stored.
async fn not_found(
    State(state): State<Arc<IngestState>>,
    method: axum::http::Method,
) -> IngestError {
    if method == axum::http::Method::POST {
        Answered(&Err(IngestError::NotFound)).emit(&state.metrics, None);
    }
    IngestError::NotFound
}

mod headers;
mod posted;

use headers::{headers_as_pairs, headers_as_received};

#[cfg(test)]
mod tests;
