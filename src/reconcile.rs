//! The reconciler: compares the mirror with the service and repairs every difference
//! through the same apply path, leaving a ledger entry for each repair. Webhooks make the
//! ledger fast; this makes it correct.
//!
//! Leads: a full scan per organization (the service has no "changed since"), one page of
//! 1000 at a time, each page written in one short transaction together with the cursor of
//! the next, so a crash resumes where it stopped and ingest is never starved. Pages come from
//! the configured API version ([`source`]); v2 pages no further than 100,000 leads of an
//! organization, and such an organization's scan ends there with an error saying so.
//! Messages (v3 only: v2.1 has no message endpoint): `GET /messages/{id}` for every tracked
//! message still not final after `message_stale_after_secs`, and for those `sent` recently,
//! awaiting their carrier receipt.

mod leads;
mod messages;
mod mirror;
mod schedule;
mod source;

pub use mirror::{mirror_lead, mirror_status, mirror_v2_lead};

use crate::store::PassStore;
use crate::store::codec;
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::apply::{self, PageApplied};
use crate::client::{ClientError, ServiceClient, models};
use crate::lease;
use crate::model::AccountId;
use crate::model::Lead;
use crate::model::{Source, StatusObservation};
use crate::settings::{Account, ReconcileSettings};
use crate::store::{ApplyTx, Connection, PageCheckpoint, PassRecord, Pool};
use source::LeadSource;

/// Leads per page: the service's maximum.
pub const PAGE_SIZE: u32 = 1000;
/// Page cache of a leads pass's connection, in KiB: a fixed bound, so the pass's memory does
/// not grow with the mirror. Measured against 8 MiB on a first import of 200,000 leads: no
/// slower within the noise, and peak RSS the same as at 20,000 leads (8 MiB filled up only
/// on the larger mirror, for a ratio of 1.23-1.33).
const PAGE_CACHE_KIB: u32 = 4 * 1024;
/// WAL pages after which a leads pass's commit checkpoints (SQLite's default: 1000). A page
/// of new leads writes well over 1000, so the default would copy every commit back at once;
/// this lets one checkpoint (and one copy of each page) serve several pages.
const PASS_CHECKPOINT_PAGES: u32 = 10_000;
/// Message lookups in flight at once (the rate limiter still applies).
const MESSAGE_CONCURRENCY: usize = 8;
/// Message results written per transaction.
const MESSAGE_CHUNK: usize = 200;
/// Why a pass under v2 does not look up message statuses.
const NO_V2_MESSAGES: &str = "service.api_version is v2, whose API (v2.1) has no message endpoint: \
     message statuses are not reconciled, only received by webhook";

/// What one pass should cover.
#[derive(Debug, Clone)]
pub struct PassRequest {
    /// Organizations to scan; empty: the configured ones, else every one of the account.
    pub organizations: Vec<String>,
    pub leads: bool,
    pub messages: bool,
}

impl Default for PassRequest {
    fn default() -> Self {
        Self {
            organizations: Vec::new(),
            leads: true,
            messages: true,
        }
    }
}

/// What a pass did.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassSummary {
    pub id: String,
    pub started_at: String,
    pub finished_at: String,
    pub duration_ms: u64,
    pub organizations: Vec<String>,
    pub leads_scanned: u64,
    /// Leads the mirror did not know, now mirrored.
    pub leads_new: u64,
    /// Consent differences (the mirror said otherwise) found and made current.
    pub repaired: u64,
    /// Leads found not opted out with a number opted out before them (suppressed, or opted
    /// out in their organization): opted out here and queued for the service.
    pub suppressed: u64,
    pub messages_checked: u64,
    pub messages_refreshed: u64,
    /// Why the messages part was not run although asked for (under v2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages_skipped: Option<String>,
    pub errors: Vec<String>,
    /// Stopped early by a shutdown; the next pass resumes from the saved cursors.
    pub interrupted: bool,
}

/// Why a pass did not start.
#[derive(Debug, thiserror::Error)]
pub enum PassRefused {
    #[error("another reconciliation pass is running: {0}")]
    Running(lease::Held),
    #[error("cannot take the pass's leases: {0}")]
    Database(crate::store::Error),
}

/// Runs reconciliation passes, never two at once.
#[derive(Clone)]
pub struct Reconciler {
    pool: Pool,
    client: ServiceClient,
    source: LeadSource,
    settings: ReconcileSettings,
    /// How long a pass's leases last without renewal: how soon another replica can take
    /// up an organization whose pass died with its process.
    lease: std::time::Duration,
    running: Arc<tokio::sync::Mutex<()>>,
    /// The account of the service its client reads.
    account: AccountId,
}

impl Reconciler {
    pub fn new(pool: impl Into<Pool>, client: ServiceClient, settings: &ReconcileSettings) -> Self {
        Self {
            pool: pool.into(),
            source: LeadSource::of(&client),
            settings: settings.clone(),
            lease: lease::LEASE_TTL,
            running: Arc::new(tokio::sync::Mutex::new(())),
            account: client.account().clone(),
            client,
        }
    }

    /// Mirrors what its client reads as `account`'s, and scans `account`'s organizations
    /// (empty: every one).
    pub fn with_account(mut self, account: &Account) -> Self {
        self.account = account.id.clone();
        self.settings
            .organizations
            .clone_from(&account.organizations);
        self
    }

    /// Passes hold their leases for `lease` (the replicas' `replica.lease_secs`) instead of
    /// [`lease::LEASE_TTL`].
    pub fn with_lease(mut self, lease: std::time::Duration) -> Self {
        self.lease = lease;
        self
    }

    /// One pass, unless another pass of one of its organizations (or of the messages) is
    /// running anywhere on this database: then it is refused, naming that pass. Failures
    /// during the pass are collected in the summary, never raised: a pass does what it can.
    pub async fn run_pass(
        &self,
        request: &PassRequest,
        shutdown: &CancellationToken,
    ) -> Result<PassSummary, PassRefused> {
        let _guard = self.running.try_lock().map_err(|_| {
            PassRefused::Running(lease::Held {
                name: "reconcile".into(),
                holder: format!("{} (this process)", lease::process_holder()),
                expires_in_secs: 0,
            })
        })?;
        let started = Instant::now();
        let now = Utc::now();
        let mut summary = PassSummary {
            id: format!(
                "{}-{:08x}",
                now.format("%Y%m%dT%H%M%S"),
                rand::random::<u32>()
            ),
            started_at: codec::timestamp(now),
            ..PassSummary::default()
        };
        let organizations = if request.leads {
            match self.organizations(request).await {
                Ok(organizations) => organizations,
                Err(error) => {
                    summary
                        .errors
                        .push(format!("listing organizations: {error}"));
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        let leases = self
            .lease_pass(&summary.id, &organizations, request.messages)
            .await?;
        // The pass stops at its next safe point on a shutdown, or if a stall let its leases
        // lapse and another pass took one over.
        let stop = shutdown.child_token();
        let _stop_on_loss = {
            let (lost, stop) = (leases.lost().clone(), stop.clone());
            AbortOnDropHandle::new(tokio::spawn(async move {
                lost.cancelled().await;
                stop.cancel();
            }))
        };
        let shutdown = &stop;
        self.leads_passes(&organizations, shutdown, &mut summary)
            .await;
        summary.organizations = organizations;
        if request.messages && !summary.interrupted {
            if !self.source.reads_messages() {
                tracing::info!("message statuses not reconciled: {NO_V2_MESSAGES}");
                summary.messages_skipped = Some(NO_V2_MESSAGES.to_owned());
            } else if let Err(error) = self.messages_pass(shutdown, &mut summary).await {
                summary.errors.push(format!("messages: {error:#}"));
            }
        }
        if leases.lost().is_cancelled() {
            summary
                .errors
                .push("the pass's lease was taken over by another pass; stopped".into());
        }
        if let Err(error) = leases.release().await {
            tracing::warn!(%error, "cannot release the pass's leases; they lapse on their own");
        }
        summary.duration_ms = started.elapsed().as_millis() as u64;
        summary.finished_at = codec::timestamp(Utc::now());
        self.report(&summary).await;
        Ok(summary)
    }

    /// The leads pass of each organization in turn, each failure kept in the summary and
    /// recorded for `status`. Stops only at page boundaries: every organization started
    /// writes at least one page, so even a pass cut short makes progress.
    async fn leads_passes(
        &self,
        organizations: &[String],
        shutdown: &CancellationToken,
        summary: &mut PassSummary,
    ) {
        for organization in organizations {
            if summary.interrupted {
                break;
            }
            let pass_id = summary.id.clone();
            let Err(error) = self
                .leads_pass(&pass_id, organization, shutdown, summary)
                .await
            else {
                continue;
            };
            let error = format!("{error:#}");
            tracing::warn!(%organization, %error, "leads pass failed");
            summary.errors.push(format!("{organization}: {error}"));
            if let Err(cannot) = self
                .record_organization_error(&summary.id, organization, &error)
                .await
            {
                tracing::error!(%organization, error = %cannot, "cannot record the leads pass's error for status");
            }
        }
    }

    /// A finished pass in the metrics, the database (for `status`) and the log.
    async fn report(&self, summary: &PassSummary) {
        self.client.metrics().record_reconcile_pass(
            &self.account,
            summary.leads_scanned,
            summary.repaired,
            summary.messages_refreshed,
            summary.errors.len() as u64,
        );
        if let Err(error) = self.record_pass(summary).await {
            tracing::error!(%error, "cannot record the reconciliation summary");
        }
        tracing::info!(
            pass = %summary.id,
            organizations = summary.organizations.len(),
            leads_scanned = summary.leads_scanned,
            repaired = summary.repaired,
            messages_checked = summary.messages_checked,
            messages_refreshed = summary.messages_refreshed,
            errors = summary.errors.len(),
            duration_ms = summary.duration_ms,
            interrupted = summary.interrupted,
            "reconciliation pass finished"
        );
    }

    /// Takes the leases of a pass: one per organization scanned, and one for the messages.
    async fn lease_pass(
        &self,
        pass_id: &str,
        organizations: &[String],
        messages: bool,
    ) -> Result<lease::Leases, PassRefused> {
        // The account `default` keeps the names it had before accounts existed.
        let prefix = if self.account == crate::model::DEFAULT_ACCOUNT {
            "reconcile".to_owned()
        } else {
            format!("reconcile:{}", self.account)
        };
        let mut names: Vec<String> = organizations
            .iter()
            .map(|organization| format!("{prefix}:leads:{organization}"))
            .collect();
        if messages {
            names.push(format!("{prefix}:messages"));
        }
        let holder = format!("pass {pass_id} on {}", lease::process_holder());
        lease::Leases::acquire_for(&self.pool, names, &holder, self.lease)
            .await
            .map_err(|error| match error {
                lease::LeaseError::Held(held) => PassRefused::Running(held),
                lease::LeaseError::Database(error) => PassRefused::Database(error),
            })
    }

    async fn organizations(&self, request: &PassRequest) -> Result<Vec<String>, ClientError> {
        if !request.organizations.is_empty() {
            return Ok(request.organizations.clone());
        }
        if !self.settings.organizations.is_empty() {
            return Ok(self.settings.organizations.clone());
        }
        self.source.organizations().await
    }

    /// Scans one organization from its checkpoint (if a pass was interrupted) to the end.
    ///
    /// The pages are written through a connection of the pass's own ([`Self::pass_connection`]),
    /// closed at the end. The next page is fetched on another task while the
    /// current one is written, so a page costs the slower of the two rather than their sum.
    async fn record_pass(&self, summary: &PassSummary) -> Result<(), crate::store::Error> {
        let json = codec::json_param(summary)?;
        let pass = PassRecord {
            account: &self.account,
            id: &summary.id,
            started_at: &summary.started_at,
            finished_at: &summary.finished_at,
            summary: &json,
        };
        self.pool.record_pass(pass).await
    }

    async fn record_organization_error(
        &self,
        pass_id: &str,
        organization: &str,
        error: &str,
    ) -> Result<(), crate::store::Error> {
        self.pool
            .organization_failed(&self.account, pass_id, organization, Utc::now(), error)
            .await
    }
}
