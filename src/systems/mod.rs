//! The systems the daemon speaks to outside its upstream service: the daemon's own signed
//! webhook that subscribers get ([`webhook`]), and each kind a `[[destination]]` or a
//! `[[source]]` names, one folder each holding everything of its kind (its settings, its
//! wire format, its requests, how it reads its answers and errors), each side behind its
//! trait: [`Destination`] (a system of record, an entry at a time), [`Warehouse`] (a
//! table, a batch of rows at a time), [`source::Source`] (read back) and
//! [`posted::Posted`] (posted to the daemon).
//!
//! The kind registry is here, a line per kind: [`system_of`] and [`source_system`]. The
//! sender, the reader and the ingest listener know no kind (ARCHITECTURE.md, "Where a new
//! thing goes").

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use secrecy::SecretString;

mod action_network;
mod bandwidth;
mod bigquery;
pub mod http;
mod mobile_commons;
mod mobilize;
pub mod posted;
pub mod postgres;
mod record;
pub mod source;
mod telnyx;
pub mod twilio;
mod van;
pub mod warehouse;
pub mod webhook;

pub use self::http::{Answer, REQUEST_TIMEOUT, http_client};
pub use self::record::{Api, ApiRecord, Record, TableRecord};
pub use self::warehouse::{Link, Refusal, Table, Warehouse};
use crate::model::LedgerEntry;
use crate::settings::{DestinationSettings, SourceSettings, SourceSystem, SystemSettings};

/// The kind registry: each kind of destination, a line each, from its settings to the
/// system that writes it.
fn system_of(settings: &DestinationSettings) -> System {
    match &settings.system {
        SystemSettings::Van(own) => System::Api(Box::new(van::Van::new(own))),
        SystemSettings::ActionNetwork(own) => {
            System::Api(Box::new(action_network::ActionNetwork::new(own)))
        }
        SystemSettings::BigQuery(own) => System::Table(Box::new(bigquery::BigQuery::new(own))),
        SystemSettings::Postgres(own) => System::Table(Box::new(postgres::Postgres::new(own))),
        SystemSettings::MobileCommons(own) => {
            System::Api(Box::new(mobile_commons::Profiles::new(own)))
        }
    }
}

/// What a destination is written through: a system of record's API, an entry at a time,
/// or a warehouse's table, a batch of rows at a time.
enum System {
    Api(Box<dyn Destination>),
    Table(Box<dyn Warehouse>),
}

/// The kind registry of sources: each kind, a line each, from its settings to what the
/// daemon reads it through ([`source::Source`]) or what verifies and reads its posts
/// ([`posted::Posted`]).
fn source_system(settings: &SourceSettings) -> SourceKind {
    let words = &settings.opt_out_words;
    match &settings.system {
        SourceSystem::Van(own) => SourceKind::Read(Box::new(van::Changes::new(own))),
        SourceSystem::ActionNetwork(_) => SourceKind::Read(Box::new(action_network::People)),
        SourceSystem::Twilio(own) => SourceKind::Posted(Arc::new(twilio::Twilio::new(own, words))),
        SourceSystem::Telnyx(own) => SourceKind::Posted(Arc::new(telnyx::Telnyx::new(own, words))),
        SourceSystem::Bandwidth(own) => {
            SourceKind::Posted(Arc::new(bandwidth::Bandwidth::new(own, words)))
        }
        SourceSystem::Mobilize(own) => SourceKind::Read(Box::new(mobilize::People::new(own))),
        SourceSystem::MobileCommons(own) => {
            SourceKind::Read(Box::new(mobile_commons::Profiles::new(own)))
        }
    }
}

/// How a source's opt-outs come: read by the daemon, or posted to it.
enum SourceKind {
    Read(Box<dyn source::Source>),
    Posted(Arc<dyn posted::Posted>),
}

/// The reader of a source the daemon reads; `None` for one a system posts to.
pub fn source_of(settings: &SourceSettings) -> Option<Box<dyn source::Source>> {
    match source_system(settings) {
        SourceKind::Read(reader) => Some(reader),
        SourceKind::Posted(_) => None,
    }
}

/// What verifies and reads the posts of a source a system posts to; `None` for one the
/// daemon reads.
pub fn posted_of(settings: &SourceSettings) -> Option<Arc<dyn posted::Posted>> {
    match source_system(settings) {
        SourceKind::Posted(posted) => Some(posted),
        SourceKind::Read(_) => None,
    }
}

/// [`posted_of`], as the write path takes it: what reads a stored post again.
pub fn post_reader_of(settings: &SourceSettings) -> Option<Arc<dyn crate::model::read::ReadsPost>> {
    posted_of(settings).map(|posted| posted as Arc<dyn crate::model::read::ReadsPost>)
}

/// What a future of a [`Destination`] is: boxed, so that the trait is one a sender holds
/// as `dyn`.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A system of record, written an entry at a time in its own API: each entry one or more
/// requests ([`Step`]s), each entry ending `sent`, `unmatched` or `refused`. The sender
/// asks it to check its key and look up what its requests need ([`Destination::prepare`]),
/// to plan an entry's requests ([`Destination::plan`]), and to read its errors
/// ([`Destination::error_words`]); how often, in what order, what is kept and when the
/// cursor moves are the sender's alone.
///
/// The write side only. A system that can also be read back (VAN's changed entities, Action
/// Network's people) implements a second trait, `Source`, in the same file: what it reads,
/// from which cursor, as entries of the ledger. A kind that is only read implements that one
/// alone; the sender and the reader each see only their own trait.
pub trait Destination: std::fmt::Debug + Send + Sync {
    /// `request` with `key`, as the system takes it.
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: &SecretString,
    ) -> reqwest::RequestBuilder;

    /// Whether an entry's plan needs the mirror's lead of it: the system finds people by an
    /// id their lead holds, not by the number itself.
    fn needs_lead(&self) -> bool {
        false
    }

    /// Whether what the plans need is looked up.
    fn ready(&self) -> bool {
        true
    }

    /// Forgets what was looked up, so that it is looked up again before the next entry.
    fn forget(&self) {}

    /// Checks the key and looks up what the plans need, through `api` (GETs with the key
    /// in force, their answers read).
    fn prepare<'a>(&'a self, api: Api<'a>) -> Pending<'a, Result<(), Stop>>;

    /// The person and requests of `entry`, given the mirror's lead of it when
    /// [`Destination::needs_lead`]; an `Err` is why there can be none (`unmatched`).
    fn plan(&self, entry: &LedgerEntry, lead: Option<&serde_json::Value>) -> Result<Plan, String>;

    /// The system's own words in the JSON body of an error answer, when the body is in its
    /// error format.
    fn error_words(&self, body: &serde_json::Value) -> Option<String>;

    /// The system's own words in an answer's text, whatever it words them in (Mobile
    /// Commons' XML): by default those of its JSON ([`Destination::error_words`]).
    fn error_words_in(&self, text: &str) -> Option<String> {
        serde_json::from_str(text)
            .ok()
            .and_then(|json| self.error_words(&json))
    }

    /// Whether the body of a successful (2xx) answer is read for the system's verdict (Mobile
    /// Commons answers a refusal with a 200): by default a 2xx is a success, unread.
    fn reads_success(&self) -> bool {
        false
    }

    /// The verdict of a successful answer whose body is `text`, when
    /// [`Destination::reads_success`].
    fn success_of(&self, _text: &str) -> Answer {
        Answer::Success
    }

    /// Whether the system holds what `plan` would write already (Mobile Commons: the
    /// profile is opted out), asked through `api` before the entry's first request:
    /// `Some(why)` ends the entry `already` with nothing written. `None` (the default): it
    /// is not asked.
    fn holds<'a>(
        &'a self,
        _api: Api<'a>,
        _plan: &'a Plan,
    ) -> Option<Pending<'a, Result<Option<String>, Stop>>> {
        None
    }
}

/// What a [`Step`]'s request carries.
#[derive(Debug, Clone)]
pub enum Body {
    /// JSON (VAN, Action Network).
    Json(serde_json::Value),
    /// A form, `application/x-www-form-urlencoded` (Mobile Commons).
    Form(Vec<(&'static str, String)>),
}

/// One request of an entry: `body` POSTed to `path`; once answered with success, `bit` is
/// kept among the entry's actions done, so it is never sent again.
#[derive(Debug, Clone)]
pub struct Step {
    pub bit: i64,
    /// Its name in logs.
    pub action: &'static str,
    pub path: String,
    pub body: Body,
}

/// What is sent for one entry: the person it is about, as the system knows people, and its
/// requests.
#[derive(Debug, Clone)]
pub struct Plan {
    pub person: String,
    pub steps: Vec<Step>,
}

/// Why a destination cannot be written now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// 401 or 403: until its key works again.
    Credentials(String),
    /// What the configuration names is not there.
    Lookup(String),
    /// No answer, a 3xx, 408, 429, 5xx, or an answer that does not parse: tried again.
    Retry {
        error: String,
        retry_after: Option<std::time::Duration>,
    },
}

impl Stop {
    /// Tried again after the backoff, with no word of when.
    pub fn retry(error: String) -> Self {
        Self::Retry {
            error,
            retry_after: None,
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Credentials(error) => write!(f, "credentials: {error}"),
            Stop::Lookup(error) => write!(f, "lookup: {error}"),
            Stop::Retry { error, .. } => f.write_str(error),
        }
    }
}
