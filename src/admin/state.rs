//! What the admin handlers share: the database, the tokens in force, the daemon's parts
//! they reach (the pusher's wake-up, the worker's counters, the senders, the metrics) and
//! the limits of the listener's heavier work.

use std::sync::Arc;

use secrecy::SecretString;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{AdminError, console, guard, import};
use crate::model::AccountId;
use crate::outbox::OutboxState;
use crate::settings::SubscriberSettings;
use crate::settings::{AdminToken, Live};
use crate::store::Pool;

/// What the admin handlers share.
pub struct AdminState {
    pub(super) pool: Pool,
    /// With their names: the actor of the local changes made with each. Replaced whole
    /// when `serve` reloads `[admin] tokens`.
    pub(super) tokens: Live<Vec<AdminToken>>,
    /// Wakes the pusher when a local change is queued.
    pub(super) wake: Arc<Notify>,
    /// The configured subscribers.
    pub(super) subscribers: Vec<SubscriberSettings>,
    /// The configured destinations.
    pub(super) destinations: Vec<crate::settings::DestinationSettings>,
    /// The sources in force (a reload replaces them).
    pub(super) sources: crate::settings::Live<Vec<crate::settings::SourceSettings>>,
    /// The callers in force (reloaded).
    pub(super) callers: crate::settings::Live<Vec<crate::model::caller::Caller>>,
    /// Cancelled when the daemon stops: long-lived answers (the stream, `wait=`) end then.
    pub(super) stop: CancellationToken,
    /// This process's outbox counters: a replay from the console wakes its worker.
    pub(super) outbox: Option<Arc<OutboxState>>,
    /// The subscribers' senders while this process leads: a retry asks them at once.
    pub(super) senders: Option<crate::sender::Running>,
    /// Failed tokens and sign-ins, limited per client address.
    pub(super) failed_auth: Arc<guard::FailedAuth>,
    /// Opt-out lists uploaded on the console, previewed and waiting for a confirmation.
    pub(super) pending_imports: console::PendingImports,
    /// Imports and console previews in flight, a few at a time.
    pub(super) imports: import::ImportSlots,
    /// What the compliance report measures against: the deadline's calendar, the
    /// subscribers.
    pub(super) compliance: Arc<crate::compliance::Rules>,
    /// Reports and batch lookups: a few at a time, on connections of their own.
    pub(super) long_reads: crate::store::LongReads,
    /// The daemon's metrics: `/metrics` shows them, failed credentials are counted there.
    pub(super) metrics: Arc<crate::metrics::Metrics>,
    /// The accounts served, the first the one local changes and imports are recorded in
    /// unless another is named.
    pub(super) accounts: Vec<AccountId>,
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
            destinations: Vec::new(),
            sources: crate::settings::Live::new(Vec::new()),
            callers: crate::settings::Live::new(Vec::new()),
            stop: CancellationToken::new(),
            outbox: None,
            senders: None,
            failed_auth: Arc::new(guard::FailedAuth::new(
                crate::settings::DEFAULT_FAILED_AUTH_PER_MINUTE,
            )),
            pending_imports: console::PendingImports::default(),
            imports: import::ImportSlots::default(),
            compliance: Arc::new(crate::compliance::Rules::default()),
            metrics: Arc::default(),
            accounts: vec![AccountId::default_account()],
        }
    }

    /// The account of what names none (the console's changes and imports).
    pub fn first_account(&self) -> AccountId {
        self.accounts.first().cloned().unwrap_or_default()
    }

    /// Serves `accounts` (not empty: the first takes what names none).
    pub fn with_accounts(mut self, accounts: Vec<AccountId>) -> Self {
        if !accounts.is_empty() {
            self.accounts = accounts;
        }
        self
    }

    /// The account a change or import is recorded in: `requested`, which must be served
    /// (404 otherwise, as for any other thing named that does not exist), or the first
    /// account.
    pub fn account(&self, requested: Option<&str>) -> Result<AccountId, AdminError> {
        let Some(name) = requested else {
            return Ok(self.first_account());
        };
        if let Some(problem) = crate::model::id_problem("accountId", name) {
            return Err(AdminError::BadRequest(problem));
        }
        if let Some(served) = self.accounts.iter().find(|a| **a == *name) {
            return Ok(served.clone());
        }
        let served: Vec<&str> = self.accounts.iter().map(AccountId::as_str).collect();
        Err(AdminError::NotFound(format!(
            "accountId: no account {} is served (accounts: {})",
            crate::model::text::bounded(name, crate::model::MAX_ID_CHARS),
            served.join(", ")
        )))
    }

    /// Shows `metrics` on `/metrics`, and counts failed credentials there.
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = metrics;
        self
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
    pub fn with_senders(mut self, senders: crate::sender::Running) -> Self {
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

    /// Shows (and retries, replays, checks) these destinations.
    pub fn with_sources(
        mut self,
        sources: crate::settings::Live<Vec<crate::settings::SourceSettings>>,
    ) -> Self {
        self.sources = sources;
        self
    }

    /// Shows these callers.
    pub fn with_callers(
        mut self,
        callers: crate::settings::Live<Vec<crate::model::caller::Caller>>,
    ) -> Self {
        self.callers = callers;
        self
    }

    pub fn with_destinations(
        mut self,
        destinations: Vec<crate::settings::DestinationSettings>,
    ) -> Self {
        self.destinations = destinations;
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
