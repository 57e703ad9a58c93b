//! Opt-outs held in every member of their caller ([`crate::model::caller`]): each
//! `[[caller]]` from `[consent] revoke_all_from` on (the FCC's revoke-all rule), and, with
//! `[consent] share_across_accounts`, every account always.
//!
//! The sharer follows the ledger as a subscriber does, on the leader alone, from a cursor
//! kept in `daemon_state`: each opt-out recorded in a member (any source: a webhook, a
//! reconciliation, a local change, an imported list, a source read back, a decided reply)
//! and given on or after its caller's date is recorded in every other member: in a member
//! account for the whole account, as an `--account` import of that number would be (an
//! account-wide entry, organization `*`, which suppresses the number: a lead that appears
//! later with it is opted out, and an opt-out of each organization holding it); in a member
//! organization for it. Each mirrored lead's opt-out is queued for that account's service.
//! Every such entry is `local`, by the actor `shared`, its evidence naming the entry it
//! follows, and for a caller the caller and the rule; its `event_ref` is `shared:{seq}`
//! (once per entry, organization and account: sharing again records nothing). Opt-ins are
//! never shared, and neither are shared entries themselves.
//!
//! The callers in force change on reload; when they do, the sharer reads the ledger again
//! from its start (recording nothing twice), so that a member added has what the caller's
//! other members were told since the date. A member removed keeps what it had.
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
use crate::model::caller::{Binds, Caller, Member, REVOKE_ALL_RULE};
use crate::model::{ConsentObservation, KeptEvidence, OptOutToShare, SHARED_ACTOR, Source};
use crate::settings::Live;
use crate::store::{Pool, ShareStore as _};

/// Where sharing stands: the last entry shared.
pub const CURSOR: &str = "share_cursor";
/// The callers the cursor was moved for: when those in force differ, it starts again.
const CALLERS: &str = "share_callers";
/// Opt-outs read per batch; the cursor moves after each.
const BATCH: i64 = 500;
/// Opt-outs recorded in one account between two looks at whether a delivery waits.
const SLICE: usize = 50;
/// Longest wait for the ledger to grow before reading it again.
const IDLE_POLL: Duration = Duration::from_secs(5);
/// Wait after a failure before trying again.
const RETRY: Duration = Duration::from_secs(5);

/// Holds each opt-out in every member of its caller.
#[derive(Debug, Clone)]
pub struct Sharer {
    pool: Pool,
    callers: Live<Vec<Caller>>,
    /// Wakes the pushers when opt-outs were queued for a service.
    wake: Arc<Notify>,
}

impl Sharer {
    pub fn new(pool: impl Into<Pool>, callers: Live<Vec<Caller>>, wake: Arc<Notify>) -> Self {
        Self {
            pool: pool.into(),
            callers,
            wake,
        }
    }

    /// Shares every opt-out recorded since the cursor; returns how many were read.
    pub async fn catch_up(&self) -> Result<u64, crate::store::Error> {
        let callers = self.callers.current();
        if callers.is_empty() {
            return Ok(0);
        }
        self.start_again_if_changed(&callers).await?;
        let mut read = 0;
        loop {
            let after = self.cursor().await?;
            let batch = self.pool.opt_outs_to_share(after, BATCH).await?;
            let Some(last) = batch.last().map(|o| o.seq) else {
                return Ok(read);
            };
            self.share(&callers, &batch, Rule::OfItsDay).await?;
            self.pool.set_state(CURSOR, &last.to_string()).await?;
            read += batch.len() as u64;
        }
    }

    /// Holds every opt-out of `caller` recorded up to now in each of its members, whatever
    /// its date (`callers apply`: a campaign ready before the rule); returns how many
    /// opt-outs were read. Recorded once: applying again records nothing.
    pub async fn apply_early(&self, caller: &Caller) -> Result<u64, crate::store::Error> {
        let caller = Caller {
            binds: Binds::Always,
            ..caller.clone()
        };
        let callers = [caller];
        let (mut after, mut read) = (0, 0);
        loop {
            let batch = self.pool.opt_outs_to_share(after, BATCH).await?;
            let Some(last) = batch.last().map(|o| o.seq) else {
                return Ok(read);
            };
            self.share(&callers, &batch, Rule::AppliedEarly).await?;
            after = last;
            read += batch.len() as u64;
        }
    }

    /// When the callers in force are not those the cursor moved for, back to the ledger's
    /// start.
    async fn start_again_if_changed(&self, callers: &[Caller]) -> Result<(), crate::store::Error> {
        let described = describe(callers);
        if self.pool.state(CALLERS).await?.as_deref() != Some(described.as_str()) {
            self.pool.set_state(CURSOR, "0").await?;
            self.pool.set_state(CALLERS, &described).await?;
        }
        Ok(())
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

    /// Records `batch` in every other member of each opt-out's caller, a slice at a time:
    /// the transaction ends between slices when a delivery waits for its turn (SQLite), as
    /// an import's does, so an acknowledgement waits for one slice, never for the batch in
    /// every member. A crash between two commits shares the batch again, which records
    /// nothing twice.
    async fn share(
        &self,
        callers: &[Caller],
        batch: &[OptOutToShare],
        rule: Rule,
    ) -> Result<(), crate::store::Error> {
        let now = Utc::now();
        let mut tx = self.pool.begin_write().await?;
        let mut pushes = 0;
        for (target, from) in targets(callers, batch) {
            for slice in from.chunks(SLICE) {
                pushes += record(&mut tx, &target, slice, rule, now).await?;
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

/// Why a spread opt-out holds: its caller's rule in force on its day, or applied early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    OfItsDay,
    AppliedEarly,
}

/// The callers, as the cursor remembers them.
fn describe(callers: &[Caller]) -> String {
    callers
        .iter()
        .map(|c| {
            let members: Vec<String> = c.members.iter().map(Member::to_string).collect();
            format!("{}={}@{:?}", c.shown(), members.join(","), c.binds)
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// Where an opt-out is held: a member, with the caller that binds it.
struct Target<'c> {
    member: &'c Member,
    caller: &'c Caller,
}

/// Each member and the opt-outs of `batch` to hold there (the first of each number),
/// those given while their caller binds.
fn targets<'c, 'b>(
    callers: &'c [Caller],
    batch: &'b [OptOutToShare],
) -> Vec<(Target<'c>, Vec<&'b OptOutToShare>)> {
    let mut targets: Vec<(Target<'c>, Vec<&'b OptOutToShare>, HashSet<&'b str>)> = Vec::new();
    for caller in callers {
        for member in &caller.members {
            targets.push((Target { member, caller }, Vec::new(), HashSet::new()));
        }
    }
    for opt_out in batch.iter().filter(|o| !o.derived) {
        for caller in callers {
            if !caller.in_force_at(opt_out.occurred_at.at()) {
                continue;
            }
            for member in caller.others(&opt_out.account_id, &opt_out.organization_id) {
                let Some((_, from, seen)) = targets
                    .iter_mut()
                    .find(|(t, ..)| std::ptr::eq(t.member, member))
                else {
                    continue;
                };
                if seen.insert(opt_out.phone_number.as_str()) {
                    from.push(opt_out);
                }
            }
        }
    }
    targets
        .into_iter()
        .filter(|(_, from, _)| !from.is_empty())
        .map(|(target, from, _)| (target, from))
        .collect()
}

/// Records the opt-outs `from` (other members', one per number) in `target`, in `tx`:
/// the opt-outs queued for its service.
async fn record(
    tx: &mut crate::store::Tx<'_>,
    target: &Target<'_>,
    from: &[&OptOutToShare],
    rule: Rule,
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
        shared(
            by_number[number.phone_number.as_str()],
            organization,
            target.caller,
            rule,
        )
    };
    let (account, scope) = match target.member {
        Member::Account(account) => (account, Scope::Account),
        Member::Organization(account, organization) => {
            (account, Scope::Organizations(vec![organization.clone()]))
        }
    };
    let batch = Batch {
        scope: &scope,
        numbers: &numbers,
        now,
        dry_run: false,
        opted_out: true,
    };
    let counts = imported::record_opt_outs(tx, account, batch, entry).await?;
    if counts.recorded > 0 {
        tracing::info!(
            member = %target.member,
            caller = target.caller.shown(),
            recorded = counts.recorded,
            suppressed = counts.suppressed,
            pushes = counts.pushes,
            "opt-outs held in another member of their caller"
        );
    }
    Ok(counts.pushes)
}

/// The entry recording `original` (an opt-out of another member of `caller`) in
/// `organization`.
fn shared(
    original: &OptOutToShare,
    organization: &str,
    caller: &Caller,
    rule: Rule,
) -> ConsentObservation {
    let (named, rule_said) = match (&caller.name, caller.binds, rule) {
        (None, ..) => (None, None),
        (Some(name), _, Rule::AppliedEarly) => (
            Some(name.clone()),
            Some(format!(
                "{REVOKE_ALL_RULE}, applied early by `callers apply`"
            )),
        ),
        (Some(name), Binds::From(from), Rule::OfItsDay) => (
            Some(name.clone()),
            Some(format!(
                "{REVOKE_ALL_RULE}, in force from {}",
                from.to_rfc3339()
            )),
        ),
        (Some(name), ..) => (Some(name.clone()), Some(REVOKE_ALL_RULE.to_owned())),
    };
    let reason = match &named {
        Some(name) => format!(
            "opted out in account {} (organization {}), entry {}: binds every member of caller {name}",
            original.account_id, original.organization_id, original.seq
        ),
        None => format!(
            "opted out in account {}, entry {}",
            original.account_id, original.seq
        ),
    };
    ConsentObservation {
        organization_id: organization.to_owned(),
        phone_number: original.phone_number.clone(),
        lead_id: None,
        opted_out: true,
        occurred_at: original.occurred_at.at(),
        source: Source::Local,
        event_ref: format!("shared:{}", original.seq),
        tag_id: None,
        reason: Some(reason),
        evidence: Some(KeptEvidence::Shared {
            actor: SHARED_ACTOR.to_owned(),
            follows: original.seq,
            account_id: original.account_id.to_string(),
            caller: named,
            rule: rule_said,
        }),
    }
}
