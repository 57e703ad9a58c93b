//! Opt-outs shared across the accounts a daemon serves (`[consent] share_across_accounts`).
//!
//! The sharer follows the ledger as a subscriber does, on the leader alone, from a cursor
//! kept in `daemon_state`: each opt-out recorded in one account (any source: a webhook, a
//! reconciliation, a local change, an imported list) is recorded in every other account
//! for the whole account, as an `--account` import of that number would be. There it gets
//! an account-wide entry (organization `*`, which suppresses the number: a lead that
//! appears later with it is opted out) and an opt-out of each organization holding it;
//! each mirrored lead's opt-out is queued for that account's service. Every such entry is
//! `local`, by the actor `shared`, its evidence naming the entry it follows, and its
//! `event_ref` is `shared:{seq}` (once per entry, organization and account: sharing again
//! records nothing). Opt-ins are never shared, and neither are shared entries themselves.
//!
//! Sharing happens right after the original commits, in transactions of its own that give
//! way to a waiting delivery between slices: the ingest path pays nothing for it. The
//! cursor moves after each batch commits; a crash in between shares that batch again,
//! which records nothing twice.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::apply::imported::{self, Batch, ListedNumber, Scope};
use crate::model::{
    AccountId, ConsentObservation, KeptEvidence, OptOutToShare, SHARED_ACTOR, Source,
};
use crate::store::{Pool, ShareStore as _};

/// Where sharing stands: the last entry shared.
pub const CURSOR: &str = "share_cursor";
/// Opt-outs read per batch; the cursor moves after each.
const BATCH: i64 = 500;
/// Opt-outs recorded in one account between two looks at whether a delivery waits.
const SLICE: usize = 50;
/// Longest wait for the ledger to grow before reading it again.
const IDLE_POLL: Duration = Duration::from_secs(5);
/// Wait after a failure before trying again.
const RETRY: Duration = Duration::from_secs(5);

/// Shares opt-outs across `accounts`.
#[derive(Debug, Clone)]
pub struct Sharer {
    pool: Pool,
    accounts: Vec<AccountId>,
    /// Wakes the pushers when opt-outs were queued for a service.
    wake: Arc<Notify>,
}

impl Sharer {
    pub fn new(pool: impl Into<Pool>, accounts: Vec<AccountId>, wake: Arc<Notify>) -> Self {
        Self {
            pool: pool.into(),
            accounts,
            wake,
        }
    }

    /// Shares every opt-out recorded since the cursor; returns how many were read.
    pub async fn catch_up(&self) -> Result<u64, crate::store::Error> {
        let mut read = 0;
        loop {
            let after = self.cursor().await?;
            let batch = self.pool.opt_outs_to_share(after, BATCH).await?;
            let Some(last) = batch.last().map(|o| o.seq) else {
                return Ok(read);
            };
            self.share(&batch).await?;
            self.pool.set_state(CURSOR, &last.to_string()).await?;
            read += batch.len() as u64;
        }
    }

    /// Runs until `shutdown`: shares what the ledger holds, then waits for it to grow.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut follower = crate::signal::Follower::new();
        while !shutdown.is_cancelled() {
            let wait = match self.catch_up().await {
                Ok(_) => IDLE_POLL,
                Err(error) => {
                    tracing::warn!(%error, "cannot share opt-outs across accounts yet; trying again");
                    RETRY
                }
            };
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = follower.wait(wait) => {}
            }
        }
    }

    async fn cursor(&self) -> Result<i64, crate::store::Error> {
        let value = self.pool.state(CURSOR).await?;
        Ok(value.and_then(|v| v.parse().ok()).unwrap_or(0))
    }

    /// Records `batch` in every account but each opt-out's own, a slice at a time: the
    /// transaction ends between slices when a delivery waits for its turn (SQLite), as an
    /// import's does, so an acknowledgement waits for one slice, never for the batch in
    /// every account. A crash between two commits shares the batch again, which records
    /// nothing twice.
    async fn share(&self, batch: &[OptOutToShare]) -> Result<(), crate::store::Error> {
        let now = Utc::now();
        let mut tx = self.pool.begin_write().await?;
        let mut pushes = 0;
        for account in &self.accounts {
            // The first opt-out of each number from another account.
            let mut seen = HashSet::new();
            let from: Vec<&OptOutToShare> = batch
                .iter()
                .filter(|o| {
                    !o.derived && o.account_id != *account && seen.insert(o.phone_number.as_str())
                })
                .collect();
            for slice in from.chunks(SLICE) {
                pushes += record(&mut tx, account, slice, now).await?;
                if tx.wanted_by_ingest() {
                    tx.commit().await?;
                    crate::signal::ledger_grew();
                    tx = self.pool.begin_write().await?;
                }
            }
        }
        tx.commit().await?;
        crate::signal::ledger_grew();
        if pushes > 0 {
            crate::pusher::wake_all(&self.wake);
        }
        Ok(())
    }
}

/// Records the opt-outs `from` (other accounts', one per number) in `account`, in `tx`:
/// the opt-outs queued for its service.
async fn record(
    tx: &mut crate::store::Tx<'_>,
    account: &AccountId,
    from: &[&OptOutToShare],
    now: chrono::DateTime<Utc>,
) -> Result<u64, crate::store::Error> {
    let numbers: Vec<ListedNumber> = from
        .iter()
        .map(|o| ListedNumber {
            phone_number: o.phone_number.clone(),
            line: 0,
        })
        .collect();
    let by_number: HashMap<&str, &OptOutToShare> =
        from.iter().map(|o| (o.phone_number.as_str(), *o)).collect();
    let entry = |number: &ListedNumber, organization: &str| {
        shared(by_number[number.phone_number.as_str()], organization)
    };
    let batch = Batch {
        scope: &Scope::Account,
        numbers: &numbers,
        now,
        dry_run: false,
        opted_out: true,
    };
    let counts = imported::record_opt_outs(tx, account, batch, entry).await?;
    if counts.recorded > 0 {
        tracing::info!(
            %account,
            recorded = counts.recorded,
            suppressed = counts.suppressed,
            pushes = counts.pushes,
            "opt-outs of other accounts shared"
        );
    }
    Ok(counts.pushes)
}

/// The entry recording `original` (an opt-out of another account) in `organization`.
fn shared(original: &OptOutToShare, organization: &str) -> ConsentObservation {
    ConsentObservation {
        organization_id: organization.to_owned(),
        phone_number: original.phone_number.clone(),
        lead_id: None,
        opted_out: true,
        occurred_at: original.occurred_at.at(),
        source: Source::Local,
        event_ref: format!("shared:{}", original.seq),
        tag_id: None,
        reason: Some(format!(
            "opted out in account {}, entry {}",
            original.account_id, original.seq
        )),
        evidence: Some(KeptEvidence::Shared {
            actor: SHARED_ACTOR.to_owned(),
            follows: original.seq,
            account_id: original.account_id.to_string(),
        }),
    }
}
