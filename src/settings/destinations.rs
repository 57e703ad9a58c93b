//! `[[destination]]`: the campaign's systems of record, each written every opt-out in its
//! own API; the keys every kind takes here, each kind's own in a file of its own.

use std::path::PathBuf;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::subscribers::well_formed_name;
use super::{Feed, Scope, SettingsError, read_secret_file, redact_opt};

use super::kinds::KindSettings;
pub use super::kinds::warehouse;

/// Most requests per second a destination may be configured to take.
pub const MAX_REQUESTS_PER_SECOND: u32 = 10_000;

super::kinds::kinds! {
    /// What a destination is, by its `kind`: the one list of the kinds' settings, a line
    /// each, each kind's own keys in its folder (`src/systems/<kind>/settings.rs`). A key of
    /// another kind is refused by [`validate`], naming it; any other unknown key as it is
    /// read.
    pub enum SystemSettings: KindSettings {
        /// NGP VAN / EveryAction, API v4.
        Van(super::kinds::van::VanSettings),
        /// Action Network, API v2.
        ActionNetwork(super::kinds::action_network::ActionNetworkSettings),
        /// A BigQuery table, written with `tabledata.insertAll`.
        #[serde(rename = "bigquery")]
        BigQuery(super::kinds::bigquery::BigQuerySettings),
        /// A PostgreSQL table, written with `INSERT ... ON CONFLICT (seq) DO NOTHING`.
        Postgres(super::kinds::postgres::PostgresSettings),
        /// Mobile Commons: each opt-out as the profile's, with `profile_opt_out`.
        MobileCommons(super::kinds::mobile_commons::MobileCommonsSettings),
    }
}

impl SystemSettings {
    /// A warehouse's table settings: `None` for a system of record.
    pub fn table(&self) -> Option<&warehouse::Table> {
        self.own().table()
    }
}

/// The kind whose key `key` is.
fn owner_of(key: &str) -> Option<&'static str> {
    SystemSettings::KEYS
        .iter()
        .find(|(_, keys)| keys.contains(&key))
        .map(|(kind, _)| *kind)
}

/// One `[[destination]]`: the keys every kind takes, and its kind's own (`system`).
/// (`deny_unknown_fields` does not combine with `flatten`: each kind's struct refuses an
/// unknown key through [`Foreign`].)
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct DestinationSettings {
    /// Unique among subscribers and destinations, `[a-z0-9_-]+`.
    pub name: String,
    /// The API's root: `https://api.securevan.com/v4`, `https://actionnetwork.org/api/v2`
    /// (required); BigQuery's, or an emulator's (by default Google's); none for `postgres`.
    #[serde(default)]
    pub base_url: String,
    /// The API key; a secret.
    #[serde(default, serialize_with = "redact_opt")]
    pub api_key: Option<SecretString>,
    /// A file holding the API key instead.
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// Longest wait for an answer to a request; no answer is an unknown answer (the action
    /// is sent once more at most).
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// Opt-ins are written too (VAN: the phone's status `I` alone). By default a system of
    /// record takes opt-outs alone, and a warehouse every entry (it mirrors the ledger).
    #[serde(default)]
    pub opt_ins: Option<bool>,
    /// Most requests a second the destination is sent (by default 5 for a system of
    /// record, 50 for a warehouse, whose requests are batches).
    #[serde(default)]
    pub requests_per_second: Option<u32>,
    /// Its accounts (a VAN destination names its accounts when several are served: a VAN
    /// key is one committee's), organizations, and whether `base_url` may be plain HTTP.
    #[serde(flatten)]
    pub scope: Scope,
    /// Which sources' entries, and the longest wait between two failed attempts.
    #[serde(flatten)]
    pub feed: Feed,
    /// `kind`, and the keys of that kind alone.
    #[serde(flatten)]
    pub system: SystemSettings,
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

impl DestinationSettings {
    /// Whether it is a warehouse (its requests are batches of rows of every entry).
    pub fn is_warehouse(&self) -> bool {
        self.system.table().is_some()
    }

    /// Whether opt-ins are written too.
    pub fn opt_ins(&self) -> bool {
        self.opt_ins.unwrap_or(self.is_warehouse())
    }

    /// Most requests a second.
    pub fn requests_per_second(&self) -> u32 {
        self.requests_per_second
            .unwrap_or(if self.is_warehouse() { 50 } else { 5 })
    }

    /// The API's root without a trailing `/` (a BigQuery destination's default: Google's).
    pub fn base_url(&self) -> &str {
        let url = self.base_url.trim_end_matches('/');
        match self.system.own().default_base_url() {
            Some(default) if url.is_empty() => default,
            _ => url,
        }
    }

    /// A destination of every opt-out, for code that configures one itself (tests, `demo`).
    pub fn new(name: &str, system: SystemSettings, base_url: &str, api_key: &str) -> Self {
        Self {
            name: name.to_owned(),
            base_url: base_url.to_owned(),
            api_key: Some(SecretString::from(api_key.to_owned())),
            api_key_file: None,
            timeout_secs: default_timeout_secs(),
            opt_ins: None,
            requests_per_second: None,
            scope: Scope::default(),
            feed: Feed::default(),
            system,
        }
    }
}

/// Reads every destination's `api_key_file`, and each kind's own secret (a warehouse's
/// file, Mobile Commons' password or its file) into its key.
pub(super) fn read_secret_files(
    destinations: &mut [DestinationSettings],
) -> Result<(), SettingsError> {
    for destination in destinations {
        let named = format!("destination {:?}", destination.name);
        if let Some(own) = destination.system.own().own_secret() {
            let shown = |key: &str| key.trim_start_matches("destination.").to_owned();
            if destination.api_key.is_some() || destination.api_key_file.is_some() {
                return Err(SettingsError::invalid(
                    "destination.api_key",
                    format!(
                        "{named}: a {} destination's secret is in `{}`, not an API key",
                        destination.system.kind(),
                        shown(own.inline_key.unwrap_or(own.file_key))
                    ),
                ));
            }
            let secret = match (own.inline, own.file) {
                (Some(_), Some(_)) => {
                    return Err(SettingsError::invalid(
                        own.file_key,
                        format!(
                            "{named}: `{}` and `{}` both given; one of them",
                            shown(own.inline_key.unwrap_or_default()),
                            shown(own.file_key)
                        ),
                    ));
                }
                (Some(inline), None) => inline.clone(),
                (None, Some(path)) => {
                    let text = read_secret_file(own.file_key, path)?;
                    SecretString::from(text.trim().to_owned())
                }
                (None, None) => {
                    let (key, message) = match own.inline_key {
                        Some(key) => (
                            key,
                            format!(
                                "`{}` is required (or `{}`)",
                                shown(key),
                                shown(own.file_key)
                            ),
                        ),
                        None => (own.file_key, "a file is required".to_owned()),
                    };
                    return Err(SettingsError::invalid(key, format!("{named}: {message}")));
                }
            };
            destination.api_key = Some(secret);
            continue;
        }
        if let Some(path) = &destination.api_key_file {
            let text = read_secret_file("destination.api_key_file", path)?;
            destination.api_key = Some(SecretString::from(text.trim().to_owned()));
        }
    }
    Ok(())
}

/// Well-formed names unique among `taken` (the subscribers') and each other, http(s) URLs,
/// a key, bounds, and each kind's keys on that kind alone.
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
        match d.system.own().no_base_url() {
            Some(why) if !d.base_url.is_empty() => {
                return Err(SettingsError::invalid("destination.base_url", named(why)));
            }
            Some(_) => {}
            None => super::urls::url(
                "destination.base_url",
                &format!("destination {:?}", d.name),
                d.base_url(),
                super::urls::Sends::secret(d.scope.allow_insecure_http),
            )?,
        }
        validate_key(d, &named)?;
        d.feed.validate(
            ("destination.sources", "destination.max_backoff_secs"),
            &named,
        )?;
        if !(1..=MAX_REQUESTS_PER_SECOND).contains(&d.requests_per_second()) {
            return Err(SettingsError::invalid(
                "destination.requests_per_second",
                named(&format!("must be between 1 and {MAX_REQUESTS_PER_SECOND}")),
            ));
        }
        if !(1..=MAX_TIMEOUT_SECS).contains(&d.timeout_secs) {
            return Err(SettingsError::invalid(
                "destination.timeout_secs",
                named(&format!("must be between 1 and {MAX_TIMEOUT_SECS}")),
            ));
        }
        let system = d.system.own();
        if let Some(key) = system.foreign().0.first() {
            let message = match owner_of(key) {
                Some(owner) => format!("`{key}` is a key of kind \"{owner}\" alone"),
                None => format!("unknown field `{key}`"),
            };
            return Err(SettingsError::invalid("destination.kind", named(&message)));
        }
        system.validate(&named)?;
    }
    Ok(())
}

/// A key that is not blank (a kind's own secret named by its own key), and opt-ins only to
/// a kind that writes them.
fn validate_key(
    d: &DestinationSettings,
    named: &dyn Fn(&str) -> String,
) -> Result<(), SettingsError> {
    let key_is_blank = d.api_key.as_ref().is_none_or(|key| {
        use secrecy::ExposeSecret as _;
        key.expose_secret().trim().is_empty()
    });
    if key_is_blank {
        return Err(match d.system.own().own_secret() {
            Some(own) => {
                let key = own.inline_key.unwrap_or(own.file_key);
                SettingsError::invalid(key, named("the secret it holds is blank"))
            }
            None => SettingsError::invalid(
                "destination.api_key",
                named("an API key is required (or api_key_file)"),
            ),
        });
    }
    if d.opt_ins() && !d.system.own().writes_opt_ins() {
        return Err(SettingsError::invalid(
            "destination.opt_ins",
            named(&format!(
                "a {} destination writes opt-outs alone: its API has no opt-in to write",
                d.system.kind()
            )),
        ));
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
        let served = self.account_ids()?;
        for s in &self.subscriber {
            let named = |message: &str| format!("subscriber {:?}: {message}", s.name);
            s.scope
                .validate_accounts("subscriber.accounts", &named, &served)?;
        }
        for d in &self.destination {
            let named = |message: &str| format!("destination {:?}: {message}", d.name);
            d.scope
                .validate_accounts("destination.accounts", &named, &served)?;
            d.system
                .own()
                .validate_scope(&named, &d.scope.accounts, &served)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
