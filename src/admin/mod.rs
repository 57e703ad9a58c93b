//! The admin listener: the consent ledger, the mirror and the daemon's state over HTTP for
//! the campaign's other tools, on localhost by default. Every `/v1` route needs a bearer
//! token from `admin.tokens`; `/healthz` and `/metrics` need none.
//!
//! With no token configured the listener still starts (ingest must not stop because of
//! it) and logs a warning, but every `/v1` request is refused with 401.
//!
//! The router and the OpenAPI document are both generated from the handlers and their
//! records (`api`), so they cannot disagree.

mod api;
mod auth;
mod compliance;
mod consent;
mod console;
mod error;
mod evidence;
pub mod guard;
mod import;
mod records;
mod schemas;
mod stream;
mod subscribers;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use secrecy::SecretString;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use api::openapi_document;
pub use error::{AdminError, BUSY_RETRY_SECS};

use crate::outbox::OutboxState;
use crate::settings::SubscriberSettings;
use crate::settings::{AdminToken, Live};
use crate::store::Pool;

/// Largest request body: a 10,000-number lookup is about 200 KB.
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// What the admin handlers share.
pub struct AdminState {
    pool: Pool,
    /// With their names: the actor of the local changes made with each. Replaced whole
    /// when `serve` reloads `[admin] tokens`.
    tokens: Live<Vec<AdminToken>>,
    /// Wakes the pusher when a local change is queued.
    wake: Arc<Notify>,
    /// The configured subscribers.
    subscribers: Vec<SubscriberSettings>,
    /// Cancelled when the daemon stops: long-lived answers (the stream, `wait=`) end then.
    stop: CancellationToken,
    /// This process's outbox counters: a replay from the console wakes its worker.
    outbox: Option<Arc<OutboxState>>,
    /// The subscribers' senders while this process leads: a retry asks them at once.
    senders: Option<crate::subscribers::Running>,
    /// Failed tokens and sign-ins, limited per client address.
    failed_auth: Arc<guard::FailedAuth>,
    /// Opt-out lists uploaded on the console, previewed and waiting for a confirmation.
    pending_imports: console::PendingImports,
    /// Imports and console previews in flight, a few at a time.
    imports: import::ImportSlots,
    /// What the compliance report measures against: the deadline's calendar, the
    /// subscribers.
    compliance: Arc<crate::compliance::Rules>,
    /// Reports and batch lookups: a few at a time, on connections of their own.
    long_reads: crate::store::LongReads,
}

impl AdminState {
    pub fn new(pool: impl Into<Pool>, tokens: Vec<SecretString>, wake: Arc<Notify>) -> Self {
        let pool = pool.into();
        Self {
            long_reads: crate::store::LongReads::new(pool.clone()),
            pool,
            tokens: Live::new(
                tokens
                    .iter()
                    .enumerate()
                    .map(|(i, token)| AdminToken::parse(token, i + 1))
                    .collect(),
            ),
            wake,
            subscribers: Vec::new(),
            stop: CancellationToken::new(),
            outbox: None,
            senders: None,
            failed_auth: Arc::new(guard::FailedAuth::new(
                crate::settings::DEFAULT_FAILED_AUTH_PER_MINUTE,
            )),
            pending_imports: console::PendingImports::default(),
            imports: import::ImportSlots::default(),
            compliance: Arc::new(crate::compliance::Rules::default()),
        }
    }

    /// Takes the tokens in force from `tokens`, which a reload replaces.
    pub fn with_tokens(mut self, tokens: Live<Vec<AdminToken>>) -> Self {
        self.tokens = tokens;
        self
    }

    /// Limits failed credentials to `per_minute` per client address.
    pub fn with_failed_auth_limit(mut self, per_minute: u32) -> Self {
        self.failed_auth = Arc::new(guard::FailedAuth::new(per_minute));
        self
    }

    /// Retries at once through these senders (the ones running in this process).
    pub fn with_senders(mut self, senders: crate::subscribers::Running) -> Self {
        self.senders = Some(senders);
        self
    }

    /// Wakes this worker when the console replays a delivery.
    pub fn with_outbox(mut self, outbox: Arc<OutboxState>) -> Self {
        self.outbox = Some(outbox);
        self
    }

    /// Ends long-lived answers when `stop` is cancelled.
    pub fn with_stop(mut self, stop: CancellationToken) -> Self {
        self.stop = stop;
        self
    }

    /// Shows (and replays) these subscribers.
    pub fn with_subscribers(mut self, subscribers: Vec<SubscriberSettings>) -> Self {
        self.subscribers = subscribers;
        self
    }

    /// Runs long reads on `pool` (of their own: [`crate::store::open_long_reads`]).
    pub fn with_long_reads(mut self, pool: Pool) -> Self {
        self.long_reads = crate::store::LongReads::new(pool);
        self
    }

    /// A place on the long reads' path, or [`AdminError::Busy`].
    pub fn long_read(&self) -> Result<crate::store::LongRead, AdminError> {
        self.long_reads.try_start().ok_or(AdminError::Busy)
    }

    /// Measures the compliance report against `rules`.
    pub fn with_compliance(mut self, rules: crate::compliance::Rules) -> Self {
        self.compliance = Arc::new(rules);
        self
    }
}

/// Runs `work` (a report, an import: long, and heavy between its awaits) on a thread of its
/// own rather than on the async workers, which answer every request, acknowledgements
/// included; its reads and writes still go through the runtime.
pub fn off_the_workers<F>(work: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || runtime.block_on(work))
}

/// The admin router over `state`.
pub fn router(state: AdminState) -> Router {
    if state.tokens.current().is_empty() {
        tracing::warn!(
            "admin.tokens is empty: every /v1 request of the admin listener is refused (401)"
        );
    }
    let state = Arc::new(state);
    let (public, with_token, _) = api::routes();
    // Unknown paths need a token too (the fallback is behind the check), so the listener
    // does not tell strangers what it serves.
    let with_token = with_token
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    let public = public.method_not_allowed_fallback(error::method_not_allowed);
    // The console signs in with a token too, but keeps it in a session of its own.
    console::router()
        .merge(public)
        .merge(with_token)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}
