//! `[[source]]`: the systems opt-outs come from besides the service: read back every
//! `every_secs` by the leader (a phone banker's "Do Not Text" in VAN, a supporter
//! unsubscribing in Action Network), or posted to the daemon (a person's reply to a Twilio
//! number). The keys every kind takes here; each kind's own in [`SourceSystem`].

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::kinds::{Named, SourceKind};
use super::{SettingsError, read_secret_file, redact_opt};
use crate::model::AccountId;

/// Shortest and longest `every_secs`.
pub const MIN_EVERY_SECS: u64 = 1;
pub const MAX_EVERY_SECS: u64 = 86_400;

/// How far back a source first reads when `since` is not given.
pub const DEFAULT_SINCE_DAYS: i64 = 7;

super::kinds::kinds! {
    /// What a source is, by its `kind`, with that kind's own keys: a line per kind, each
    /// kind's keys in its folder (`src/systems/<kind>/settings.rs`).
    pub enum SourceSystem: SourceKind {
        /// NGP VAN / EveryAction: changed entities (phones opted out, "Do Not Text"
        /// responses).
        Van(super::kinds::van::VanSettings),
        /// Action Network: people whose mobile number is unsubscribed.
        ActionNetwork(super::kinds::action_network::ActionNetworkSettings),
        /// A Twilio number's replies, posted by Twilio's messaging webhook to
        /// `/sources/{name}` on the ingest listener.
        Twilio(super::kinds::twilio::TwilioSettings),
        /// A Telnyx number's replies, posted by Telnyx's messaging webhook.
        Telnyx(super::kinds::telnyx::TelnyxSettings),
        /// A Bandwidth application's inbound messages, posted by its callback.
        Bandwidth(super::kinds::bandwidth::BandwidthSettings),
        /// Mobilize: an organization's people whose `sms_opt_in_status` is `OPT_OUT`.
        Mobilize(super::kinds::mobilize::MobilizeSettings),
        /// Mobile Commons: profiles that texted STOP or were opted out.
        MobileCommons(super::kinds::mobile_commons::MobileCommonsSettings),
    }
}

impl SourceSystem {
    /// The ledger's `source` of what it records.
    pub fn source(&self) -> crate::model::Source {
        self.own().source()
    }

    /// Whether the daemon reads it every `every_secs` (false: the system posts to it).
    pub fn polled(&self) -> bool {
        self.own().polled()
    }
}

/// One `[[source]]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct SourceSettings {
    /// Unique among sources, `[a-z0-9_-]+`: the `actor` of what it records.
    pub name: String,
    /// The accounts its opt-outs hold in, their organizations (none: the whole account,
    /// where the number is suppressed as an account-wide import suppresses it), and whether
    /// `base_url` may be plain HTTP.
    #[serde(flatten)]
    pub scope: super::Scope,
    /// Its opt-ins are recorded too (never by default: an opt-in in a CRM is not the
    /// person's consent to texts).
    #[serde(default)]
    pub opt_ins: bool,
    /// How often it reads.
    #[serde(default = "default_every_secs")]
    pub every_secs: u64,
    /// First read from (RFC 3339); empty: [`DEFAULT_SINCE_DAYS`] days ago.
    #[serde(default)]
    pub since: String,
    /// The API's root: `https://api.securevan.com/v4`, `https://actionnetwork.org/api/v2`
    /// (the kinds read back; a Twilio source takes none).
    #[serde(default)]
    pub base_url: String,
    /// The API key; a secret.
    #[serde(default, serialize_with = "redact_opt")]
    pub api_key: Option<SecretString>,
    /// A file holding the API key instead.
    #[serde(default)]
    pub api_key_file: Option<PathBuf>,
    /// Most requests a second it sends.
    #[serde(default = "default_requests_per_second")]
    pub requests_per_second: u32,
    /// Longest wait for an answer to a request.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// Longest wait for what the system prepares before it can be read (VAN's export job,
    /// polled until `Complete`); past it, the run is an error and the next one asks again.
    #[serde(default = "default_job_timeout_secs")]
    pub job_timeout_secs: u64,
    /// Longest a run's read may take as a whole (a job, its files, a listing's pages),
    /// however steadily the bytes come; past it, the run is an error that says so.
    #[serde(default = "default_read_timeout_secs")]
    pub read_timeout_secs: u64,
    /// Most pages a listing (Action Network's people) is followed for in one run; past
    /// it, the run is an error that says so.
    #[serde(default = "default_max_pages")]
    pub max_pages: u64,
    /// Words or phrases that revoke beside the FCC's, the carriers' and the Spanish ones (a
    /// campaign's own keyword, another language's word), for a source posted replies: a
    /// reply made of them, with courtesy words around, is an opt-out; one holding them
    /// among other words is put to review.
    #[serde(default)]
    pub opt_out_words: Vec<String>,
    /// `kind`, and the keys of that kind alone.
    #[serde(flatten)]
    pub system: SourceSystem,
}

fn default_every_secs() -> u64 {
    300
}

fn default_requests_per_second() -> u32 {
    5
}

fn default_timeout_secs() -> u64 {
    30
}

fn default_job_timeout_secs() -> u64 {
    600
}

/// An hour: a first read of a large committee (100,000 people, 4,000 pages at Action
/// Network's 4 requests a second) takes about 17 minutes.
fn default_read_timeout_secs() -> u64 {
    3_600
}

/// 250,000 people of Action Network's pages of 25.
fn default_max_pages() -> u64 {
    10_000
}

/// Longest `job_timeout_secs`.
pub const MAX_JOB_TIMEOUT_SECS: u64 = 86_400;

impl SourceSettings {
    /// Whether it reads the system destination `d` writes: the same kind, API, login and
    /// key (a kind's own secret, as Mobile Commons' password, is its key).
    pub fn reads_what_writes(&self, d: &super::DestinationSettings) -> bool {
        use secrecy::ExposeSecret as _;
        let key = |k: Option<&SecretString>| k.map(|k| k.expose_secret().trim().to_owned());
        let own = self.system.own();
        let read_with = match own.own_secret() {
            Some((_, secret)) => secret,
            None => self.api_key.as_ref(),
        };
        d.system.kind() == self.system.kind()
            && d.base_url.trim_end_matches('/') == self.base_url.trim_end_matches('/')
            && d.system.own().login() == own.login()
            && key(d.api_key.as_ref()) == key(read_with)
    }

    /// A source of every account, for code that configures one itself (tests, `demo`).
    pub fn new(name: &str, system: SourceSystem, base_url: &str, api_key: &str) -> Self {
        Self {
            name: name.to_owned(),
            scope: super::Scope::default(),
            opt_ins: false,
            every_secs: default_every_secs(),
            since: String::new(),
            base_url: base_url.to_owned(),
            api_key: Some(SecretString::from(api_key.to_owned())),
            api_key_file: None,
            requests_per_second: default_requests_per_second(),
            timeout_secs: default_timeout_secs(),
            job_timeout_secs: default_job_timeout_secs(),
            read_timeout_secs: default_read_timeout_secs(),
            max_pages: default_max_pages(),
            opt_out_words: Vec::new(),
            system,
        }
    }

    /// Where it first reads from: `since`, or [`DEFAULT_SINCE_DAYS`] days before `now`.
    pub fn first_read_from(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        parse_since(&self.since)
            .ok()
            .flatten()
            .unwrap_or(now - chrono::Duration::days(DEFAULT_SINCE_DAYS))
    }

    /// The accounts of `served` it holds in.
    pub fn targets(&self, served: &[AccountId]) -> Vec<AccountId> {
        self.scope.targets(served)
    }
}

/// `since` as a time: `None` when empty. A time in the future is refused: a source reads
/// what changed before now, and from a future `since` it would read nothing, saying "ok".
pub fn parse_since(since: &str) -> Result<Option<DateTime<Utc>>, String> {
    if since.trim().is_empty() {
        return Ok(None);
    }
    let at = DateTime::parse_from_rfc3339(since.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| "a time in RFC 3339 (2026-01-31T00:00:00Z) is expected".to_owned())?;
    if at > Utc::now() {
        return Err(format!(
            "{} is in the future: a source reads changes made before now, so it would read nothing",
            since.trim()
        ));
    }
    Ok(Some(at))
}

/// Reads every source's `api_key_file` and `auth_token_file`.
pub(super) fn read_secret_files(sources: &mut [SourceSettings]) -> Result<(), SettingsError> {
    for source in sources {
        if let Some(path) = &source.api_key_file {
            let text = read_secret_file("source.api_key_file", path)?;
            source.api_key = Some(SecretString::from(text.trim().to_owned()));
        }
        source.system.own_mut().read_secret_files()?;
    }
    Ok(())
}

/// Names unique among sources (each well-formed: checked before), an http(s) URL, a key, bounds, `since`, and the
/// accounts each names among `served`.
pub(super) fn validate(
    sources: &[SourceSettings],
    served: &[AccountId],
) -> Result<(), SettingsError> {
    let mut names = std::collections::HashSet::new();
    for s in sources {
        let named = |message: &str| format!("source {:?}: {message}", s.name);
        if !names.insert(s.name.as_str()) {
            return Err(SettingsError::invalid(
                "source.name",
                named("named twice; names are unique among sources"),
            ));
        }
        validate_one(s, served)?;
    }
    Ok(())
}

/// One source's URL, key, bounds, `since`, accounts, organizations and its kind's keys.
fn validate_one(s: &SourceSettings, served: &[AccountId]) -> Result<(), SettingsError> {
    let named = |message: &str| format!("source {:?}: {message}", s.name);
    validate_bounds(s, &named)?;
    validate_targets(s, served, &named)?;
    match s.system.polled() {
        true => validate_polled(s, &named)?,
        false => validate_posted(s, &named)?,
    }
    s.system.own().validate(&s.name, &named)
}

/// A source a system posts to takes none of the keys of a source the daemon reads; its
/// own revocation words are words.
fn validate_posted(s: &SourceSettings, named: Named<'_>) -> Result<(), SettingsError> {
    super::kinds::validate_words(&s.opt_out_words, named)?;
    let read_keys = [
        ("base_url", !s.base_url.is_empty()),
        ("api_key", s.api_key.is_some() || s.api_key_file.is_some()),
        ("since", !s.since.is_empty()),
    ];
    match read_keys.iter().find(|(_, set)| *set) {
        Some((key, _)) => Err(SettingsError::invalid(
            "source.kind",
            named(&format!(
                "{key} is a key of the sources the daemon reads; a {} source is posted to",
                s.system.kind()
            )),
        )),
        None => Ok(()),
    }
}

/// The URL, key and `since` of a source the daemon reads, which hears no replies.
fn validate_polled(
    s: &SourceSettings,
    named: &dyn Fn(&str) -> String,
) -> Result<(), SettingsError> {
    super::urls::url(
        "source.base_url",
        &format!("source {:?}", s.name),
        &s.base_url,
        super::urls::Sends::secret(s.scope.allow_insecure_http),
    )?;
    let blank = |key: Option<&SecretString>| {
        key.is_none_or(|key| {
            use secrecy::ExposeSecret as _;
            key.expose_secret().trim().is_empty()
        })
    };
    match s.system.own().own_secret() {
        Some((_, _)) if s.api_key.is_some() || s.api_key_file.is_some() => {
            return Err(SettingsError::invalid(
                "source.api_key",
                named(&format!(
                    "a {} source's reads are sent with its own login, not an API key",
                    s.system.kind()
                )),
            ));
        }
        Some((key, secret)) if blank(secret) => {
            return Err(SettingsError::invalid(
                key,
                named(&format!(
                    "`{}` is required (or `{}_file`)",
                    key.trim_start_matches("source."),
                    key.trim_start_matches("source.")
                )),
            ));
        }
        Some(_) => {}
        None if blank(s.api_key.as_ref()) => {
            return Err(SettingsError::invalid(
                "source.api_key",
                named("an API key is required (or api_key_file)"),
            ));
        }
        None => {}
    }
    if let Err(message) = parse_since(&s.since) {
        return Err(SettingsError::invalid("source.since", named(&message)));
    }
    if !s.opt_out_words.is_empty() {
        return Err(SettingsError::invalid(
            "source.opt_out_words",
            named(&format!(
                "a {} source reads opt-outs, not replies: opt_out_words is a key of the sources posted replies",
                s.system.kind()
            )),
        ));
    }
    Ok(())
}

/// A source's numbers within their bounds.
fn validate_bounds(
    s: &SourceSettings,
    named: &impl Fn(&str) -> String,
) -> Result<(), SettingsError> {
    let bounds: [(&'static str, u64, u64, u64); 6] = [
        (
            "source.read_timeout_secs",
            s.read_timeout_secs,
            1,
            MAX_JOB_TIMEOUT_SECS,
        ),
        ("source.max_pages", s.max_pages, 1, 1_000_000),
        (
            "source.job_timeout_secs",
            s.job_timeout_secs,
            1,
            MAX_JOB_TIMEOUT_SECS,
        ),
        (
            "source.every_secs",
            s.every_secs,
            MIN_EVERY_SECS,
            MAX_EVERY_SECS,
        ),
        (
            "source.requests_per_second",
            u64::from(s.requests_per_second),
            1,
            u64::from(super::destinations::MAX_REQUESTS_PER_SECOND),
        ),
        (
            "source.timeout_secs",
            s.timeout_secs,
            1,
            super::destinations::MAX_TIMEOUT_SECS,
        ),
    ];
    for (key, value, min, max) in bounds {
        if !(min..=max).contains(&value) {
            return Err(SettingsError::invalid(
                key,
                named(&format!("must be between {min} and {max}")),
            ));
        }
    }
    Ok(())
}

/// The accounts a source names are served, and its organizations are organization ids.
fn validate_targets(
    s: &SourceSettings,
    served: &[AccountId],
    named: &impl Fn(&str) -> String,
) -> Result<(), SettingsError> {
    s.scope
        .validate_accounts("source.accounts", named, served)?;
    if let Some(org) = s
        .scope
        .organizations
        .iter()
        .find(|o| o.trim().is_empty() || *o == crate::model::ACCOUNT_WIDE)
    {
        return Err(SettingsError::invalid(
            "source.organizations",
            named(&format!(
                "{} is not an organization id (leave organizations empty for the whole account)",
                crate::model::text::quoted(org)
            )),
        ));
    }
    Ok(())
}
