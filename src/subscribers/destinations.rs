//! The destinations as people and tools see and steer them: their views, their outcomes,
//! `check`, `retry` and `replay`. Their senders are the subscribers' ([`super::Sender`]).

use std::sync::Arc;

use chrono::Utc;

use super::record::{Record, Stop};
use super::{ReplayError, Running, Subscriber, state_of};
use crate::model::{DestinationStatus, DestinationView, OutcomeKind, OutcomeRecord, Timestamp};
use crate::settings::{DestinationKeys, DestinationSettings, Live};
use crate::store::{DestinationStore as _, Pool, ReadStore as _, SubscriberStore as _};

/// Entries read at a time by a destination's sender: each is its own request(s), so this
/// only bounds how often the cursor is read.
pub const BATCH: u32 = 100;
/// Most outcomes listed at once.
pub const MAX_LISTED: i64 = 1_000;

/// The configured destinations, as senders take them, their keys read from `keys` (which a
/// reload replaces).
pub fn configured(
    settings: &[DestinationSettings],
    keys: &Live<DestinationKeys>,
) -> Vec<Arc<Subscriber>> {
    settings
        .iter()
        .map(|d| Arc::new(Subscriber::destination(d, keys.clone())))
        .collect()
}

fn find<'a>(
    configured: &'a [DestinationSettings],
    name: &str,
) -> Result<&'a DestinationSettings, ReplayError> {
    configured
        .iter()
        .find(|d| d.name == name)
        .ok_or_else(|| ReplayError::UnknownDestination(name.to_owned()))
}

/// Every configured destination as shown, in configuration order.
pub async fn views(
    pool: &Pool,
    configured: &[DestinationSettings],
) -> Result<Vec<DestinationView>, crate::store::Error> {
    let mut views = Vec::with_capacity(configured.len());
    for settings in configured {
        views.push(view(pool, settings).await?);
    }
    Ok(views)
}

async fn view(
    pool: &Pool,
    settings: &DestinationSettings,
) -> Result<DestinationView, crate::store::Error> {
    let state = state_of(pool, &settings.name).await?;
    let head = pool.ledger_head().await?;
    let oldest = pool.changes(state.cursor, 1).await?;
    let now = Utc::now();
    let lag_seconds = oldest.first().map_or(0.0, |e| {
        ((now - e.recorded_at.at()).num_milliseconds().max(0) as f64) / 1000.0
    });
    let counts = pool.outcome_counts(&settings.name).await?;
    Ok(DestinationView {
        name: settings.name.clone(),
        kind: settings.kind.as_str().to_owned(),
        cursor: state.cursor,
        lag_entries: (head - state.cursor).max(0),
        lag_seconds,
        state: match (state.disabled, state.failures > 0) {
            (true, _) => DestinationStatus::Error,
            (false, true) => DestinationStatus::Retrying,
            (false, false) => DestinationStatus::Active,
        },
        last_error: state.last_error,
        last_success_at: state
            .last_success_ms
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(Timestamp),
        sent: counts.sent,
        unmatched: counts.unmatched,
        refused: counts.refused,
        already: counts.already,
        through_leads: counts.through_leads,
        unconfirmed: counts.unconfirmed,
    })
}

/// The entries of `name` with an outcome (only `state`'s when given), after `after_seq`.
pub async fn outcomes(
    pool: &Pool,
    configured: &[DestinationSettings],
    name: &str,
    state: Option<OutcomeKind>,
    after_seq: i64,
) -> Result<Vec<OutcomeRecord>, ReplayError> {
    find(configured, name)?;
    Ok(pool.outcomes(name, state, after_seq, MAX_LISTED).await?)
}

/// Ends the `error` of `name` and tries its next entry now (at once when its sender runs
/// here); returns its view after.
pub async fn retry(
    pool: &Pool,
    configured: &[DestinationSettings],
    running: Option<&Running>,
    name: &str,
) -> Result<DestinationView, ReplayError> {
    let settings = find(configured, name)?;
    pool.ensure_subscribers(&[name]).await?;
    pool.enable_subscriber(name).await?;
    let tried_here = match running {
        Some(running) => running.try_now(name).await.is_ok(),
        None => false,
    };
    if !tried_here {
        pool.retry_subscriber(name).await?;
        crate::signal::ledger_grew();
    }
    tracing::info!(
        destination = name,
        tried_here,
        "destination retried at once"
    );
    Ok(view(pool, settings).await?)
}

/// Rewinds `name` so that entries from `from_seq` on are tried again: what was unmatched
/// or refused is sent again, what was sent stays sent (VAN has no idempotency key: an
/// answered action is never repeated).
pub async fn replay(
    pool: &Pool,
    configured: &[DestinationSettings],
    name: &str,
    from_seq: i64,
) -> Result<DestinationView, ReplayError> {
    let settings = find(configured, name)?;
    super::rewind(pool, name, from_seq).await?;
    pool.forget_unsent(name, from_seq).await?;
    crate::signal::ledger_grew();
    tracing::info!(destination = name, from_seq, "destination rewound");
    Ok(view(pool, settings).await?)
}

/// What `destinations check` found of one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    pub name: String,
    /// `None`: its key works and its lookups found what it needs.
    pub problem: Option<String>,
}

/// Checks each of `configured` (only `name` when given): its key and its lookups.
pub async fn check(
    configured: &[DestinationSettings],
    name: Option<&str>,
    http: &reqwest::Client,
) -> Result<Vec<Checked>, ReplayError> {
    if let Some(name) = name {
        find(configured, name)?;
    }
    let keys = Live::new(crate::settings::keys_of(configured));
    let mut checked = Vec::new();
    for settings in configured
        .iter()
        .filter(|d| name.is_none_or(|n| n == d.name))
    {
        let record = Record::new(settings, keys.clone());
        let problem = record.prepare(http).await.err().map(|stop| match stop {
            Stop::Retry { error, .. } => format!("unreachable: {error}"),
            stop => stop.to_string(),
        });
        checked.push(Checked {
            name: settings.name.clone(),
            problem,
        });
    }
    Ok(checked)
}
