//! The keys every table that entries go to or come from shares: a `[[subscriber]]`, a
//! `[[destination]]` and a `[[source]]` each flatten [`Scope`] (which accounts and
//! organizations it holds for, and whether its URL may be plain HTTP); a subscriber and a
//! destination, which are fed the ledger's entries, flatten [`Feed`] too (which sources'
//! entries, and the longest wait between two failed attempts). Declared, defaulted and
//! checked here once.

use serde::{Deserialize, Serialize};

use super::SettingsError;
use crate::model::{AccountId, Source};

/// Where a table's entries hold, and how far its URL is trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct Scope {
    /// Only these accounts (each a served account); empty: every account.
    #[serde(default)]
    pub accounts: Vec<String>,
    /// Only these organizations of those accounts; empty: every organization.
    #[serde(default)]
    pub organizations: Vec<String>,
    /// Its URL may be plain `http://` to a host that is not loopback.
    #[serde(default)]
    pub allow_insecure_http: bool,
}

impl Scope {
    /// The accounts of `served` it holds for.
    pub fn targets(&self, served: &[AccountId]) -> Vec<AccountId> {
        served
            .iter()
            .filter(|a| self.holds_account(a.as_str()))
            .cloned()
            .collect()
    }

    /// Whether it holds for account `account`.
    pub fn holds_account(&self, account: &str) -> bool {
        self.accounts.is_empty() || self.accounts.iter().any(|a| a == account)
    }

    /// Each account it names is served; `key` is the table's (`subscriber.accounts`), the
    /// message `named`'s.
    pub fn validate_accounts(
        &self,
        key: &'static str,
        named: &dyn Fn(&str) -> String,
        served: &[AccountId],
    ) -> Result<(), SettingsError> {
        match self
            .accounts
            .iter()
            .find(|a| !served.iter().any(|s| s == *a))
        {
            Some(unknown) => Err(SettingsError::invalid(
                key,
                named(&format!(
                    "no account {} is served (accounts: {})",
                    crate::model::text::quoted(unknown),
                    served.join(", ")
                )),
            )),
            None => Ok(()),
        }
    }
}

/// What a table fed the ledger's entries takes of them, and how it is retried.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Feed {
    /// Only entries from these sources.
    #[serde(default = "all_sources")]
    pub sources: Vec<Source>,
    /// Longest wait between two failed attempts (the backoff doubles from 1 s up to it), so
    /// that a system that comes back gets its opt-outs within seconds. Its own
    /// `Retry-After` is still honoured up to an hour.
    #[serde(default = "default_max_backoff_secs")]
    pub max_backoff_secs: u64,
}

impl Default for Feed {
    fn default() -> Self {
        Self {
            sources: all_sources(),
            max_backoff_secs: default_max_backoff_secs(),
        }
    }
}

/// Largest `max_backoff_secs`: an hour, as for a system's own `Retry-After`.
pub const MAX_BACKOFF_SECS: u64 = 3_600;

impl Feed {
    /// At least one source, and a backoff ceiling within its bounds; `keys` are the
    /// table's names of the two (`subscriber.sources`, `subscriber.max_backoff_secs`).
    pub fn validate(
        &self,
        (sources, max_backoff_secs): (&'static str, &'static str),
        named: &dyn Fn(&str) -> String,
    ) -> Result<(), SettingsError> {
        if self.sources.is_empty() {
            return Err(SettingsError::invalid(
                sources,
                named("at least one of webhook, reconcile, local, import"),
            ));
        }
        if !(1..=MAX_BACKOFF_SECS).contains(&self.max_backoff_secs) {
            return Err(SettingsError::invalid(
                max_backoff_secs,
                named(&format!("must be between 1 and {MAX_BACKOFF_SECS}")),
            ));
        }
        Ok(())
    }
}

fn all_sources() -> Vec<Source> {
    Source::ALL.to_vec()
}

fn default_max_backoff_secs() -> u64 {
    30
}
