//! `[[subscriber]]`: the campaign's other tools that receive every consent ledger entry.

use std::path::PathBuf;

use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};

use super::{SettingsError, read_secret_file, redact_opt};
use crate::model::Source;

/// Largest `batch`: a request of 1,000 entries is about 300 KB.
pub const MAX_BATCH: u32 = 1_000;
/// Largest `max_backoff_secs`: an hour, as for a subscriber's own `Retry-After`.
pub const MAX_BACKOFF_SECS: u64 = 3_600;

/// One `[[subscriber]]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SubscriberSettings {
    /// Unique, `[a-z0-9_-]+`: the name in `webhook-id`, metrics, `status` and the API.
    pub name: String,
    /// Where the entries are POSTed (http or https).
    pub url: String,
    /// The Standard Webhooks secret the requests are signed with: `whsec_` + base64.
    #[serde(default, serialize_with = "redact_opt")]
    pub secret: Option<SecretString>,
    /// A file holding the secret instead.
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// Only entries of these accounts (each a served account); empty: every account.
    #[serde(default)]
    pub accounts: Vec<String>,
    /// Only entries of these organizations; empty: every organization.
    #[serde(default)]
    pub organizations: Vec<String>,
    /// Only entries from these sources.
    #[serde(default = "all_sources")]
    pub sources: Vec<Source>,
    /// Most entries in one request.
    #[serde(default = "default_batch")]
    pub batch: u32,
    /// Longest wait between two failed attempts (the backoff doubles from 1 s up to it), so
    /// that a tool that comes back gets its opt-outs within seconds. A subscriber's own
    /// `Retry-After` is still honoured up to an hour.
    #[serde(default = "default_max_backoff_secs")]
    pub max_backoff_secs: u64,
    /// `url` may be plain `http://` to a host that is not loopback.
    #[serde(default)]
    pub allow_insecure_http: bool,
}

fn default_max_backoff_secs() -> u64 {
    30
}

fn all_sources() -> Vec<Source> {
    Source::ALL.to_vec()
}

fn default_batch() -> u32 {
    100
}

impl SubscriberSettings {
    /// A subscriber of every entry at `url`, for code that configures one itself (tests,
    /// `demo`).
    pub fn new(name: &str, url: &str, secret: &str) -> Self {
        Self {
            name: name.to_owned(),
            url: url.to_owned(),
            secret: Some(SecretString::from(secret.to_owned())),
            secret_file: None,
            accounts: Vec::new(),
            organizations: Vec::new(),
            sources: all_sources(),
            batch: default_batch(),
            max_backoff_secs: default_max_backoff_secs(),
            allow_insecure_http: false,
        }
    }

    /// The decoded signing key. Present once validated.
    pub fn key(&self) -> Option<Vec<u8>> {
        let secret = self.secret.as_ref()?.expose_secret();
        secret
            .strip_prefix("whsec_")
            .and_then(super::standard_webhooks_key)
    }
}

pub(super) use crate::model::well_formed_name;

/// Reads every subscriber's `secret_file`.
pub(super) fn read_secret_files(
    subscribers: &mut [SubscriberSettings],
) -> Result<(), SettingsError> {
    for subscriber in subscribers {
        if let Some(path) = &subscriber.secret_file {
            let text = read_secret_file("subscriber.secret_file", path)?;
            subscriber.secret = Some(SecretString::from(text.trim().to_owned()));
        }
    }
    Ok(())
}

/// Unique well-formed names, http(s) URLs, decodable `whsec_` secrets, a batch in range.
pub(super) fn validate(subscribers: &[SubscriberSettings]) -> Result<(), SettingsError> {
    let mut names = std::collections::HashSet::new();
    for s in subscribers {
        let named = |message: &str| format!("subscriber {:?}: {message}", s.name);
        if !well_formed_name(&s.name) {
            return Err(SettingsError::invalid(
                "subscriber.name",
                named("a name is one or more of a-z, 0-9, `_` and `-`"),
            ));
        }
        if !names.insert(s.name.as_str()) {
            return Err(SettingsError::invalid(
                "subscriber.name",
                named("named twice; names are unique"),
            ));
        }
        super::urls::url(
            "subscriber.url",
            &format!("subscriber {:?}", s.name),
            &s.url,
            super::urls::Sends::secret(s.allow_insecure_http),
        )?;
        if s.secret.is_none() {
            return Err(SettingsError::invalid(
                "subscriber.secret",
                named("a secret is required (or secret_file)"),
            ));
        }
        if s.key().is_none() {
            return Err(SettingsError::invalid(
                "subscriber.secret",
                named("a Standard Webhooks secret is `whsec_` followed by base64"),
            ));
        }
        if s.sources.is_empty() {
            return Err(SettingsError::invalid(
                "subscriber.sources",
                named("at least one of webhook, reconcile, local, import"),
            ));
        }
        if !(1..=MAX_BATCH).contains(&s.batch) {
            return Err(SettingsError::invalid(
                "subscriber.batch",
                named(&format!("must be between 1 and {MAX_BATCH}")),
            ));
        }
        if !(1..=MAX_BACKOFF_SECS).contains(&s.max_backoff_secs) {
            return Err(SettingsError::invalid(
                "subscriber.max_backoff_secs",
                named(&format!("must be between 1 and {MAX_BACKOFF_SECS}")),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_ceiling_outside_a_second_to_an_hour_is_refused_naming_its_key() {
        let mut subscriber = SubscriberSettings::new(
            "crm",
            "http://127.0.0.1:9/hooks",
            "whsec_c2VjcmV0LXNoYXJlZC13aXRoLXRoZS1jcm0=",
        );
        assert_eq!(subscriber.max_backoff_secs, 30, "the default");
        for wrong in [0, 3_601] {
            subscriber.max_backoff_secs = wrong;
            let error = validate(std::slice::from_ref(&subscriber)).expect_err("refused");
            assert!(
                error.to_string().contains("subscriber.max_backoff_secs"),
                "{error}"
            );
        }
        subscriber.max_backoff_secs = 3_600;
        assert!(validate(std::slice::from_ref(&subscriber)).is_ok());
    }
}
