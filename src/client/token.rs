//! Access tokens: one shared token, reused until shortly before it expires, and a guard
//! that stops asking after repeated failures and remembers that across restarts.

use std::sync::Mutex as StdMutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// What the guard must remember across restarts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenGuardState {
    /// Failed token requests since the last success.
    pub consecutive_failures: u32,
    /// No token request before this instant.
    pub blocked_until: Option<DateTime<Utc>>,
}

/// Persistence of [`TokenGuardState`]. The daemon implements it on its database so that a
/// restart loop (systemd restarting a failing daemon) cannot hammer the token endpoint, and
/// so that replicas count their failures together.
pub trait TokenGuardStore: Send + Sync + 'static {
    fn load(&self) -> BoxFuture<'_, anyhow::Result<TokenGuardState>>;

    /// Counts one more failed token request, in one step however many processes fail at
    /// once; the failure that reaches `max_consecutive_failures` sets `blocked_until` to
    /// `block_until`. Returns the state after it.
    fn record_failure(
        &self,
        max_consecutive_failures: u32,
        block_until: DateTime<Utc>,
    ) -> BoxFuture<'_, anyhow::Result<TokenGuardState>>;

    /// A token was granted: the count starts again.
    fn reset(&self) -> BoxFuture<'_, anyhow::Result<()>>;
}

/// A [`TokenGuardStore`] that forgets on exit: for tests, the sandbox and one-shot commands.
#[derive(Debug, Default)]
pub struct MemoryTokenGuardStore {
    state: StdMutex<TokenGuardState>,
}

impl MemoryTokenGuardStore {
    pub fn new(state: TokenGuardState) -> Self {
        Self {
            state: StdMutex::new(state),
        }
    }

    /// The state as last saved.
    pub fn snapshot(&self) -> TokenGuardState {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl TokenGuardStore for MemoryTokenGuardStore {
    fn load(&self) -> BoxFuture<'_, anyhow::Result<TokenGuardState>> {
        let state = self.snapshot();
        Box::pin(async move { Ok(state) })
    }

    fn record_failure(
        &self,
        max_consecutive_failures: u32,
        block_until: DateTime<Utc>,
    ) -> BoxFuture<'_, anyhow::Result<TokenGuardState>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.consecutive_failures = state.consecutive_failures.saturating_add(1);
        if state.consecutive_failures >= max_consecutive_failures {
            state.blocked_until = Some(block_until);
        }
        let after = *state;
        Box::pin(async move { Ok(after) })
    }

    fn reset(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = TokenGuardState::default();
        Box::pin(async { Ok(()) })
    }
}

/// When to stop asking for tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenPolicy {
    /// Failures in a row that pause token requests (the service blocks the address at 10).
    pub max_consecutive_failures: u32,
    /// How long the pause lasts.
    pub block_for: Duration,
    /// A token is replaced this long before it expires (at most half its lifetime).
    pub refresh_margin: Duration,
}

impl Default for TokenPolicy {
    fn default() -> Self {
        Self {
            max_consecutive_failures: 3,
            block_for: Duration::from_secs(15 * 60),
            refresh_margin: Duration::from_secs(60),
        }
    }
}

/// A token in use. Its `Debug` never shows the value.
#[derive(Clone)]
pub(crate) struct AccessToken {
    pub value: SecretString,
    /// After this the token is replaced before use.
    pub refresh_at: Instant,
    /// Counts tokens minted, so a 401 only replaces the token that was refused.
    pub generation: u64,
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessToken")
            .field("value", &"[redacted]")
            .field("generation", &self.generation)
            .finish()
    }
}

impl AccessToken {
    pub fn new(
        value: SecretString,
        expires_in: Duration,
        margin: Duration,
        generation: u64,
    ) -> Self {
        let margin = margin.min(expires_in / 2);
        Self {
            value,
            refresh_at: Instant::now() + expires_in.saturating_sub(margin),
            generation,
        }
    }

    pub fn is_fresh(&self) -> bool {
        Instant::now() < self.refresh_at
    }
}

/// The token endpoint's answer. `Debug` is written by hand so the token never prints.
#[derive(Clone, Deserialize)]
pub(crate) struct TokenResponse {
    pub access_token: SecretString,
    #[allow(dead_code)]
    #[serde(default)]
    pub token_type: Option<String>,
    pub expires_in: f64,
}

impl std::fmt::Debug for TokenResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenResponse")
            .field("access_token", &"[redacted]")
            .field("expires_in", &self.expires_in)
            .finish()
    }
}

/// The cache behind the client's token mutex.
#[derive(Debug, Default)]
pub(crate) struct TokenSlot {
    pub token: Option<AccessToken>,
    pub minted: u64,
}
