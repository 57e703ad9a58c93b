//! The keys of a `[[source]]` of kind `twilio`: the token its posts are signed with and the
//! URL Twilio posts to. Compiled into the settings layer (`crate::settings::kinds::twilio`):
//! it imports the model and the settings alone.

use std::path::PathBuf;

use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};

use crate::settings::kinds::{Kind, Named, SourceKind};
use crate::settings::{SettingsError, read_secret_lines, redact_opt, urls};

/// The keys of a Twilio source beside the common ones.
#[derive(Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TwilioSettings {
    /// The Twilio account's auth token; a secret.
    #[serde(default, serialize_with = "redact_opt")]
    pub auth_token: Option<SecretString>,
    /// A file of auth tokens, one a line, each accepted beside `auth_token` (during a
    /// rotation the old and the new stand side by side).
    #[serde(default)]
    pub auth_token_file: Option<PathBuf>,
    /// The URL set at Twilio, exactly as set there (what is signed): the daemon behind a
    /// proxy cannot see it.
    #[serde(default)]
    pub public_url: String,
    /// Every token accepted: `auth_token`, then the file's lines (read when the settings
    /// are, and on reload).
    #[serde(skip)]
    pub tokens: Vec<SecretString>,
}

/// Never prints a token.
impl std::fmt::Debug for TwilioSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwilioSettings")
            .field("auth_token_file", &self.auth_token_file)
            .field("public_url", &self.public_url)
            .field("tokens", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

impl TwilioSettings {
    /// Every token accepted, `auth_token` first.
    pub fn accepted(&self) -> Vec<SecretString> {
        let mut tokens: Vec<SecretString> = self.auth_token.iter().cloned().collect();
        tokens.extend(self.tokens.iter().cloned());
        tokens
    }
}

impl Kind for TwilioSettings {
    const KIND: &'static str = "twilio";
    const KEYS: &'static [&'static str] = &["auth_token", "auth_token_file", "public_url"];
}

impl SourceKind for TwilioSettings {
    fn source(&self) -> crate::model::Source {
        crate::model::Source::Twilio
    }

    fn polled(&self) -> bool {
        false
    }

    fn read_secret_files(&mut self) -> Result<(), SettingsError> {
        if let Some(path) = &self.auth_token_file {
            self.tokens = read_secret_lines("source.auth_token_file", path)?
                .into_iter()
                .map(SecretString::from)
                .collect();
        }
        Ok(())
    }

    /// Its tokens and the URL set at Twilio.
    fn validate(&self, name: &str, named: Named<'_>) -> Result<(), SettingsError> {
        let tokens = self.accepted();
        if tokens.is_empty() || tokens.iter().any(|t| t.expose_secret().trim().is_empty()) {
            return Err(SettingsError::invalid(
                "source.auth_token",
                named(
                    "an auth token is required (auth_token or auth_token_file), and none may be blank",
                ),
            ));
        }
        urls::url(
            "source.public_url",
            &format!("source {name:?}"),
            &self.public_url,
            urls::Sends::Nothing,
        )?;
        Ok(())
    }
}
