//! `POST /sources/{name}`: what a system posts to a `[[source]]` (a person's reply, as
//! Twilio's messaging webhook posts it), through the kind's [`Posted`]. Under the listener's
//! caps and timeouts, as every delivery: the body read up to the kind's largest post, then
//! verified against the source's secrets in force, in constant time, before anything is
//! kept; a post that does not verify is refused, counted, and kept only in the sample of
//! refusals. A verified post is committed to the outbox as received (its key the ledger's
//! `event_ref` of what it records, [`crate::model::read::event_ref`]) and applied as the
//! service's webhooks are; only then the kind's answer (Twilio's: an empty TwiML
//! `<Response/>`, so Twilio sends the person nothing). The listener names no kind.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};

use super::{Answered, IngestError, headers_as_pairs, headers_as_received, read_limited};
use crate::apply::InForce;
use crate::metrics::Metrics;
use crate::model::read::{event_ref, event_ref_of_bytes};
use crate::outbox::{Committed, Delivery, OutboxWriter, RejectedDelivery};
use crate::rejections::Rejections;
use crate::signature::SignatureHeader;
use crate::systems::posted::Posted;

/// The largest post of a refused one kept in the sample of refusals (`webhooks diagnose`):
/// enough for any form Twilio sends, so a misconfigured token or URL can be diagnosed, and
/// no more, so a flood of refused posts writes little.
const FORM_KEPT: usize = 16 * 1024;

/// Posts larger than this are verified on a blocking thread: parsing and signing 64 KiB of
/// sorted parameters holds a core for milliseconds (more in a debug build), and on an async
/// worker every delivery behind it would wait that long.
const VERIFIED_INLINE_BYTES: usize = 4 * 1024;

/// The index of the secret `body` verifies under, or why it does not.
async fn verify(
    (body, large_posts): (bytes::Bytes, &tokio::sync::Semaphore),
    headers: HeaderMap,
    posted: Arc<dyn Posted>,
    received_at: DateTime<Utc>,
) -> Result<usize, String> {
    if body.len() <= VERIFIED_INLINE_BYTES {
        return posted.verify(&headers, &body, received_at);
    }
    let turned_away = || "not verified: the daemon is stopping".to_owned();
    // Waiting for a turn costs nothing; a closed semaphore (never) verifies nothing.
    let Ok(_turn) = large_posts.acquire().await else {
        return Err(turned_away());
    };
    // A verification that panicked verified nothing.
    tokio::task::spawn_blocking(move || posted.verify(&headers, &body, received_at))
        .await
        .unwrap_or_else(|_| Err(turned_away()))
}

/// What the handler of posts to sources shares.
pub(super) struct PostedState {
    pub sources: InForce,
    pub writer: OutboxWriter,
    pub max_body_bytes: usize,
    pub max_backlog: u64,
    pub rejections: Arc<Rejections>,
    pub metrics: Arc<Metrics>,
    /// Large posts verified at once, at most ([`LARGE_POSTS_AT_ONCE`]): a flood of them
    /// takes one core at most, and the deliveries keep the other.
    pub large_posts: tokio::sync::Semaphore,
}

/// Large posts ([`VERIFIED_INLINE_BYTES`] and more) verified at once, at most.
pub const LARGE_POSTS_AT_ONCE: usize = 1;

/// A post to source `name`: 200 with its kind's answer once it is durable (or was before).
pub(super) async fn receive(
    State(state): State<Arc<PostedState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let (answer, reply) = match take(&state, &name, headers, body).await {
        Ok((committed, reply)) => (Ok(committed), Some(reply)),
        Err(error) => (Err(error), None),
    };
    let outcome = Answered(&answer).logged();
    match &answer {
        // Nothing of a post to no source is kept, and its name is not a label.
        Err(IngestError::NotFound) => {
            if let Some(outcome) = outcome {
                state.metrics.delivery(None, outcome);
            }
        }
        _ => {
            if let Some(outcome) = outcome {
                state.metrics.source_post(&name, outcome);
            }
        }
    }
    match (answer, reply) {
        (Ok(_), Some((content_type, body))) => {
            ([(header::CONTENT_TYPE, content_type)], body).into_response()
        }
        (Err(error), _) => error.into_response(),
        (Ok(_), None) => IngestError::NotFound.into_response(),
    }
}

/// Reads, verifies and commits one post; what the kind answers once it is durable.
#[tracing::instrument(name = "post", skip_all, fields(source = name, dedup_key))]
async fn take(
    state: &PostedState,
    name: &str,
    headers: HeaderMap,
    body: Body,
) -> Result<(Committed, (&'static str, &'static str)), IngestError> {
    let received_at = Utc::now();
    let source = state.sources.posted(name).ok_or(IngestError::NotFound)?;
    let posted = crate::systems::posted_of(&source).ok_or(IngestError::NotFound)?;
    let keeper = state.sources.keeper(&source);
    let refuse = |why: String, body: bytes::Bytes| {
        let refused = RejectedDelivery {
            account: keeper.to_string(),
            received_at,
            reason: format!("source {name:?}: {why}"),
            headers: headers_as_pairs(&headers),
            body,
        };
        state.rejections.record_keeping(refused, FORM_KEPT);
        posted
            .challenge()
            .map_or(IngestError::Forbidden, IngestError::Challenged)
    };
    // Credentials in the headers are checked before a byte of the body is read: a post
    // without them costs its headers alone.
    let early = match posted.challenge() {
        Some(_) => match posted.verify(&headers, &[], received_at) {
            Ok(index) => Some(index),
            Err(why) => return Err(refuse(why, bytes::Bytes::new())),
        },
        None => None,
    };
    let limit = state.max_body_bytes.min(posted.max_body_bytes());
    let body = read_limited(&headers, body, limit).await?;
    let secret_index = match early {
        Some(index) => index,
        None => {
            let verified = verify(
                (body.clone(), &state.large_posts),
                headers.clone(),
                posted.clone(),
                received_at,
            )
            .await;
            verified.map_err(|why| refuse(why, body.clone()))?
        }
    };
    if state.writer.state().pending() >= state.max_backlog {
        return Err(IngestError::BacklogFull);
    }
    let kind = source.system.source();
    let dedup_key = match posted.key(&body) {
        Some(key) => event_ref(kind, name, &key),
        None => event_ref_of_bytes(kind, name, &body),
    };
    tracing::Span::current().record("dedup_key", dedup_key.as_str());
    let region = state.sources.region;
    let event = crate::events::heard(name, posted.as_ref(), &body, received_at, region);
    let signature = SignatureHeader {
        name: posted.signature_header().to_owned(),
        position: 0,
    };
    let (kept, verified_header) = headers_as_received(&headers, &signature);
    let delivery = Delivery {
        account: keeper.to_string(),
        dedup_key,
        received_at,
        body,
        headers: kept,
        secret_index,
        verified_header,
    };
    let committed = state
        .writer
        .commit(delivery, event)
        .await
        .map_err(IngestError::Unavailable)?;
    Ok((committed, posted.answer()))
}
