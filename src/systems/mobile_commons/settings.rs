//! The keys of kind `mobile_commons` (Upland Mobile Commons' REST API): the login HTTP Basic
//! takes, and the company of an account that holds several. Compiled into the settings
//! layer (`crate::settings::kinds::mobile_commons`): it imports the model and the settings
//! alone.

use std::path::PathBuf;

use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};

use crate::settings::kinds::{Kind, Named, SourceKind};
use crate::settings::{SettingsError, read_secret_file, redact_opt};

/// The keys of a Mobile Commons source beside the common ones.
#[derive(Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MobileCommonsSettings {
    /// The login's email address, HTTP Basic's user.
    #[serde(default)]
    pub username: String,
    /// Its password; a secret.
    #[serde(default, serialize_with = "redact_opt")]
    pub password: Option<SecretString>,
    /// A file holding the password instead.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// The company (Mobile Commons' `company` parameter) when the login reaches several;
    /// empty: the login's one company.
    #[serde(default)]
    pub company: String,
}

/// Never prints the password.
impl std::fmt::Debug for MobileCommonsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MobileCommonsSettings")
            .field("username", &self.username)
            .field("password_file", &self.password_file)
            .field("company", &self.company)
            .finish_non_exhaustive()
    }
}

impl Kind for MobileCommonsSettings {
    const KIND: &'static str = "mobile_commons";
    const KEYS: &'static [&'static str] = &["username", "password", "password_file", "company"];
}

impl SourceKind for MobileCommonsSettings {
    fn source(&self) -> crate::model::Source {
        crate::model::Source::MobileCommons
    }

    fn read_secret_files(&mut self) -> Result<(), SettingsError> {
        if let Some(path) = &self.password_file {
            let text = read_secret_file("source.password_file", path)?;
            self.password = Some(SecretString::from(text.trim().to_owned()));
        }
        Ok(())
    }

    /// The password, HTTP Basic's: the key the reads are sent with.
    fn own_secret(&self) -> Option<(&'static str, Option<&SecretString>)> {
        Some(("source.password", self.password.as_ref()))
    }

    /// A user name HTTP Basic can carry (an email address has no `:`), and a company of
    /// digits when given.
    fn validate(&self, _name: &str, named: Named<'_>) -> Result<(), SettingsError> {
        let username = self.username.trim();
        if username.is_empty()
            || username.contains(':')
            || username.chars().any(crate::model::text::is_unsafe_char)
        {
            return Err(SettingsError::invalid(
                "source.username",
                named("the login's email address is required (no `:`, no control character)"),
            ));
        }
        let company = self.company.trim();
        if !company.is_empty() && !company.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(SettingsError::invalid(
                "source.company",
                named("the company's id, letters and digits"),
            ));
        }
        if self
            .password
            .as_ref()
            .is_some_and(|p| p.expose_secret().trim().is_empty())
        {
            return Err(SettingsError::invalid(
                "source.password",
                named("the password is blank"),
            ));
        }
        Ok(())
    }
}
