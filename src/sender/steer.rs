//! Subscribers and destinations as people and tools see and steer them, alike: their
//! views, `retry` and `replay`, written once for both ([`Steered`]). What only a
//! destination has (outcomes, `check`) is in `destinations.rs`.

use std::future::Future;

use chrono::{DateTime, Utc};

use super::Running;
use crate::model::{
    DestinationStatus, DestinationView, SubscriberState, SubscriberStatus, SubscriberView,
    Timestamp,
};
use crate::settings::{DestinationSettings, SubscriberSettings};
use crate::store::{DestinationStore as _, Pool, ReadStore as _, SubscriberStore as _};

/// A configured subscriber or destination, as [`views`], [`retry`] and [`replay`] take it.
pub trait Steered: Sync {
    /// What people see of it.
    type View: serde::Serialize + Send;
    /// `subscriber` or `destination`, in logs.
    const WHAT: &'static str;
    /// A retry also ends its error (a destination stopped on its key or its lookups): a
    /// subscriber disabled by a 410 waits for a replay.
    const RETRY_ENABLES: bool;
    /// A replay also forgets what was not sent (a destination's unmatched and refused
    /// entries), so that they are tried again; what was sent stays sent.
    const REPLAY_FORGETS_UNSENT: bool;

    fn name(&self) -> &str;

    /// A replay forgets what was sent too, and sends it again (a warehouse, which keeps a
    /// row it is sent again once).
    fn replay_resends(&self) -> bool {
        false
    }

    /// The refusal of a name none of its kind has.
    fn unknown(name: &str) -> ReplayError;

    /// Its view, with its `state` and lag.
    fn view(
        &self,
        pool: &Pool,
        state: SubscriberState,
        lag: Lag,
    ) -> impl Future<Output = Result<Self::View, crate::store::Error>> + Send;
}

/// Why a retry, replay or listing of outcomes was refused.
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

/// How far a sender is behind the ledger's head.
#[derive(Debug, Clone, Copy)]
pub struct Lag {
    pub entries: i64,
    pub seconds: f64,
}

/// The configured one named `name`.
pub fn find<'a, S: Steered>(configured: &'a [S], name: &str) -> Result<&'a S, ReplayError> {
    configured
        .iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| S::unknown(name))
}

/// Every one of `configured` as shown, in configuration order.
pub async fn views<S: Steered>(
    pool: &Pool,
    configured: &[S],
) -> Result<Vec<S::View>, crate::store::Error> {
    let now = Utc::now();
    let mut views = Vec::with_capacity(configured.len());
    for settings in configured {
        views.push(view(pool, settings, now).await?);
    }
    Ok(views)
}

async fn view<S: Steered>(
    pool: &Pool,
    settings: &S,
    now: DateTime<Utc>,
) -> Result<S::View, crate::store::Error> {
    let state = state_of(pool, settings.name()).await?;
    let head = pool.ledger_head().await?;
    let oldest = pool.changes(state.cursor, 1).await?;
    let lag = Lag {
        entries: (head - state.cursor).max(0),
        seconds: oldest.first().map_or(0.0, |e| {
            ((now - e.recorded_at.at()).num_milliseconds().max(0) as f64) / 1000.0
        }),
    };
    settings.view(pool, state, lag).await
}

/// Tries the next delivery to `name` now instead of at the end of its backoff (and ends a
/// destination's error): at once when its sender runs in this process (`running`: this
/// replica leads), else by making its next attempt due now, which the leader's sender
/// notices within a poll. Returns its view after.
pub async fn retry<S: Steered>(
    pool: &Pool,
    configured: &[S],
    running: Option<&Running>,
    name: &str,
) -> Result<S::View, ReplayError> {
    let settings = find(configured, name)?;
    pool.ensure_subscribers(&[(name, 0)]).await?;
    if S::RETRY_ENABLES {
        pool.enable_subscriber(name).await?;
    }
    let tried_here = match running {
        Some(running) => running.try_now(name).await.is_ok(),
        None => false,
    };
    if !tried_here {
        pool.retry_subscriber(name).await?;
        crate::signal::ledger_grew();
    }
    tracing::info!(name, tried_here, "{} retried at once", S::WHAT);
    Ok(view(pool, settings, Utc::now()).await?)
}

/// Rewinds `name` so that entries from `from_seq` on are sent again (and enables it if it
/// was disabled); returns its view after the replay. A destination's answered actions are
/// never sent again (VAN has no idempotency key): what was sent stays sent.
pub async fn replay<S: Steered>(
    pool: &Pool,
    configured: &[S],
    name: &str,
    from_seq: i64,
) -> Result<S::View, ReplayError> {
    let settings = find(configured, name)?;
    rewind(pool, name, from_seq).await?;
    if S::REPLAY_FORGETS_UNSENT {
        pool.forget_unsent(name, from_seq, settings.replay_resends())
            .await?;
    }
    crate::signal::ledger_grew();
    tracing::info!(name, from_seq, "{} rewound", S::WHAT);
    Ok(view(pool, settings, Utc::now()).await?)
}

/// Sets the cursor of `name` back to before `from_seq` and enables it: a replay only
/// rewinds.
async fn rewind(pool: &Pool, name: &str, from_seq: i64) -> Result<(), ReplayError> {
    if from_seq < 1 {
        return Err(ReplayError::BeforeTheStart);
    }
    pool.ensure_subscribers(&[(name, 0)]).await?;
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

/// The state of `name`, a new one's when it has none yet.
pub(super) async fn state_of(
    pool: &Pool,
    name: &str,
) -> Result<SubscriberState, crate::store::Error> {
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
        refill_until: None,
        refill_reason: None,
    }))
}

fn at(ms: i64) -> Option<Timestamp> {
    DateTime::from_timestamp_millis(ms).map(Timestamp)
}

impl Steered for SubscriberSettings {
    type View = SubscriberView;
    const WHAT: &'static str = "subscriber";
    const RETRY_ENABLES: bool = false;
    const REPLAY_FORGETS_UNSENT: bool = false;

    fn name(&self) -> &str {
        &self.name
    }

    fn unknown(name: &str) -> ReplayError {
        ReplayError::Unknown(name.to_owned())
    }

    async fn view(
        &self,
        _pool: &Pool,
        state: SubscriberState,
        lag: Lag,
    ) -> Result<SubscriberView, crate::store::Error> {
        let retrying = state.failures > 0;
        Ok(SubscriberView {
            name: self.name.clone(),
            url: crate::settings::redacted_url(&self.url),
            cursor: state.cursor,
            lag_entries: lag.entries,
            lag_seconds: lag.seconds,
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
}

impl Steered for DestinationSettings {
    type View = DestinationView;
    const WHAT: &'static str = "destination";
    const RETRY_ENABLES: bool = true;
    const REPLAY_FORGETS_UNSENT: bool = true;

    fn name(&self) -> &str {
        &self.name
    }

    fn replay_resends(&self) -> bool {
        self.is_warehouse()
    }

    fn unknown(name: &str) -> ReplayError {
        ReplayError::UnknownDestination(name.to_owned())
    }

    async fn view(
        &self,
        pool: &Pool,
        state: SubscriberState,
        lag: Lag,
    ) -> Result<DestinationView, crate::store::Error> {
        let counts = pool.outcome_counts(&self.name).await?;
        Ok(DestinationView {
            name: self.name.clone(),
            kind: self.system.kind().to_owned(),
            cursor: state.cursor,
            lag_entries: lag.entries,
            lag_seconds: lag.seconds,
            state: match (state.disabled, state.failures > 0, state.refilling()) {
                (true, _, _) => DestinationStatus::Error,
                (false, true, _) => DestinationStatus::Retrying,
                (false, false, Some(_)) => DestinationStatus::Refilling,
                (false, false, None) => DestinationStatus::Active,
            },
            last_error: state
                .last_error
                .clone()
                .or_else(|| state.refilling().map(str::to_owned)),
            last_success_at: state.last_success_ms.and_then(at),
            sent: counts.sent,
            unmatched: counts.unmatched,
            refused: counts.refused,
            already: counts.already,
            through_leads: counts.through_leads,
            unconfirmed: counts.unconfirmed,
        })
    }
}
