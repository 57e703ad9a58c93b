//! `[[destination]]`: the campaign's systems of record (NGP VAN / EveryAction, Action
//! Network), each written every opt-out in its own API.

use std::path::PathBuf;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::subscribers::{MAX_BACKOFF_SECS, well_formed_name};
use super::{SettingsError, read_secret_file, redact_opt};
use crate::model::Source;

/// Most requests per second a destination may be configured to take.
pub const MAX_REQUESTS_PER_SECOND: u32 = 10_000;

/// Which system a destination is, and so which API it is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DestinationKind {
    /// NGP VAN / EveryAction, API v4.
    Van,
    /// Action Network, API v2.
    ActionNetwork,
}

impl DestinationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Van => "van",
            Self::ActionNetwork => "action_network",
        }
    }
}

/// What is written into VAN for each entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VanAction {
    /// A canvass response with the configured result code ("Do Not Text").
    CanvassResult,
    /// The phone's opt-in status (`O`, or `I` for an opt-in).
    PhoneStatus,
}

/// One `[[destination]]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DestinationSettings {
    /// Unique among subscribers and destinations, `[a-z0-9_-]+`.
    pub name: String,
    pub kind: DestinationKind,
    /// The API's root: `https://api.securevan.com/v4`, `https://actionnetwork.org/api/v2`.
    pub base_url: String,
    /// The API key; a secret.
    #[serde(default, serialize_with = "redact_opt")]
    pub api_key: Option<SecretString>,
    /// A file holding the API key instead.
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// Only entries of these accounts (each a served account); empty: every account. A
    /// VAN destination names its accounts when several are served: a VAN key is one
    /// committee's, and a VAN ID means a person only there.
    #[serde(default)]
    pub accounts: Vec<String>,
    /// Only entries of these organizations; empty: every organization.
    #[serde(default)]
    pub organizations: Vec<String>,
    /// Only entries from these sources.
    #[serde(default = "all_sources")]
    pub sources: Vec<Source>,
    /// Longest wait for an answer to a request; no answer is an unknown answer (the action
    /// is sent once more at most).
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// Opt-ins are written too (VAN: the phone's status `I` alone).
    #[serde(default)]
    pub opt_ins: bool,
    /// Most requests a second the destination is sent.
    #[serde(default = "default_requests_per_second")]
    pub requests_per_second: u32,
    /// Longest wait between two failed attempts.
    #[serde(default = "default_max_backoff_secs")]
    pub max_backoff_secs: u64,
    /// VAN: the user of HTTP Basic.
    #[serde(default)]
    pub application_name: Option<String>,
    /// VAN: 1 (MyCampaign / EveryAction) or 0 (MyVoters), after the key's `|`.
    #[serde(default)]
    pub database_mode: Option<u8>,
    /// VAN: the lead's custom field that holds its VAN ID.
    #[serde(default)]
    pub van_id_field: Option<String>,
    /// VAN: the canvass result code, by name.
    #[serde(default)]
    pub result_code: Option<String>,
    /// VAN: the contact type of the canvass response, by name.
    #[serde(default)]
    pub contact_type: Option<String>,
    /// VAN: what is written for each entry.
    #[serde(default)]
    pub actions: Option<Vec<VanAction>>,
    /// `base_url` may be plain `http://` to a host that is not loopback.
    #[serde(default)]
    pub allow_insecure_http: bool,
}

fn all_sources() -> Vec<Source> {
    Source::ALL.to_vec()
}

fn default_requests_per_second() -> u32 {
    5
}

fn default_max_backoff_secs() -> u64 {
    30
}

fn default_timeout_secs() -> u64 {
    30
}

/// Longest `timeout_secs`.
pub const MAX_TIMEOUT_SECS: u64 = 300;

/// Each destination's API key, by name: what a reload replaces.
pub type DestinationKeys = std::collections::BTreeMap<String, SecretString>;

/// The keys of `destinations`.
pub fn keys_of(destinations: &[DestinationSettings]) -> DestinationKeys {
    destinations
        .iter()
        .filter_map(|d| Some((d.name.clone(), d.api_key.clone()?)))
        .collect()
}

/// A VAN destination's settings with their defaults filled in.
#[derive(Debug, Clone)]
pub struct VanSettings {
    pub application_name: String,
    pub database_mode: u8,
    pub van_id_field: String,
    pub result_code: String,
    pub contact_type: String,
    pub actions: Vec<VanAction>,
}

impl DestinationSettings {
    /// A destination of every opt-out, for code that configures one itself (tests, `demo`).
    pub fn new(name: &str, kind: DestinationKind, base_url: &str, api_key: &str) -> Self {
        Self {
            name: name.to_owned(),
            kind,
            base_url: base_url.to_owned(),
            api_key: Some(SecretString::from(api_key.to_owned())),
            api_key_file: None,
            accounts: Vec::new(),
            organizations: Vec::new(),
            sources: all_sources(),
            timeout_secs: default_timeout_secs(),
            opt_ins: false,
            requests_per_second: default_requests_per_second(),
            max_backoff_secs: default_max_backoff_secs(),
            application_name: None,
            database_mode: None,
            van_id_field: None,
            result_code: None,
            contact_type: None,
            actions: None,
            allow_insecure_http: false,
        }
    }

    /// The VAN settings, defaults filled in.
    pub fn van(&self) -> VanSettings {
        VanSettings {
            application_name: self
                .application_name
                .clone()
                .unwrap_or_else(|| "outreach-sync".to_owned()),
            database_mode: self.database_mode.unwrap_or(1),
            van_id_field: self
                .van_id_field
                .clone()
                .unwrap_or_else(|| "VanID".to_owned()),
            result_code: self
                .result_code
                .clone()
                .unwrap_or_else(|| "Do Not Text".to_owned()),
            contact_type: self
                .contact_type
                .clone()
                .unwrap_or_else(|| "SMS Text".to_owned()),
            actions: self
                .actions
                .clone()
                .unwrap_or_else(|| vec![VanAction::CanvassResult, VanAction::PhoneStatus]),
        }
    }

    /// The keys only a VAN destination takes that this one sets.
    fn van_keys_set(&self) -> Vec<&'static str> {
        [
            ("application_name", self.application_name.is_some()),
            ("database_mode", self.database_mode.is_some()),
            ("van_id_field", self.van_id_field.is_some()),
            ("result_code", self.result_code.is_some()),
            ("contact_type", self.contact_type.is_some()),
            ("actions", self.actions.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect()
    }
}

/// Reads every destination's `api_key_file`.
pub(super) fn read_secret_files(
    destinations: &mut [DestinationSettings],
) -> Result<(), SettingsError> {
    for destination in destinations {
        if let Some(path) = &destination.api_key_file {
            let text = read_secret_file("destination.api_key_file", path)?;
            destination.api_key = Some(SecretString::from(text.trim().to_owned()));
        }
    }
    Ok(())
}

/// Well-formed names unique among `taken` (the subscribers') and each other, http(s) URLs,
/// a key, bounds, and the VAN keys on VAN destinations alone.
pub(super) fn validate(
    destinations: &[DestinationSettings],
    taken: &[&str],
) -> Result<(), SettingsError> {
    let mut names: std::collections::HashSet<&str> = taken.iter().copied().collect();
    for d in destinations {
        let named = |message: &str| format!("destination {:?}: {message}", d.name);
        if !well_formed_name(&d.name) {
            return Err(SettingsError::invalid(
                "destination.name",
                named("a name is one or more of a-z, 0-9, `_` and `-`"),
            ));
        }
        if !names.insert(d.name.as_str()) {
            return Err(SettingsError::invalid(
                "destination.name",
                named("named twice; names are unique among subscribers and destinations"),
            ));
        }
        super::urls::url(
            "destination.base_url",
            &format!("destination {:?}", d.name),
            &d.base_url,
            super::urls::Sends::secret(d.allow_insecure_http),
        )?;
        let key_is_blank = d.api_key.as_ref().is_none_or(|key| {
            use secrecy::ExposeSecret as _;
            key.expose_secret().trim().is_empty()
        });
        if key_is_blank {
            return Err(SettingsError::invalid(
                "destination.api_key",
                named("an API key is required (or api_key_file)"),
            ));
        }
        if d.sources.is_empty() {
            return Err(SettingsError::invalid(
                "destination.sources",
                named("at least one of webhook, reconcile, local, import"),
            ));
        }
        if !(1..=MAX_REQUESTS_PER_SECOND).contains(&d.requests_per_second) {
            return Err(SettingsError::invalid(
                "destination.requests_per_second",
                named(&format!("must be between 1 and {MAX_REQUESTS_PER_SECOND}")),
            ));
        }
        if !(1..=MAX_BACKOFF_SECS).contains(&d.max_backoff_secs) {
            return Err(SettingsError::invalid(
                "destination.max_backoff_secs",
                named(&format!("must be between 1 and {MAX_BACKOFF_SECS}")),
            ));
        }
        if !(1..=MAX_TIMEOUT_SECS).contains(&d.timeout_secs) {
            return Err(SettingsError::invalid(
                "destination.timeout_secs",
                named(&format!("must be between 1 and {MAX_TIMEOUT_SECS}")),
            ));
        }
        match d.kind {
            DestinationKind::Van => validate_van(d)?,
            DestinationKind::ActionNetwork => {
                if let Some(key) = d.van_keys_set().first() {
                    return Err(SettingsError::invalid(
                        "destination.kind",
                        named(&format!("`{key}` is a key of kind \"van\" alone")),
                    ));
                }
            }
        }
    }
    Ok(())
}

impl super::Settings {
    /// The accounts every `[[subscriber]]` and `[[destination]]` is scoped to: each a
    /// served account, and a VAN destination's named when several accounts are served (a
    /// VAN key is one committee's, and a VAN ID means a person only there). A check of its
    /// own, beside [`super::Settings::validate`]: every command that loads the
    /// configuration makes it too (`check-config`, `serve`, a reload), and exits 2 naming
    /// the key.
    pub fn validate_scopes(&self) -> Result<(), SettingsError> {
        let served = self.account_names();
        let unknown = |accounts: &[String]| {
            accounts
                .iter()
                .find(|a| !served.contains(a))
                .map(|a| crate::model::text::quoted(a))
        };
        let listed = served.join(", ");
        for s in &self.subscriber {
            if let Some(name) = unknown(&s.accounts) {
                return Err(SettingsError::invalid(
                    "subscriber.accounts",
                    format!(
                        "subscriber {:?}: no account {name} is served (accounts: {listed})",
                        s.name
                    ),
                ));
            }
        }
        for d in &self.destination {
            let named = |message: &str| format!("destination {:?}: {message}", d.name);
            if let Some(name) = unknown(&d.accounts) {
                return Err(SettingsError::invalid(
                    "destination.accounts",
                    named(&format!("no account {name} is served (accounts: {listed})")),
                ));
            }
            if d.kind == DestinationKind::Van && served.len() > 1 && d.accounts.is_empty() {
                return Err(SettingsError::invalid(
                    "destination.accounts",
                    named(&format!(
                        "a van destination must name its accounts when several are served \
                         ({listed}): its key is one committee's, and a VAN ID means a person \
                         only in that committee, so another account's VAN ID would write into \
                         someone else"
                    )),
                ));
            }
        }
        Ok(())
    }
}

fn validate_van(d: &DestinationSettings) -> Result<(), SettingsError> {
    let named = |message: &str| format!("destination {:?}: {message}", d.name);
    let van = d.van();
    if !matches!(van.database_mode, 0 | 1) {
        return Err(SettingsError::invalid(
            "destination.database_mode",
            named("1 (MyCampaign / EveryAction) or 0 (MyVoters)"),
        ));
    }
    for (key, value) in [
        ("destination.application_name", &van.application_name),
        ("destination.van_id_field", &van.van_id_field),
        ("destination.result_code", &van.result_code),
        ("destination.contact_type", &van.contact_type),
    ] {
        if value.trim().is_empty() {
            return Err(SettingsError::invalid(key, named("must not be empty")));
        }
    }
    if van.actions.is_empty() {
        return Err(SettingsError::invalid(
            "destination.actions",
            named("at least one of canvass_result, phone_status"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
