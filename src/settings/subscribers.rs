//! `[[subscriber]]`: the campaign's other tools that receive every consent ledger entry.

use std::path::PathBuf;

use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};

use super::kinds::Foreign;
use super::{Feed, Scope, SettingsError, read_secret_file, redact_opt};

/// Largest `batch`: a request of 1,000 entries is about 300 KB.
pub const MAX_BATCH: u32 = 1_000;

/// One `[[subscriber]]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
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
    /// Most entries in one request.
    #[serde(default = "default_batch")]
    pub batch: u32,
    /// Its accounts, organizations and whether `url` may be plain HTTP.
    #[serde(flatten)]
    pub scope: Scope,
    /// Which sources' entries, and the longest wait between two failed attempts.
    #[serde(flatten)]
    pub feed: Feed,
    /// Any other key: refused by name when the settings are checked.
    #[serde(flatten)]
    pub foreign: Foreign,
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
            batch: default_batch(),
            scope: Scope::default(),
            feed: Feed::default(),
            foreign: Foreign::default(),
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
        if let Some(key) = s.foreign.0.first() {
            return Err(SettingsError::invalid(
                "subscriber",
                named(&format!("unknown field `{key}`")),
            ));
        }
        super::urls::url(
            "subscriber.url",
            &format!("subscriber {:?}", s.name),
            &s.url,
            super::urls::Sends::secret(s.scope.allow_insecure_http),
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
        s.feed.validate(
            ("subscriber.sources", "subscriber.max_backoff_secs"),
            &named,
        )?;
        if !(1..=MAX_BATCH).contains(&s.batch) {
            return Err(SettingsError::invalid(
                "subscriber.batch",
                named(&format!("must be between 1 and {MAX_BATCH}")),
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
        assert_eq!(subscriber.feed.max_backoff_secs, 30, "the default");
        for wrong in [0, 3_601] {
            subscriber.feed.max_backoff_secs = wrong;
            let error = validate(std::slice::from_ref(&subscriber)).expect_err("refused");
            assert!(
                error.to_string().contains("subscriber.max_backoff_secs"),
                "{error}"
            );
        }
        subscriber.feed.max_backoff_secs = 3_600;
        assert!(validate(std::slice::from_ref(&subscriber)).is_ok());
    }
}
