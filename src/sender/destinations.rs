//! What only destinations have: their outcomes and `check` (their views, `retry` and
//! `replay` are the subscribers' own: `steer.rs`). Their senders are the subscribers'
//! ([`super::Sender`]).

use std::sync::Arc;

use super::steer::find;
use super::{ReplayError, Subscriber};
use crate::model::{OutcomeKind, OutcomeRecord};
use crate::settings::{DestinationKeys, DestinationSettings, Live};
use crate::store::{DestinationStore as _, Pool};
use crate::systems::{Record, Stop};

/// Entries read at a time by a destination's sender: each is its own request(s), so this
/// only bounds how often the cursor is read.
pub const BATCH: u32 = 100;
/// Most outcomes listed at once.
pub const MAX_LISTED: i64 = 1_000;

/// The configured destinations, as senders take them, their keys read from `keys` and what
/// they never write back found among `sources` (both of which a reload replaces).
pub fn configured(
    settings: &[DestinationSettings],
    keys: &Live<DestinationKeys>,
    sources: &Live<Vec<crate::settings::SourceSettings>>,
) -> Vec<Arc<Subscriber>> {
    settings
        .iter()
        .map(|d| {
            let destination = Subscriber::destination(d, keys.clone());
            Arc::new(destination.reading_back(d, keys.clone(), sources.clone()))
        })
        .collect()
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
