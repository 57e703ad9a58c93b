//! Consent pushed to the campaign's other tools: its subscribers and its destinations.
//! Every consent ledger entry goes to each configured `[[subscriber]]` as a Standard
//! Webhooks message, and each opt-out to each `[[destination]]` (VAN, Action Network) in
//! that system's own API ([`record`]), strictly in `seq` order and at least once: one
//! sender per subscriber or destination ([`sender`]) with its durable cursor, its backoff
//! and its rate. Senders run on the leader alone, each in a task of its own, so one slow or
//! dead destination never delays another.

mod action_network;
mod answer;
pub mod destinations;
pub mod record;
mod sender;
mod try_now;
mod van;

use crate::model::SubscriberStatus;
use crate::model::Timestamp;
use crate::store::SubscriberStore;
use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use secrecy::SecretSlice;
use tokio_util::sync::CancellationToken;

pub use self::answer::{REQUEST_TIMEOUT, http_client};
pub use self::sender::{Attempt, Sender, backoff};
pub use self::try_now::{Running, TryNowError};
use crate::model::LedgerEntry;
use crate::model::{Source, SubscriberState, SubscriberView};
use crate::settings::{DestinationSettings, SubscriberSettings};
use crate::store::Pool;
use crate::store::ReadStore as _;

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
}

/// What a sender's requests are.
pub enum Wire {
    /// The daemon's own format: a batch of entries per signed Standard Webhooks message.
    Webhook { url: String, key: SecretSlice<u8> },
    /// A system of record, written an entry at a time in its own API.
    Record(Box<record::Record>),
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("Subscriber");
        f.field("name", &self.name);
        match &self.wire {
            Wire::Webhook { url, .. } => f.field("url", &crate::settings::redacted_url(url)),
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
            wire: Wire::Webhook {
                url: settings.url.clone(),
                key: SecretSlice::from(settings.key()?),
            },
            accounts: settings.accounts.iter().cloned().collect(),
            organizations: settings.organizations.iter().cloned().collect(),
            sources: settings.sources.clone(),
            opt_outs_only: false,
            batch: settings.batch,
            max_backoff: std::time::Duration::from_secs(settings.max_backoff_secs),
            requests_per_second: None,
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
            wire: Wire::Record(Box::new(record::Record::new(settings, keys))),
            accounts: settings.accounts.iter().cloned().collect(),
            organizations: settings.organizations.iter().cloned().collect(),
            sources: settings.sources.clone(),
            opt_outs_only: !settings.opt_ins,
            batch: destinations::BATCH,
            max_backoff: std::time::Duration::from_secs(settings.max_backoff_secs),
            requests_per_second: std::num::NonZeroU32::new(settings.requests_per_second),
        }
    }

    /// Whether `entry` is for this subscriber.
    pub fn takes(&self, entry: &LedgerEntry) -> bool {
        let kind = match &self.wire {
            Wire::Webhook { .. } => true,
            Wire::Record(_) => !entry.superseded && (entry.opted_out || !self.opt_outs_only),
        };
        kind && self.takes_from(&entry.account_id, &entry.organization_id, entry.source)
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
        !self.is_destination()
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
    let names: Vec<&str> = subscribers.iter().map(|s| s.name.as_str()).collect();
    pool.ensure_subscribers(&names).await
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

/// Tries the next delivery to `name` now instead of at the end of its backoff: at once when
/// its sender runs in this process (`running`: this replica leads), else by making its next
/// attempt due now, which the leader's sender notices within a poll. Returns its view after.
pub async fn retry(
    pool: &Pool,
    configured: &[SubscriberSettings],
    running: Option<&Running>,
    name: &str,
) -> Result<SubscriberView, ReplayError> {
    let settings = configured
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| ReplayError::Unknown(name.to_owned()))?;
    pool.ensure_subscribers(&[name]).await?;
    let tried_here = match running {
        Some(running) => running.try_now(name).await.is_ok(),
        None => false,
    };
    if !tried_here {
        pool.retry_subscriber(name).await?;
        crate::signal::ledger_grew();
    }
    tracing::info!(subscriber = name, tried_here, "subscriber retried at once");
    Ok(view(pool, settings, state_of(pool, name).await?, Utc::now()).await?)
}

/// Why a replay was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("no subscriber named {0:?} is configured")]
    Unknown(String),
    #[error("no destination named {0:?} is configured")]
    UnknownDestination(String),
    #[error("fromSeq must be at least 1")]
    BeforeTheStart,
    #[error("fromSeq {from} is past the subscriber's cursor ({cursor}); a replay only rewinds")]
    Forward { from: i64, cursor: i64 },
    #[error(transparent)]
    Database(#[from] crate::store::Error),
}

/// Rewinds `name` so that entries from `from_seq` on are sent again (and enables it if it
/// was disabled); returns its view after the replay.
pub async fn replay(
    pool: &Pool,
    configured: &[SubscriberSettings],
    name: &str,
    from_seq: i64,
) -> Result<SubscriberView, ReplayError> {
    let settings = configured
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| ReplayError::Unknown(name.to_owned()))?;
    rewind(pool, name, from_seq).await?;
    crate::signal::ledger_grew();
    tracing::info!(subscriber = name, from_seq, "subscriber rewound");
    Ok(view(pool, settings, state_of(pool, name).await?, Utc::now()).await?)
}

/// Sets the cursor of `name` back to before `from_seq` and enables it: a replay only
/// rewinds.
async fn rewind(pool: &Pool, name: &str, from_seq: i64) -> Result<(), ReplayError> {
    if from_seq < 1 {
        return Err(ReplayError::BeforeTheStart);
    }
    pool.ensure_subscribers(&[name]).await?;
    let state = state_of(pool, name).await?;
    if from_seq - 1 > state.cursor {
        return Err(ReplayError::Forward {
            from: from_seq,
            cursor: state.cursor,
        });
    }
    pool.replay_subscriber(name, from_seq - 1).await?;
    Ok(())
}

async fn state_of(pool: &Pool, name: &str) -> Result<SubscriberState, crate::store::Error> {
    let state = pool.subscriber_state(name).await?;
    Ok(state.unwrap_or_else(|| SubscriberState {
        name: name.to_owned(),
        cursor: 0,
        generation: 0,
        disabled: false,
        failures: 0,
        next_attempt_ms: None,
        last_error: None,
        last_success_ms: None,
    }))
}

/// Every configured subscriber as shown to people and tools, in configuration order.
pub async fn views(
    pool: &Pool,
    configured: &[SubscriberSettings],
) -> Result<Vec<SubscriberView>, crate::store::Error> {
    let now = Utc::now();
    let mut views = Vec::with_capacity(configured.len());
    for settings in configured {
        let state = state_of(pool, &settings.name).await?;
        views.push(view(pool, settings, state, now).await?);
    }
    Ok(views)
}

async fn view(
    pool: &Pool,
    settings: &SubscriberSettings,
    state: SubscriberState,
    now: DateTime<Utc>,
) -> Result<SubscriberView, crate::store::Error> {
    let head = pool.ledger_head().await?;
    let oldest = pool.changes(state.cursor, 1).await?;
    let lag_seconds = oldest.first().map_or(0.0, |e| {
        ((now - e.recorded_at.at()).num_milliseconds().max(0) as f64) / 1000.0
    });
    let at = |ms: i64| DateTime::from_timestamp_millis(ms).map(Timestamp);
    let retrying = state.failures > 0;
    Ok(SubscriberView {
        name: settings.name.clone(),
        url: crate::settings::redacted_url(&settings.url),
        cursor: state.cursor,
        lag_entries: (head - state.cursor).max(0),
        lag_seconds,
        state: match (state.disabled, retrying) {
            (true, _) => SubscriberStatus::Disabled,
            (false, true) => SubscriberStatus::Retrying,
            (false, false) => SubscriberStatus::Active,
        },
        last_error: state.last_error,
        last_success_at: state.last_success_ms.and_then(at),
        next_attempt_at: state
            .next_attempt_ms
            .filter(|_| retrying && !state.disabled)
            .and_then(at),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(account: &str) -> LedgerEntry {
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
            account_id: account.into(),
            push: None,
            echo_of: None,
        }
    }

    #[test]
    fn a_subscriber_or_destination_scoped_to_accounts_takes_their_entries_alone() {
        let mut settings = SubscriberSettings::new(
            "crm",
            "http://127.0.0.1:9/hooks",
            "whsec_c2VjcmV0LXNoYXJlZC13aXRoLXRoZS1jcm0=",
        );
        settings.accounts = vec!["party".into()];
        let crm = Subscriber::new(&settings).expect("a subscriber");
        assert!(crm.takes(&entry("party")));
        assert!(!crm.takes(&entry("candidate")));
        assert!(!crm.takes_every_entry());
        let mut van = DestinationSettings::new(
            "van",
            crate::settings::DestinationKind::Van,
            "http://127.0.0.1:9/v4",
            "key",
        );
        van.accounts = vec!["candidate".into()];
        let keys = crate::settings::Live::new(crate::settings::keys_of(std::slice::from_ref(&van)));
        let van = Subscriber::destination(&van, keys);
        assert!(van.takes(&entry("candidate")));
        assert!(!van.takes(&entry("party")));
    }
}
