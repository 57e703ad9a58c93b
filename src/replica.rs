//! This process among the replicas of one database: its heartbeat (so `status` lists who
//! is serving), and the leader's lease, under which the singleton work runs (the
//! reconciler's schedule and the pusher: two of them at once would scan and push twice).
//!
//! Every replica tries for the lease every third of a lease period. The leader renews it
//! at the same pace; a leader that dies stops renewing, its lease lapses after one period,
//! and another replica takes it at its next try: within two periods. A leader that stops
//! cleanly gives the lease back at once. A leader that finds its lease taken (it stalled
//! past a period) stops its duties at their next safe point and tries again like the rest.

use crate::model::Timestamp;
use crate::store::LeaseStore;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::lease::{self, LeaseError, Leases};
use crate::metrics::Metrics;
pub use crate::model::ReplicaSeen;
use crate::settings::ReplicaSettings;
use crate::store::Pool;

/// The lease the leader holds.
pub const LEADER_LEASE: &str = "leader";
/// Replicas not heard from for this long are no longer listed.
const LISTED_FOR_MS: i64 = 60_000;
/// Replicas not heard from for this long are forgotten.
const FORGOTTEN_AFTER_MS: i64 = 7 * 24 * 3600 * 1000;

/// This process as a replica.
#[derive(Debug, Clone)]
pub struct Replica {
    pool: Pool,
    name: String,
    lease: Duration,
    /// Where leadership is shown (`leader`).
    metrics: Arc<Metrics>,
}

impl Replica {
    /// `[replica]` settings: the name (default: host and process id) and lease period.
    pub fn new(pool: impl Into<Pool>, settings: &ReplicaSettings) -> Self {
        let name = match settings.name.trim() {
            "" => lease::process_holder(),
            name => name.to_owned(),
        };
        Self::with_lease(pool, name, settings.lease())
    }

    /// A replica with a lease period of `lease` (tests use short ones).
    pub fn with_lease(pool: impl Into<Pool>, name: String, lease: Duration) -> Self {
        Self {
            pool: pool.into(),
            name,
            lease,
            metrics: Arc::default(),
        }
    }

    /// Shows this replica's leadership in `metrics`.
    pub fn counted_in(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Says this replica is alive; forgets replicas long gone.
    pub async fn heartbeat(&self) -> Result<(), crate::store::Error> {
        let (name, forget) = (&self.name, FORGOTTEN_AFTER_MS);
        self.pool.heartbeat(name, forget).await
    }

    /// The leader's lease if it is free (or already ours); `None` while another leads.
    pub async fn try_lead(&self) -> Result<Option<Leases>, crate::store::Error> {
        let names = vec![LEADER_LEASE.to_owned()];
        match Leases::acquire_for(self.pool.clone(), names, &self.name, self.lease).await {
            Ok(lease) => Ok(Some(lease)),
            Err(LeaseError::Held(_)) => Ok(None),
            Err(LeaseError::Database(error)) => Err(error),
        }
    }

    /// Runs until `shutdown`: a heartbeat every third of a lease period and, whenever this
    /// replica holds the leader's lease, `duties` (given a token cancelled when the lease is
    /// lost or the daemon stops; they must return once it is).
    pub async fn run<F, Fut>(self, shutdown: CancellationToken, duties: F)
    where
        F: Fn(CancellationToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        tokio::join!(self.beat(&shutdown), self.lead(&shutdown, duties));
    }

    /// Heartbeats and tries for the lead come at this pace: a lease outlives two missed ones.
    fn every_third_of_the_lease(&self) -> tokio::time::Interval {
        let mut ticker = tokio::time::interval(self.lease / 3);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker
    }

    async fn beat(&self, shutdown: &CancellationToken) {
        let mut ticker = self.every_third_of_the_lease();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            if let Err(error) = self.heartbeat().await {
                tracing::warn!(%error, replica = %self.name, "cannot record the replica's heartbeat");
            }
        }
    }

    async fn lead<F, Fut>(&self, shutdown: &CancellationToken, duties: F)
    where
        F: Fn(CancellationToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut ticker = self.every_third_of_the_lease();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let lease = match self.try_lead().await {
                Ok(Some(lease)) => lease,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(%error, replica = %self.name, "cannot try for the leader's lease");
                    continue;
                }
            };
            tracing::info!(replica = %self.name, "leading: the reconciler's schedule and the pusher run here");
            self.metrics.leading(true);
            let stop = shutdown.child_token();
            let work = duties(stop.clone());
            tokio::pin!(work);
            tokio::select! {
                () = &mut work => {}
                () = lease.lost().cancelled() => {
                    tracing::warn!(replica = %self.name, "the leader's lease was taken over; stopping the leader's work");
                    stop.cancel();
                    work.await;
                }
            }
            self.metrics.leading(false);
            if !lease.lost().is_cancelled()
                && let Err(error) = lease.release().await
            {
                tracing::warn!(%error, "cannot give the leader's lease back; it lapses on its own");
            }
            if shutdown.is_cancelled() {
                return;
            }
        }
    }
}

/// The replicas heard from in the last minute, and which one leads.
pub async fn seen(pool: impl Into<Pool>) -> Result<Vec<ReplicaSeen>, crate::store::Error> {
    let rows = (pool.into()).replicas(LEADER_LEASE, LISTED_FOR_MS).await?;
    Ok(rows
        .into_iter()
        .map(|beat| ReplicaSeen {
            name: beat.name,
            last_seen: Timestamp(
                DateTime::<Utc>::from_timestamp_millis(beat.last_seen_ms).unwrap_or_default(),
            ),
            leader: beat.leader,
        })
        .collect())
}
