//! `POST /sources/{name}`: replies a system posts to a `[[source]]` (Twilio's messaging
//! webhook, form-encoded, signed with `X-Twilio-Signature`). Under the listener's caps and
//! timeouts, as every delivery: the body read up to [`MAX_FORM_BYTES`], the signature checked
//! against the source's tokens for its `public_url`, in constant time, before anything is
//! kept; a post that does not verify is 403, counted, and kept only in the sample of
//! refusals. A verified post is committed to the outbox as received (its key the ledger's
//! `event_ref` of what it records, [`crate::systems::twilio::key`]) and applied as the
//! service's webhooks are; only then the answer: an empty TwiML `<Response/>`, so Twilio
//! sends the person nothing.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use secrecy::ExposeSecret as _;

use super::{Answered, IngestError, headers_as_pairs, headers_as_received, read_limited};
use crate::apply::InForce;
use crate::metrics::Metrics;
use crate::outbox::{Committed, Delivery, OutboxWriter, RejectedDelivery};
use crate::rejections::Rejections;
use crate::settings::SourceSystem;
use crate::signature::SignatureHeader;
use crate::signature::twilio;

/// The largest form a source takes (or `[ingest] max_body_bytes`, when smaller). Twilio's
/// messaging webhook posts a few dozen parameters: a text of 1,600 characters and ten media
/// URLs come to well under 16 KiB. Anything larger is refused before a byte of it is
/// verified, so a flood of large forms costs what it costs to refuse it.
pub const MAX_FORM_BYTES: usize = 64 * 1024;

/// The largest form of a refused post kept in the sample of refusals (`webhooks diagnose`):
/// enough for any form Twilio sends, so a misconfigured token or URL can be diagnosed, and
/// no more, so a flood of refused forms writes little.
const FORM_KEPT: usize = 16 * 1024;

/// The answer to a post taken: TwiML that asks Twilio to send nothing.
pub const EMPTY_TWIML: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response/>";

/// Forms larger than this are verified on a blocking thread: parsing and signing 64 KiB of
/// sorted parameters holds a core for milliseconds (more in a debug build), and on an async
/// worker every delivery behind it would wait that long.
const VERIFIED_INLINE_BYTES: usize = 4 * 1024;

/// The form's parameters, and the index of the token its `signature` verifies under (none
/// when it does not).
async fn verify(
    (body, large_forms): (bytes::Bytes, &tokio::sync::Semaphore),
    signature: Option<String>,
    tokens: Vec<secrecy::SecretString>,
    public_url: String,
) -> (Vec<(String, String)>, Option<usize>) {
    let inline = body.len() <= VERIFIED_INLINE_BYTES;
    let work = move || {
        let params = twilio::form_params(&body);
        let token_bytes: Vec<&[u8]> = tokens
            .iter()
            .map(|t| t.expose_secret().as_bytes())
            .collect();
        let verified =
            signature.and_then(|value| twilio::verify(&token_bytes, &public_url, &params, &value));
        (params, verified)
    };
    if inline {
        return work();
    }
    // Waiting for a turn costs nothing; a closed semaphore (never) verifies nothing.
    let Ok(_turn) = large_forms.acquire().await else {
        return (Vec::new(), None);
    };
    // A verification that panicked verified nothing.
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|_| (Vec::new(), None))
}

/// What the handler of posts to sources shares.
pub(super) struct PostedState {
    pub sources: InForce,
    pub writer: OutboxWriter,
    pub max_body_bytes: usize,
    pub max_backlog: u64,
    pub rejections: Arc<Rejections>,
    pub metrics: Arc<Metrics>,
    /// Large forms verified at once, at most ([`LARGE_FORMS_AT_ONCE`]): a flood of them
    /// takes one core at most, and the deliveries keep the other.
    pub large_forms: tokio::sync::Semaphore,
}

/// Large forms ([`VERIFIED_INLINE_BYTES`] and more) verified at once, at most.
pub const LARGE_FORMS_AT_ONCE: usize = 1;

/// A post to source `name`: 200 with [`EMPTY_TWIML`] once it is durable (or was before).
pub(super) async fn receive(
    State(state): State<Arc<PostedState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let answer = take(&state, &name, headers, body).await;
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
    match answer {
        Ok(_) => ([(header::CONTENT_TYPE, "text/xml")], EMPTY_TWIML).into_response(),
        Err(error) => error.into_response(),
    }
}

/// Reads, verifies and commits one post.
#[tracing::instrument(name = "post", skip_all, fields(source = name, dedup_key))]
async fn take(
    state: &PostedState,
    name: &str,
    headers: HeaderMap,
    body: Body,
) -> Result<Committed, IngestError> {
    let received_at = Utc::now();
    let source = state.sources.posted(name).ok_or(IngestError::NotFound)?;
    let SourceSystem::Twilio(twilio) = &source.system else {
        return Err(IngestError::NotFound);
    };
    let keeper = state.sources.keeper(&source);
    let limit = state.max_body_bytes.min(MAX_FORM_BYTES);
    let body = read_limited(&headers, body, limit).await?;
    let mut signatures = headers.get_all(twilio::HEADER).iter();
    let signature = match (signatures.next(), signatures.next()) {
        (Some(value), None) => value.to_str().ok().map(str::to_owned),
        _ => None,
    };
    let (params, verified) = verify(
        (body.clone(), &state.large_forms),
        signature,
        twilio.accepted(),
        twilio.public_url.clone(),
    )
    .await;
    let Some(token_index) = verified else {
        let refused = RejectedDelivery {
            account: keeper.to_string(),
            received_at,
            reason: format!(
                "source {name:?}: X-Twilio-Signature is missing, given twice, or not the \
                 signature of this form for its public_url under any of its tokens"
            ),
            headers: headers_as_pairs(&headers),
            body,
        };
        state.rejections.record_keeping(refused, FORM_KEPT);
        return Err(IngestError::Forbidden);
    };
    if state.writer.state().pending() >= state.max_backlog {
        return Err(IngestError::BacklogFull);
    }
    let dedup_key = crate::systems::twilio::key(name, &params, &body);
    tracing::Span::current().record("dedup_key", dedup_key.as_str());
    let words = (state.sources.region, twilio.opt_out_words.as_slice());
    let event = crate::events::heard(name, &body, received_at, words);
    let signature = SignatureHeader {
        name: twilio::HEADER.to_owned(),
        position: 0,
    };
    let (kept, verified_header) = headers_as_received(&headers, &signature);
    let delivery = Delivery {
        account: keeper.to_string(),
        dedup_key,
        received_at,
        body,
        headers: kept,
        secret_index: token_index,
        verified_header,
    };
    state
        .writer
        .commit(delivery, event)
        .await
        .map_err(IngestError::Unavailable)
}
