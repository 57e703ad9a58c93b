//! What a client needs to know: where the service is, who we are, and how patient to be.

use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;

use super::error::ClientError;
use super::token::TokenPolicy;
use crate::metrics::Metrics;
use crate::model::AccountId;
use crate::settings::{ApiVersion, ServiceSettings};

/// Largest answer the client reads from the service, in bytes. The largest legitimate one
/// is a page of 1,000 leads (v3 or v2), a few megabytes even with long notes and many
/// custom fields; past this the answer is refused rather than held in memory.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// Client configuration. Secrets are `SecretString`, so `Debug` redacts them.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The service's `{base_url}`, without `/v3` or `/v2`: paths add the version.
    pub base_url: String,
    /// Which version's token endpoint mints the token.
    pub api_version: ApiVersion,
    pub client_id: String,
    pub client_secret: SecretString,
    /// Upper bound on requests per second across every task; 0 disables the limiter.
    pub requests_per_second: u32,
    /// Requests that may leave back to back after a quiet spell.
    pub burst: u32,
    /// Whole-request timeout.
    pub timeout: Duration,
    /// Retries of a 429, 5xx, timeout or connection error before giving up.
    pub max_retries: u32,
    /// First backoff; doubles per retry, with jitter, up to `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// A `Retry-After` longer than this is cut to it.
    pub retry_after_max: Duration,
    pub token_policy: TokenPolicy,
    /// Largest answer read, in bytes ([`MAX_ANSWER_BYTES`]); a larger one fails the request.
    pub max_answer_bytes: usize,
    /// Where the service's answers are counted: the daemon's metrics (by default a registry
    /// of the client's own, which no scrape shows).
    pub metrics: Arc<Metrics>,
    /// The account whose service this is: the `account` label of what is counted.
    pub account: AccountId,
}

impl ClientConfig {
    pub fn new(
        base_url: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: SecretString,
    ) -> Self {
        Self {
            base_url: base_url.into(),
            api_version: ApiVersion::V3,
            client_id: client_id.into(),
            client_secret,
            requests_per_second: 20,
            burst: 1,
            timeout: Duration::from_secs(30),
            max_retries: 5,
            backoff_base: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
            retry_after_max: Duration::from_secs(300),
            token_policy: TokenPolicy::default(),
            max_answer_bytes: MAX_ANSWER_BYTES,
            metrics: Arc::default(),
            account: AccountId::default_account(),
        }
    }

    /// Counts the service's answers in `metrics`, as `account`'s.
    pub fn counted_in(mut self, metrics: Arc<Metrics>, account: &AccountId) -> Self {
        self.metrics = metrics;
        self.account = account.clone();
        self
    }

    /// From the `[service]` section; the client secret must be present.
    pub fn from_settings(settings: &ServiceSettings) -> Result<Self, ClientError> {
        let secret = settings.client_secret.clone().ok_or_else(|| {
            ClientError::invalid(
                "service.client_secret",
                "required (or service.client_secret_file)",
            )
        })?;
        let mut config = Self::new(&settings.base_url, &settings.client_id, secret);
        config.api_version = settings.api_version;
        config.requests_per_second = settings.requests_per_second;
        config.timeout = Duration::from_secs(settings.timeout_secs.max(1));
        Ok(config)
    }

    /// Fast retries and no rate limit: for tests against the sandbox.
    pub fn for_tests(mut self) -> Self {
        self.requests_per_second = 0;
        self.backoff_base = Duration::from_millis(1);
        self.backoff_max = Duration::from_millis(20);
        self.retry_after_max = Duration::from_millis(50);
        self.timeout = Duration::from_secs(10);
        self
    }
}
