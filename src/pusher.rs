//! Local consent changes on their way to the service. The apply path records and queues
//! them ([`crate::apply::local`]) and recognises their echo; the [`Pusher`] sends each
//! queued change (v3: PATCH /leads `optOut`/`optIn`; v2: PUT /leads/{id}
//! `globalOptedOut`), retrying with a persisted backoff.

use crate::store::codec;
use crate::store::{PushStore, ReadStore};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound as _, TimeDelta, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use futures::TryStreamExt;

use crate::client::models::{ListLeads, Paging};
use crate::client::{ClientError, ServiceClient, V2LeadUpdate};
use crate::metrics::Push;
use crate::model::AccountId;
use crate::model::DuePush;
pub use crate::model::PushCounts;
use crate::model::backoff::Backoff;
use crate::model::text::Escaped;
use crate::settings::Account;
use crate::settings::ApiVersion;
use crate::store::Pool;

/// Longest wait between looks at the queue when nobody wakes the pusher (changes queued by
/// the CLI, which runs in another process).
const IDLE_POLL: Duration = Duration::from_secs(5);
/// How long the pusher lets the ledger's growth gather before it looks at the queue again.
const GROWN_COALESCE: Duration = Duration::from_millis(50);
/// First wait after a failed attempt; doubled per attempt up to [`MAX_BACKOFF`]. A consent
/// change is never given up on for a transient failure.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// Pause after the queue itself (the database) failed.
const QUEUE_FAILURE_PAUSE: Duration = Duration::from_secs(1);
/// Leads per page when v2 must scan an organization for a number (its maximum).
const V2_SCAN_PAGE: u32 = 1000;

/// What one call of [`Pusher::try_push`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempted {
    Sent { seq: i64 },
    Retry { seq: i64, next_attempt_at: String },
    Failed { seq: i64 },
}

/// Sends queued local changes to the service, oldest first, one at a time (so two changes
/// of one number reach the service in the order they were made).
#[derive(Clone)]
pub struct Pusher {
    pool: Pool,
    client: ServiceClient,
    wake: Arc<Notify>,
    /// The account whose changes its client sends.
    account: AccountId,
}

/// Wakes every account's pusher waiting on `wake` (a change was queued), and the next to
/// wait if none is.
pub fn wake_all(wake: &Notify) {
    wake.notify_waiters();
    wake.notify_one();
}

impl Pusher {
    pub fn new(pool: impl Into<Pool>, client: ServiceClient, wake: Arc<Notify>) -> Self {
        Self {
            pool: pool.into(),
            account: client.account().clone(),
            client,
            wake,
        }
    }

    /// Sends the changes of `account`.
    pub fn with_account(mut self, account: &Account) -> Self {
        self.account = account.id.clone();
        self
    }

    /// Attempts the oldest push due at `now`; `None` when nothing is due.
    pub async fn try_push(
        &self,
        now: DateTime<Utc>,
    ) -> Result<Option<Attempted>, crate::store::Error> {
        // Counting the attempt before sending is what lets a webhook that arrives before
        // the answer be recognised as an echo, and a crash mid-attempt still counts.
        let due = self.pool.take_due_pushes(&self.account, now).await?;
        let Some(due) = due else { return Ok(None) };
        let outcome = self.send(&due).await;
        let finished = Utc::now();
        let attempted = match outcome {
            Ok(lead_id) => {
                self.pool.push_sent(due.seq, &lead_id, finished).await?;
                self.client.metrics().push(&self.account, Push::Sent);
                tracing::info!(seq = due.seq, "local consent change pushed");
                Attempted::Sent { seq: due.seq }
            }
            Err(PushError::Permanent(error)) => {
                self.pool.push_failed(due.seq, &error, finished).await?;
                self.client.metrics().push(&self.account, Push::Failed);
                // Through `Escaped`: the service's text and the organization id may hold a line
                // break, which must not start a line of its own in a text log.
                tracing::warn!(seq = due.seq, error = %Escaped(&error), "local consent change refused by the service");
                self.pool
                    .note_error(&format!("push {}: {error}", due.seq))
                    .await;
                Attempted::Failed { seq: due.seq }
            }
            Err(PushError::Transient(error)) => {
                // To the millisecond, as times are shown: the time reported is the time stored.
                let next = (now.max(finished) + backoff(due.attempts)).trunc_subsecs(3);
                self.pool.retry_push_at(due.seq, &error, next).await?;
                let next_attempt_at = codec::timestamp(next);
                self.client.metrics().push(&self.account, Push::Retry);
                tracing::warn!(seq = due.seq, attempts = due.attempts, error = %Escaped(&error), %next_attempt_at, "push failed; will retry");
                Attempted::Retry {
                    seq: due.seq,
                    next_attempt_at,
                }
            }
        };
        Ok(Some(attempted))
    }

    /// Sends one change through the configured API version, finding the lead first when the
    /// mirror does not know it. Returns the lead id.
    #[tracing::instrument(
        name = "push",
        skip_all,
        fields(seq = due.seq, organization = %Escaped(&due.organization_id), attempt = due.attempts)
    )]
    async fn send(&self, due: &DuePush) -> Result<String, PushError> {
        let v2 = self.client.config().api_version == ApiVersion::V2;
        let lead_id = match (&due.lead_id, v2) {
            (Some(id), _) => id.clone(),
            (None, false) => self.find_lead(due).await?,
            (None, true) => self.find_lead_v2(due).await?,
        };
        if v2 {
            self.put_v2(&lead_id, due).await?;
        } else if due.opted_out {
            self.client.opt_out(&lead_id, due.tag_id.clone()).await?;
        } else {
            self.client.opt_in(&lead_id).await?;
        }
        Ok(lead_id)
    }

    /// `PUT /v2/leads/{id}` with `globalOptedOut`. `tagIds` there replaces the lead's whole
    /// tag list, so an opt-out's tag is added to the tags the lead has now.
    async fn put_v2(&self, lead_id: &str, due: &DuePush) -> Result<(), PushError> {
        let v2 = self.client.v2();
        let tag_ids = match &due.tag_id {
            Some(tag) if due.opted_out => {
                let mut tags = v2.lead(lead_id).await?.tag_ids;
                if !tags.contains(tag) {
                    tags.push(tag.clone());
                }
                Some(tags)
            }
            _ => None,
        };
        let update = V2LeadUpdate {
            global_opted_out: Some(due.opted_out),
            tag_ids,
            ..V2LeadUpdate::default()
        };
        v2.update_lead(lead_id, &update).await?;
        Ok(())
    }

    /// v2 cannot look a lead up by number: the organization's leads are scanned for it.
    async fn find_lead_v2(&self, due: &DuePush) -> Result<String, PushError> {
        let phone = due.phone_number.clone();
        let found = self
            .client
            .v2()
            .organization_leads(&due.organization_id, Some(V2_SCAN_PAGE))
            .try_filter(move |lead| std::future::ready(lead.phone_number == phone))
            .try_next()
            .await;
        match found {
            Ok(Some(lead)) => Ok(lead.id),
            Ok(None) => Err(no_such_lead(due)),
            Err(ClientError::CursorDepthExceeded { .. }) => Err(PushError::Permanent(format!(
                "no lead with this number among the first 100,000 leads of organization {}, \
                 which is as far as the v2 API pages; v3 can find it (service.api_version)",
                Escaped(&due.organization_id)
            ))),
            Err(error) => Err(error.into()),
        }
    }

    async fn find_lead(&self, due: &DuePush) -> Result<String, PushError> {
        let query = ListLeads {
            phone_number: Some(due.phone_number.clone()),
            organization_id: Some(due.organization_id.clone()),
            ..ListLeads::default()
        };
        let page = self
            .client
            .leads_page(&query, &Paging::first(Some(1)))
            .await?;
        page.items
            .into_iter()
            .next()
            .map(|lead| lead.id)
            .ok_or_else(|| no_such_lead(due))
    }

    /// The earliest time a pending push is due, if any.
    async fn next_due(&self) -> Result<Option<DateTime<Utc>>, crate::store::Error> {
        self.pool.next_push_due(&self.account).await
    }

    /// Runs until `shutdown`: pushes whatever is due, then sleeps until the next push is due,
    /// a change is queued in this process, the ledger grows (an opt-out a source or an
    /// import recorded queues its pushes in the transaction that appends it), or
    /// [`IDLE_POLL`] passes.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut grown = crate::signal::Follower::new();
        let mut looked = tokio::time::Instant::now();
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            let wait = match self.try_push(Utc::now()).await {
                Ok(Some(_)) => continue,
                Ok(None) => match self.next_due().await {
                    Ok(Some(at)) => (at - Utc::now())
                        .to_std()
                        .unwrap_or(Duration::ZERO)
                        .min(IDLE_POLL),
                    Ok(None) => IDLE_POLL,
                    Err(error) => {
                        tracing::error!(%error, "reading the push queue failed");
                        QUEUE_FAILURE_PAUSE
                    }
                },
                Err(error) => {
                    tracing::error!(%error, "the push queue failed; backing off");
                    self.pool.note_error(&format!("pusher: {error}")).await;
                    QUEUE_FAILURE_PAUSE
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = self.wake.notified() => {}
                () = grown.wait(wait) => {
                    // Under a stream of deliveries the ledger grows all the time: one look at
                    // the queue per GROWN_COALESCE at most; a lone entry is looked at at once.
                    tokio::time::sleep_until(looked + GROWN_COALESCE.min(wait)).await;
                }
            }
            looked = tokio::time::Instant::now();
        }
        tracing::info!("pusher stopped");
    }
}

fn no_such_lead(due: &DuePush) -> PushError {
    PushError::Permanent(format!(
        "the service has no lead with this number in organization {}",
        Escaped(&due.organization_id)
    ))
}

/// The wait after the `attempts`-th failed attempt: [`Backoff::step`], without jitter. The
/// time is stored and shown (`status`, the console) and documented as "1 s doubling to 1 h".
fn backoff(attempts: i64) -> TimeDelta {
    let failures = u32::try_from(attempts.max(0)).unwrap_or(u32::MAX);
    let wait = Backoff {
        first: FIRST_BACKOFF,
        most: MAX_BACKOFF,
    }
    .step(failures);
    TimeDelta::from_std(wait).unwrap_or(TimeDelta::hours(1))
}

#[derive(Debug)]
enum PushError {
    /// The service refused the change; sending it again would not help.
    Permanent(String),
    Transient(String),
}

impl From<ClientError> for PushError {
    fn from(error: ClientError) -> Self {
        let permanent = match &error {
            ClientError::Invalid { .. } => true,
            ClientError::Api { status, .. } => {
                (400..500).contains(status) && *status != 408 && *status != 429
            }
            _ => false,
        };
        if permanent {
            PushError::Permanent(error.to_string())
        } else {
            PushError::Transient(error.to_string())
        }
    }
}

pub async fn counts(pool: impl Into<Pool>) -> Result<PushCounts, crate::store::Error> {
    (pool.into()).push_counts().await
}
