//! The typed client of the service's v3 and v2.1 APIs: tokens, rate limit, retries, paging.
//!
//! One [`ServiceClient`] owns one `reqwest::Client`, one token (shared by every task that
//! clones the client) and one rate limiter. Every v3 endpoint is a typed method; lists come
//! as a page-at-a-time method taking a cursor (for checkpointing) and as an async stream.

mod config;
mod core;
pub use core::retry_after;
mod error;
pub mod models;
mod paging;
mod rate;
mod token;
mod v2;
mod v3;
pub mod validate;

use std::sync::Arc;

pub use config::{ClientConfig, MAX_ANSWER_BYTES};
pub use error::ClientError;
pub(crate) use paging::CursorTrail;
pub use paging::ListQuery;
pub use rate::RateLimiter;
pub use token::{MemoryTokenGuardStore, TokenGuardState, TokenGuardStore, TokenPolicy};
pub use v2::{V2Client, V2GroupScope, V2Lead, V2LeadUpdate, V2List, V2Organization, V2Pagination};

use self::core::Inner;

/// The service's API client. Cloning is cheap and shares the token and the rate limiter.
#[derive(Debug, Clone)]
pub struct ServiceClient {
    inner: Arc<Inner>,
}

impl ServiceClient {
    /// A client whose token guard lives in memory only.
    pub fn new(config: ClientConfig) -> Result<Self, ClientError> {
        Self::with_guard_store(config, Inner::memory_guard())
    }

    /// A client whose token guard (failures in a row, pause) is kept in `store`, so that it
    /// survives restarts.
    pub fn with_guard_store(
        config: ClientConfig,
        store: Arc<dyn TokenGuardStore>,
    ) -> Result<Self, ClientError> {
        Ok(Self {
            inner: Arc::new(Inner::new(config, store)?),
        })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Where this client counts the service's answers; what drives it (the reconciler, the
    /// pusher) counts its own work there too.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.inner.config.metrics
    }

    /// The account whose service this is.
    pub fn account(&self) -> &crate::model::AccountId {
        &self.inner.config.account
    }

    /// Token requests this client has made, successful or not.
    pub fn token_requests(&self) -> u64 {
        self.inner.token_requests()
    }

    /// Makes sure a token is at hand (minting one if needed): a cheap credentials check.
    pub async fn ensure_token(&self) -> Result<(), ClientError> {
        self.inner.current_token().await.map(|_| ())
    }

    /// The v2.1 endpoints, sharing this client's token and rate limiter.
    pub fn v2(&self) -> V2Client {
        V2Client {
            client: self.clone(),
        }
    }
}
