//! The kinds of destination that are systems of record: written an entry at a time, each
//! entry one or more requests ([`Step`]s) in the system's own API, each entry ending
//! `sent`, `unmatched` or `refused`. A new kind is a file of its own (its wire format) and a
//! variant here.

use std::sync::{Arc, Mutex};

use secrecy::SecretString;

use super::action_network::ActionNetwork;
use super::answer::{Answer, read_json};
pub use super::answer::{Plan, Step, Stop};
use super::van::Van;
use crate::model::LedgerEntry;
use crate::settings::{DestinationKeys, DestinationKind, DestinationSettings, Live};

/// A system of record, reached with its key: the one in force (a reload replaces it).
#[derive(Debug)]
pub struct Record {
    name: String,
    keys: Live<DestinationKeys>,
    /// The keys in force when it was stopped (its key did not work, its lookups missed):
    /// once a reload replaced them, it is tried again.
    stopped_under: Mutex<Option<Arc<DestinationKeys>>>,
    /// Longest wait for an answer to one request.
    timeout: std::time::Duration,
    kind: Kind,
}

/// The systems of record: one file each for its wire format.
#[derive(Debug)]
enum Kind {
    Van(Van),
    ActionNetwork(ActionNetwork),
}

impl Record {
    /// The destination of `settings`, its key read from `keys` at each request.
    pub fn new(settings: &DestinationSettings, keys: Live<DestinationKeys>) -> Self {
        let kind = match settings.kind {
            DestinationKind::Van => Kind::Van(Van::new(settings)),
            DestinationKind::ActionNetwork => Kind::ActionNetwork(ActionNetwork::new(settings)),
        };
        Self {
            name: settings.name.clone(),
            keys,
            stopped_under: Mutex::new(None),
            timeout: std::time::Duration::from_secs(settings.timeout_secs),
            kind,
        }
    }

    pub fn kind(&self) -> DestinationKind {
        match self.kind {
            Kind::Van(_) => DestinationKind::Van,
            Kind::ActionNetwork(_) => DestinationKind::ActionNetwork,
        }
    }

    /// Whether an entry's steps need the mirror's lead of it: the system finds people by
    /// an id their lead holds (VAN), not by the number itself (Action Network).
    pub(super) fn needs_lead(&self) -> bool {
        matches!(self.kind, Kind::Van(_))
    }

    /// Whether what the steps need is looked up.
    pub(super) fn ready(&self) -> bool {
        match &self.kind {
            Kind::Van(van) => van.ready(),
            Kind::ActionNetwork(_) => true,
        }
    }

    /// Forgets what was looked up, so that it is looked up again before the next entry.
    pub(super) fn forget(&self) {
        if let Kind::Van(van) = &self.kind {
            van.forget();
        }
    }

    /// Notes that it was stopped under the keys in force now.
    pub(super) fn stopped(&self) {
        if let Ok(mut under) = self.stopped_under.lock() {
            *under = Some(self.keys.current());
        }
    }

    /// Whether the keys were replaced since it was stopped (or it was stopped before this
    /// process started): then it is tried again.
    pub(super) fn keys_replaced(&self) -> bool {
        let now = self.keys.current();
        self.stopped_under
            .lock()
            .is_ok_and(|under| under.as_ref().is_none_or(|under| !Arc::ptr_eq(under, &now)))
    }

    /// The key in force.
    fn key(&self) -> Result<SecretString, Stop> {
        self.keys
            .current()
            .get(&self.name)
            .cloned()
            .ok_or_else(|| Stop::Credentials("no API key is configured".to_owned()))
    }

    /// `request` with the key in force.
    fn authorized(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, Stop> {
        let key = self.key()?;
        let request = request.timeout(self.timeout);
        Ok(match &self.kind {
            Kind::Van(van) => van.authorize(request, &key),
            Kind::ActionNetwork(an) => an.authorize(request, &key),
        })
    }

    fn url(&self, path: &str) -> String {
        match &self.kind {
            Kind::Van(van) => van.url(path),
            Kind::ActionNetwork(an) => an.url(path),
        }
    }

    /// Checks the key and looks up what the steps need.
    pub async fn prepare(&self, http: &reqwest::Client) -> Result<(), Stop> {
        match &self.kind {
            Kind::Van(van) => {
                let get = |path: &str| self.authorized(http.get(self.url(path)));
                van.prepare(get).await
            }
            // The API's entry point answers any valid key.
            Kind::ActionNetwork(_) => {
                let request = self.authorized(http.get(self.url("/")))?;
                read_json::<serde_json::Value>(request, "the API entry point")
                    .await
                    .map(drop)
            }
        }
    }

    /// The person and requests of `entry`, or why there can be none (`unmatched`).
    pub(super) fn plan(
        &self,
        entry: &LedgerEntry,
        lead: Option<&serde_json::Value>,
    ) -> Result<Plan, String> {
        match &self.kind {
            Kind::Van(van) => van.plan(entry, lead),
            Kind::ActionNetwork(an) => an.plan(entry),
        }
    }

    /// Sends one step.
    pub(super) async fn send(&self, http: &reqwest::Client, step: &Step) -> Answer {
        let request = match self.authorized(http.post(self.url(&step.path))) {
            Ok(request) => request,
            Err(stop) => return Answer::Credentials(stop.to_string()),
        };
        Answer::of(request.json(&step.body).send().await).await
    }
}
