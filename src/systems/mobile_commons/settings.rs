//! The keys of kind `mobile_commons` (Upland Mobile Commons' REST API), a `[[source]]`'s and
//! a `[[destination]]`'s: the login HTTP Basic takes, or the company's API token (a bearer
//! token, for a company whose logins moved to Upland's credential manager), and the company
//! of an account that holds several. Compiled into the settings layer (`crate::settings::kinds::mobile_commons`):
//! it imports the model and the settings alone.

use std::path::PathBuf;

use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};

use crate::settings::kinds::{Foreign, Kind, KindSettings, Named, OwnSecret, SourceKind};
use crate::settings::{SettingsError, read_secret_file, redact_opt};

/// The keys of a Mobile Commons source or destination beside the common ones.
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
    /// The company's API token, sent as `Authorization: Bearer` instead of the login; a
    /// secret.
    #[serde(default, serialize_with = "redact_opt")]
    pub token: Option<SecretString>,
    /// A file holding the token instead.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// The company (Mobile Commons' `company` parameter) when the login reaches several;
    /// empty: the login's one company.
    #[serde(default)]
    pub company: String,
}

/// Never prints the password nor the token.
impl std::fmt::Debug for MobileCommonsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MobileCommonsSettings")
            .field("username", &self.username)
            .field("password_file", &self.password_file)
            .field("token_file", &self.token_file)
            .field("company", &self.company)
            .finish_non_exhaustive()
    }
}

impl Kind for MobileCommonsSettings {
    const KIND: &'static str = "mobile_commons";
    const KEYS: &'static [&'static str] = &[
        "username",
        "password",
        "password_file",
        "token",
        "token_file",
        "company",
    ];
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
        if let Some(path) = &self.token_file {
            let text = read_secret_file("source.token_file", path)?;
            self.token = Some(SecretString::from(text.trim().to_owned()));
        }
        Ok(())
    }

    /// The token, when one is given, else the password, HTTP Basic's: the key the reads
    /// are sent with.
    fn own_secret(&self) -> Option<(&'static str, Option<&SecretString>)> {
        Some(match self.bearer() {
            true => ("source.token", self.token.as_ref()),
            false => ("source.password", self.password.as_ref()),
        })
    }

    fn validate(&self, _name: &str, named: Named<'_>) -> Result<(), SettingsError> {
        self.validate_login(&SOURCE_KEYS, named)
    }

    fn login(&self) -> Option<String> {
        Some(self.user_and_company())
    }
}

impl KindSettings for MobileCommonsSettings {
    /// None: the struct refuses an unknown key as it is read.
    fn foreign(&self) -> &Foreign {
        static NONE: Foreign = Foreign(Vec::new());
        &NONE
    }

    /// The token or its file, when one is given, else the password or its file, HTTP
    /// Basic's: the destination's key.
    fn own_secret(&self) -> Option<OwnSecret<'_>> {
        Some(match self.bearer() {
            true => OwnSecret {
                inline_key: Some("destination.token"),
                inline: self.token.as_ref(),
                file_key: "destination.token_file",
                file: self.token_file.as_ref(),
            },
            false => OwnSecret {
                inline_key: Some("destination.password"),
                inline: self.password.as_ref(),
                file_key: "destination.password_file",
                file: self.password_file.as_ref(),
            },
        })
    }

    /// `profile_opt_out` is all Mobile Commons' API writes of consent.
    fn writes_opt_ins(&self) -> bool {
        false
    }

    fn login(&self) -> Option<String> {
        Some(self.user_and_company())
    }

    fn validate(&self, named: Named<'_>) -> Result<(), SettingsError> {
        self.validate_login(&DESTINATION_KEYS, named)
    }
}

/// The names its checks give its keys, in a table of each side.
struct Keys {
    username: &'static str,
    company: &'static str,
    password: &'static str,
    token: &'static str,
}

const SOURCE_KEYS: Keys = Keys {
    username: "source.username",
    company: "source.company",
    password: "source.password",
    token: "source.token",
};

const DESTINATION_KEYS: Keys = Keys {
    username: "destination.username",
    company: "destination.company",
    password: "destination.password",
    token: "destination.token",
};

impl MobileCommonsSettings {
    /// The login and company its key is used as: a source reads what a destination writes
    /// only when both are the same.
    fn user_and_company(&self) -> String {
        match self.bearer() {
            true => format!("token {}", self.company.trim()),
            false => format!("{} {}", self.username.trim(), self.company.trim()),
        }
    }

    /// Whether it is reached with the company's API token (`token` or `token_file`), as a
    /// bearer, rather than the login.
    pub fn bearer(&self) -> bool {
        self.token.is_some() || self.token_file.is_some()
    }

    /// A token alone, or a user name HTTP Basic can carry (an email address has no `:`)
    /// with its password; a company of letters and digits when given; no blank secret.
    fn validate_login(&self, keys: &Keys, named: Named<'_>) -> Result<(), SettingsError> {
        let login = !self.username.trim().is_empty()
            || self.password.is_some()
            || self.password_file.is_some();
        if self.bearer() && login {
            return Err(SettingsError::invalid(
                keys.token,
                named("a token, or a username and password: not both"),
            ));
        }
        if self
            .token
            .as_ref()
            .is_some_and(|t| t.expose_secret().trim().is_empty())
        {
            return Err(SettingsError::invalid(
                keys.token,
                named("the token is blank"),
            ));
        }
        let username = self.username.trim();
        if self.bearer() {
            return self.validate_company(keys, named);
        }
        if username.is_empty()
            || username.contains(':')
            || username.chars().any(crate::model::text::is_unsafe_char)
        {
            return Err(SettingsError::invalid(
                keys.username,
                named("the login's email address is required (no `:`, no control character)"),
            ));
        }
        self.validate_company(keys, named)?;
        if self
            .password
            .as_ref()
            .is_some_and(|p| p.expose_secret().trim().is_empty())
        {
            return Err(SettingsError::invalid(
                keys.password,
                named("the password is blank"),
            ));
        }
        Ok(())
    }

    /// A company of letters and digits, when given.
    fn validate_company(&self, keys: &Keys, named: Named<'_>) -> Result<(), SettingsError> {
        let company = self.company.trim();
        if !company.is_empty() && !company.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(SettingsError::invalid(
                keys.company,
                named("the company's id, letters and digits"),
            ));
        }
        Ok(())
    }
}
