//! The keys of a `[[source]]` of kind `bandwidth`: the callback credentials of the
//! Bandwidth application whose inbound messages it is posted. Compiled into the settings
//! layer (`crate::settings::kinds::bandwidth`): it imports the model and the settings alone.

use std::path::PathBuf;

use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};

use crate::settings::kinds::{Kind, Named, SourceKind};
use crate::settings::{SettingsError, read_secret_lines, redact_opt};

/// The keys of a Bandwidth source beside the common ones.
#[derive(Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BandwidthSettings {
    /// The application's callback user name (Bandwidth's dashboard: the application's
    /// Callback Authentication).
    #[serde(default)]
    pub username: String,
    /// Its callback password; a secret.
    #[serde(default, serialize_with = "redact_opt")]
    pub password: Option<SecretString>,
    /// A file of passwords, one a line, each accepted beside `password` (during a rotation
    /// the old and the new stand side by side).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// The file's passwords (read when the settings are, and on reload).
    #[serde(skip)]
    pub passwords: Vec<SecretString>,
}

/// Never prints a password.
impl std::fmt::Debug for BandwidthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BandwidthSettings")
            .field("username", &self.username)
            .field("password_file", &self.password_file)
            .field("passwords", &self.accepted().len())
            .finish_non_exhaustive()
    }
}

impl BandwidthSettings {
    /// Every password accepted, `password` first.
    pub fn accepted(&self) -> Vec<SecretString> {
        let mut passwords: Vec<SecretString> = self.password.iter().cloned().collect();
        passwords.extend(self.passwords.iter().cloned());
        passwords
    }
}

impl Kind for BandwidthSettings {
    const KIND: &'static str = "bandwidth";
    const KEYS: &'static [&'static str] = &["username", "password", "password_file"];
}

impl SourceKind for BandwidthSettings {
    fn source(&self) -> crate::model::Source {
        crate::model::Source::Bandwidth
    }

    fn polled(&self) -> bool {
        false
    }

    fn read_secret_files(&mut self) -> Result<(), SettingsError> {
        if let Some(path) = &self.password_file {
            self.passwords = read_secret_lines("source.password_file", path)?
                .into_iter()
                .map(SecretString::from)
                .collect();
        }
        Ok(())
    }

    /// A user name HTTP Basic can carry, and at least one password, none blank.
    fn validate(&self, _name: &str, named: Named<'_>) -> Result<(), SettingsError> {
        let username = self.username.trim();
        if username.is_empty()
            || username.contains(':')
            || username.chars().any(crate::model::text::is_unsafe_char)
        {
            return Err(SettingsError::invalid(
                "source.username",
                named(
                    "the callback user name set at Bandwidth is required, without `:` or a control character",
                ),
            ));
        }
        let passwords = self.accepted();
        if passwords.is_empty()
            || passwords
                .iter()
                .any(|p| p.expose_secret().trim().is_empty())
        {
            return Err(SettingsError::invalid(
                "source.password",
                named("a password is required (password or password_file), and none may be blank"),
            ));
        }
        Ok(())
    }
}
