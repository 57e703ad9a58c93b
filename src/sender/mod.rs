//! Consent pushed to the campaign's other tools: its subscribers and its destinations.
//! Every consent ledger entry goes to each configured `[[subscriber]]` as a Standard
//! Webhooks message, and each opt-out to each `[[destination]]` in that system's own API
//! (`crate::systems`), strictly in `seq` order and at least once: one sender per subscriber
//! or destination ([`attempt`]) with its durable cursor, its backoff and its rate. Senders
//! run on the leader alone, each in a task of its own, so one slow or dead destination
//! never delays another. The sender knows no kind of destination: it calls
//! [`crate::systems::Destination`].

mod attempt;
pub mod destinations;
mod steer;
mod try_now;

use crate::store::SubscriberStore;
use std::collections::HashSet;
use std::sync::Arc;

use secrecy::SecretSlice;
use tokio_util::sync::CancellationToken;

pub use self::attempt::{Attempt, Sender, backoff};
pub use self::steer::{Lag, ReplayError, Steered, replay, retry, views};
pub use self::try_now::{Running, TryNowError};
use crate::model::LedgerEntry;
use crate::model::Source;
use crate::settings::{DestinationSettings, Live, SourceSettings, SubscriberSettings};
use crate::store::Pool;
use crate::systems::Record;
use crate::systems::webhook::Webhook;
pub use crate::systems::{REQUEST_TIMEOUT, http_client};

/// A configured subscriber or destination: what one sender sends to.
pub struct Subscriber {
    pub name: String,
    /// What its requests are.
    pub wire: Wire,
    /// Only entries of these accounts; empty: every account.
    accounts: HashSet<String>,
    organizations: HashSet<String>,
    sources: Vec<Source>,
    /// Which entries: every one (a subscriber), or opt-outs that took effect, and opt-ins
    /// with `opt_ins` (a destination).
    opt_outs_only: bool,
    pub batch: u32,
    /// Longest wait between two failed attempts.
    pub max_backoff: std::time::Duration,
    /// Most requests a second (`None`: as fast as answered).
    pub requests_per_second: Option<std::num::NonZeroU32>,
    /// The cursor a new state starts at (a warehouse's `from_seq`; else 0, the whole
    /// ledger).
    pub start_cursor: i64,
    /// The sources that read back what it writes (a destination's, of the same system,
    /// login and key): their entries are not written back to it.
    echoes: Echoes,
}

/// The sources whose entries are never written back to a destination: those that read what
/// it writes, among the sources in force, so that a source a reload adds is one as soon as
/// it reads, and one a reload removed stays one (what it read is still the destination's
/// own). None for a subscriber.
#[derive(Default)]
struct Echoes {
    /// The destination, its key in force and the sources in force (a reload replaces both).
    of: Option<EchoesOf>,
    /// The names found so far, and the lists last looked at.
    found: std::sync::Mutex<Found>,
}

/// What [`Echoes`] are found among.
struct EchoesOf {
    destination: Box<DestinationSettings>,
    keys: Live<crate::settings::DestinationKeys>,
    sources: Live<Vec<SourceSettings>>,
}

/// The names found, and the keys and sources they were found among.
#[derive(Default)]
struct Found {
    among: Option<(
        Arc<crate::settings::DestinationKeys>,
        Arc<Vec<SourceSettings>>,
    )>,
    names: HashSet<String>,
}

impl Echoes {
    /// Whether a source named `name` reads what the destination writes, or did.
    fn contains(&self, name: &str) -> bool {
        self.with_names(|names| names.contains(name))
    }

    /// Whether no source reads what it writes, nor did.
    fn is_empty(&self) -> bool {
        self.with_names(HashSet::is_empty)
    }

    /// `look` at the names, once those of the sources in force are among them.
    fn with_names<T>(&self, look: impl FnOnce(&HashSet<String>) -> T) -> T {
        let mut found = self
            .found
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(of) = &self.of {
            let (keys, sources) = (of.keys.current(), of.sources.current());
            let seen = found
                .among
                .as_ref()
                .is_some_and(|(k, s)| Arc::ptr_eq(k, &keys) && Arc::ptr_eq(s, &sources));
            if !seen {
                let mut destination = (*of.destination).clone();
                destination.api_key = keys.get(&destination.name).cloned();
                let reading = sources.iter().filter(|s| s.reads_what_writes(&destination));
                let names: Vec<String> = reading.map(|s| s.name.clone()).collect();
                found.names.extend(names);
                found.among = Some((keys, sources));
            }
        }
        look(&found.names)
    }
}

/// What a sender's requests are.
pub enum Wire {
    /// The daemon's own format: a batch of entries per signed Standard Webhooks message.
    Webhook(Webhook),
    /// A destination: a system of record written an entry at a time in its own API
    /// ([`Record::Api`]), or a warehouse's table a batch of rows at a time
    /// ([`Record::Table`]).
    Record(Box<Record>),
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("Subscriber");
        f.field("name", &self.name);
        match &self.wire {
            Wire::Webhook(webhook) => f.field("webhook", webhook),
            Wire::Record(record) => f.field("record", record),
        };
        f.field("batch", &self.batch).finish_non_exhaustive()
    }
}

impl Subscriber {
    /// The subscriber of validated settings (`None` only for a secret that does not decode,
    /// which validation refuses first).
    pub fn new(settings: &SubscriberSettings) -> Option<Self> {
        Some(Self {
            name: settings.name.clone(),
            wire: Wire::Webhook(Webhook::new(
                settings.url.clone(),
                SecretSlice::from(settings.key()?),
            )),
            accounts: settings.scope.accounts.iter().cloned().collect(),
            organizations: settings.scope.organizations.iter().cloned().collect(),
            sources: settings.feed.sources.clone(),
            opt_outs_only: false,
            batch: settings.batch,
            max_backoff: std::time::Duration::from_secs(settings.feed.max_backoff_secs),
            requests_per_second: None,
            start_cursor: 0,
            echoes: Echoes::default(),
        })
    }

    /// The destination of validated settings, its key read from `keys` (which a reload
    /// replaces).
    pub fn destination(
        settings: &DestinationSettings,
        keys: crate::settings::Live<crate::settings::DestinationKeys>,
    ) -> Self {
        Self {
            name: settings.name.clone(),
            wire: Wire::Record(Box::new(Record::new(settings, keys))),
            accounts: settings.scope.accounts.iter().cloned().collect(),
            organizations: settings.scope.organizations.iter().cloned().collect(),
            sources: settings.feed.sources.clone(),
            opt_outs_only: !settings.opt_ins(),
            batch: settings
                .system
                .table()
                .map_or(destinations::BATCH, |table| table.batch()),
            max_backoff: std::time::Duration::from_secs(settings.feed.max_backoff_secs),
            requests_per_second: std::num::NonZeroU32::new(settings.requests_per_second()),
            start_cursor: settings.system.table().map_or(0, |t| t.start_cursor()),
            echoes: Echoes::default(),
        }
    }

    /// Takes no entry that one of `sources` read back from destination `destination` (its
    /// kind, API and login, and its key in `keys`): the keys and sources in force, which a
    /// reload replaces.
    pub fn reading_back(
        mut self,
        destination: &DestinationSettings,
        keys: Live<crate::settings::DestinationKeys>,
        sources: Live<Vec<SourceSettings>>,
    ) -> Self {
        self.echoes.of = Some(EchoesOf {
            destination: Box::new(destination.clone()),
            keys,
            sources,
        });
        self
    }

    /// Whether `entry` is for this subscriber.
    pub fn takes(&self, entry: &LedgerEntry) -> bool {
        let kind = match &self.wire {
            Wire::Webhook(_) => true,
            // A warehouse mirrors the ledger: an entry that did not take effect is a row too.
            Wire::Record(record) => match **record {
                Record::Table(_) => entry.opted_out || !self.opt_outs_only,
                Record::Api(_) => !entry.superseded && (entry.opted_out || !self.opt_outs_only),
            },
        };
        kind && self.takes_from(&entry.account_id, &entry.organization_id, entry.source)
            && !self.reads_back(entry.source, &entry.event_ref)
    }

    /// Whether an entry from `source` with `event_ref` was read back from this destination
    /// itself (by a source of the same system, login and key): it has what the entry says,
    /// and is never written it again.
    pub fn reads_back(&self, source: Source, event_ref: &str) -> bool {
        crate::model::read::source_name_of(source, event_ref)
            .is_some_and(|name| self.echoes.contains(name))
    }

    /// Whether it is a destination (a system of record) rather than a subscriber.
    pub fn is_destination(&self) -> bool {
        matches!(self.wire, Wire::Record(_))
    }

    /// Whether an entry of `account_id` and `organization_id` from `source` is for this
    /// subscriber.
    pub fn takes_from(&self, account_id: &str, organization_id: &str, source: Source) -> bool {
        self.takes_place(account_id, organization_id) && self.sources.contains(&source)
    }

    /// Whether entries of `account_id` and `organization_id` are for this subscriber (from
    /// the sources it takes).
    pub fn takes_place(&self, account_id: &str, organization_id: &str) -> bool {
        (self.accounts.is_empty() || self.accounts.contains(account_id))
            && (self.organizations.is_empty() || self.organizations.contains(organization_id))
    }

    /// Whether it takes every entry: no account, organization, source or kind of entry
    /// left out.
    pub fn takes_every_entry(&self) -> bool {
        let every_kind = match &self.wire {
            Wire::Webhook(_) => true,
            Wire::Record(record) => matches!(**record, Record::Table(_)) && !self.opt_outs_only,
        };
        every_kind
            && self.echoes.is_empty()
            && self.accounts.is_empty()
            && self.organizations.is_empty()
            && Source::ALL.iter().all(|s| self.sources.contains(s))
    }
}

/// The configured subscribers.
pub fn configured(settings: &[SubscriberSettings]) -> Vec<Arc<Subscriber>> {
    settings
        .iter()
        .filter_map(Subscriber::new)
        .map(Arc::new)
        .collect()
}

/// Gives every configured subscriber a state (a new one starts at the beginning of the
/// ledger).
pub async fn ensure(
    pool: &Pool,
    subscribers: &[Arc<Subscriber>],
) -> Result<(), crate::store::Error> {
    let starts: Vec<(&str, i64)> = subscribers
        .iter()
        .map(|s| (s.name.as_str(), s.start_cursor))
        .collect();
    pool.ensure_subscribers(&starts).await
}

/// Runs a sender per subscriber, each posting through `http` (see [`http_client`]), until
/// `stop`; returns when every sender has.
pub async fn run(
    pool: Pool,
    subscribers: Vec<Arc<Subscriber>>,
    http: reqwest::Client,
    stop: CancellationToken,
) {
    let listed = (Running::default(), Arc::default());
    run_listed(pool, subscribers, http, listed, stop).await;
}

/// [`run`], each sender listed in `running` while it runs, so that it can be asked to try
/// at once ([`Running::try_now`]), and counting its requests in `metrics`.
pub async fn run_listed(
    pool: Pool,
    subscribers: Vec<Arc<Subscriber>>,
    http: reqwest::Client,
    (running, metrics): (Running, Arc<crate::metrics::Metrics>),
    stop: CancellationToken,
) {
    if subscribers.is_empty() {
        return;
    }
    if let Err(error) = ensure(&pool, &subscribers).await {
        // Each sender creates nothing itself: it waits for its state, reading it again.
        tracing::warn!(%error, "cannot record the subscribers' states yet");
    }
    let mut senders = tokio::task::JoinSet::new();
    for subscriber in subscribers {
        let sender =
            Sender::new(pool.clone(), subscriber, http.clone()).counted_in(metrics.clone());
        senders.spawn(sender.run_listed(running.clone(), stop.clone()));
    }
    while let Some(ended) = senders.join_next().await {
        if let Err(error) = ended {
            tracing::error!(%error, "a subscriber's sender ended abnormally");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AccountId, Timestamp};
    use chrono::Utc;

    fn entry(account: &AccountId) -> LedgerEntry {
        LedgerEntry {
            seq: 1,
            organization_id: "org_1".into(),
            lead_id: Some("lead_1".into()),
            phone_number: "+12025550143".into(),
            opted_out: true,
            occurred_at: Timestamp(Utc::now()),
            recorded_at: Timestamp(Utc::now()),
            source: Source::Webhook,
            event_ref: "event:evt_1".into(),
            superseded: false,
            account_id: account.clone(),
            push: None,
            echo_of: None,
        }
    }

    #[test]
    fn a_subscriber_or_destination_scoped_to_accounts_takes_their_entries_alone() {
        let party: AccountId = "party".parse().expect("an account");
        let candidate: AccountId = "candidate".parse().expect("an account");
        let mut settings = SubscriberSettings::new(
            "crm",
            "http://127.0.0.1:9/hooks",
            "whsec_c2VjcmV0LXNoYXJlZC13aXRoLXRoZS1jcm0=",
        );
        settings.scope.accounts = vec!["party".into()];
        let crm = Subscriber::new(&settings).expect("a subscriber");
        assert!(crm.takes(&entry(&party)));
        assert!(!crm.takes(&entry(&candidate)));
        assert!(!crm.takes_every_entry());
        // Any kind: the sender takes every kind alike.
        let system: DestinationSettings = toml::from_str(
            "name = \"system\"\nkind = \"action_network\"\nbase_url = \"http://127.0.0.1:9/v2\"\n\
             api_key = \"key\"\naccounts = [\"candidate\"]\n",
        )
        .expect("a destination");
        let keys =
            crate::settings::Live::new(crate::settings::keys_of(std::slice::from_ref(&system)));
        let system = Subscriber::destination(&system, keys);
        assert!(system.takes(&entry(&candidate)));
        assert!(!system.takes(&entry(&party)));
    }
}
