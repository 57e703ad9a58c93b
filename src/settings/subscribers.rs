//! `[[subscriber]]`: the campaign's other tools that receive every consent ledger entry.

use std::path::PathBuf;

use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};

use super::load::read_secret_file;
use super::validate::url_with_http_scheme;
use super::{SettingsError, redact_opt};
use crate::model::Source;

/// Largest `batch`: a request of 1,000 entries is about 300 KB.
pub const MAX_BATCH: u32 = 1_000;

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
    /// Only entries of these organizations; empty: every organization.
    #[serde(default)]
    pub organizations: Vec<String>,
    /// Only entries from these sources.
    #[serde(default = "all_sources")]
    pub sources: Vec<Source>,
    /// Most entries in one request.
    #[serde(default = "default_batch")]
    pub batch: u32,
}

fn all_sources() -> Vec<Source> {
    vec![Source::Webhook, Source::Reconcile, Source::Local]
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
            organizations: Vec::new(),
            sources: all_sources(),
            batch: default_batch(),
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
        let well_formed = !s.name.is_empty()
            && s.name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
        if !well_formed {
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
        if url_with_http_scheme("subscriber.url", &s.url).is_err() {
            return Err(SettingsError::invalid(
                "subscriber.url",
                named("not an http(s) URL"),
            ));
        }
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
                named("at least one of webhook, reconcile, local"),
            ));
        }
        if !(1..=MAX_BATCH).contains(&s.batch) {
            return Err(SettingsError::invalid(
                "subscriber.batch",
                named(&format!("must be between 1 and {MAX_BATCH}")),
            ));
        }
    }
    Ok(())
}
