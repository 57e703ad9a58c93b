//! The one apply path. Every writer calls it inside a transaction of its own: the ingest
//! commit and the worker ([`deliveries`]), the reconciler ([`lead_page`], [`statuses`]) and
//! local changes ([`local::record`]). It owns the plan: last-writer-wins, account sync, echo
//! recognition, ledger entries, consent states, message statuses and outbox marking. The
//! statements themselves are the storage layer's ([`crate::store::ApplyTx`]).

use crate::model::AccountId;
use crate::model::Timestamp;
use std::collections::HashSet;

use chrono::{DateTime, Utc};

use crate::events::{self, Event};
use crate::model::Lead;
use crate::model::{ConsentApplied, ConsentObservation, Source, StatusObservation};
use crate::store::{ApplyTx, SourceTx};

mod consent;
mod echo;
mod heard;
pub mod imported;
mod in_force;
pub mod sourced;
pub use heard::POST;
pub use in_force::{InForce, PostReaders};
pub mod local;
/// A reconciliation pass's page of leads.
mod page;
mod plan;
pub mod reviewed;
mod suppression;

pub use echo::{Echo, EchoMatcher, echo_reason};
pub use local::{LocalChange, LocalError, Recorded, record_local};
pub use page::{PageApplied, lead_page};

/// An outbox row ready to apply: its event as parsed from the stored bytes.
#[derive(Debug)]
pub struct Pending {
    pub id: i64,
    /// The account whose path it arrived on.
    pub account: AccountId,
    /// The ledger's `event_ref` of the event's entries.
    pub dedup_key: String,
    /// When the daemon received it: a time the event gives further past this than the
    /// tolerance ranks here ([`crate::model::trust::Trust::time`]).
    pub received_at: DateTime<Utc>,
    pub event: Result<Event, events::ParseError>,
}

impl Pending {
    /// A time the event gives, as the ledger ranks it: at the receipt when it lies further
    /// past it than the tolerance.
    pub fn ranked(
        &self,
        given: DateTime<Utc>,
        trust: &crate::model::trust::Trust,
    ) -> crate::model::trust::Ranked {
        trust.time(given, self.received_at)
    }
}

/// Which of the rows applying settles in the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Every row: applied, or quarantined with its reason (the worker's rows, pending).
    All,
    /// The quarantined only: the rows were inserted as applied in this same transaction
    /// (ingest's group commit), so they need no second write.
    Quarantined,
}

/// What applying a batch of outbox rows did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Outcome {
    pub applied: u64,
    pub quarantined: u64,
    /// Messages new to the mirror that were sent to a lead after an opt-out of its number
    /// (past the confirmation window, before a later opt-in), by the compliance report's
    /// rule: counted once the batch commits.
    pub sent_after_opt_out: u64,
    /// Returning webhooks recognised as the echo of a local change.
    pub echoes: u64,
    /// What the replies posted to each source came to, by source name.
    pub heard: Vec<(String, crate::store::SourceCounts)>,
    /// Event times further past their receipt than the tolerance, ranked at the receipt.
    pub future_times: u64,
}

/// What the configuration decides of how deliveries apply.
#[derive(Debug, Clone)]
pub struct Policy {
    /// `[consent] account_sync`.
    pub account_sync: bool,
    /// `[compliance] confirmation_window_secs`: a message this soon after an opt-out is
    /// its confirmation, not a message sent after it.
    pub confirmation_window: chrono::TimeDelta,
    /// The sources in force: what a reply posted to one becomes ([`heard`]).
    pub sources: InForce,
    /// `[consent]`'s trust boundary: how far a delivery's time may lie past its receipt.
    pub trust: crate::model::trust::Trust,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            account_sync: false,
            confirmation_window: chrono::TimeDelta::seconds(300),
            sources: InForce::default(),
            trust: crate::model::trust::Trust::default(),
        }
    }
}

impl Policy {
    /// The policy of `settings`, the posts of its sources read by `readers` (the kind
    /// registry's `crate::systems::post_reader_of`).
    pub fn of(settings: &crate::settings::Settings, readers: in_force::PostReaders) -> Self {
        let window = settings.compliance.confirmation_window_secs;
        Self {
            account_sync: settings.consent.account_sync,
            confirmation_window: chrono::TimeDelta::seconds(
                i64::try_from(window).unwrap_or(i64::MAX),
            ),
            sources: InForce::new(
                settings.source.clone(),
                settings.account_ids().unwrap_or_default(),
            )
            .reading_in(settings.consent.trust().region)
            .reading_posts_with(readers),
            trust: settings.consent.trust(),
        }
    }
}

impl Outcome {
    pub fn is_idle(&self) -> bool {
        self.applied == 0 && self.quarantined == 0
    }

    pub fn settled(&self) -> u64 {
        self.applied + self.quarantined
    }

    /// Counts the batch in `metrics`, once it has committed.
    pub fn count_in(&self, metrics: &crate::metrics::Metrics) {
        metrics.applied(self.applied, self.quarantined);
        metrics.echoes(self.echoes);
        metrics.messages_after_opt_out(self.sent_after_opt_out);
        metrics.future_times("service", self.future_times);
        for (name, counts) in &self.heard {
            metrics.source_counts(name, *counts);
        }
    }
}

/// Applies `rows` (in receipt order) inside the caller's transaction: mirror, statuses and
/// ledger, and each row marked applied or quarantined, so the caller's commit makes the
/// whole batch take effect at once. The rows of each account apply together, in their
/// order: nothing of one account (its leads, states, entries, statuses) is another's, so
/// that is what applying them one by one would do, at the cost of one pass per account
/// however the accounts' deliveries interleave.
pub async fn deliveries<T: ApplyTx + SourceTx + ?Sized>(
    tx: &mut T,
    rows: &[Pending],
    now: DateTime<Utc>,
    policy: &Policy,
    settle: Settle,
) -> Result<Outcome, crate::store::Error> {
    let (replies, rows): (Vec<&Pending>, Vec<&Pending>) = rows
        .iter()
        .partition(|row| matches!(row.event, Ok(Event::Heard(_))));
    let mut outcome = heard::record(tx, &replies, now, &policy.sources, settle).await?;
    let mut accounts: Vec<&AccountId> = Vec::new();
    for row in &rows {
        if !accounts.contains(&&row.account) {
            accounts.push(&row.account);
        }
    }
    for account in accounts {
        let of_account: Vec<&Pending> = rows
            .iter()
            .copied()
            .filter(|r| r.account == *account)
            .collect();
        let of_run = deliveries_of(tx, account, &of_account, now, policy, settle).await?;
        outcome.applied += of_run.applied;
        outcome.quarantined += of_run.quarantined;
        outcome.sent_after_opt_out += of_run.sent_after_opt_out;
        outcome.echoes += of_run.echoes;
        outcome.future_times += of_run.future_times;
    }
    Ok(outcome)
}

/// [`deliveries`] of one account.
async fn deliveries_of<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    rows: &[&Pending],
    now: DateTime<Utc>,
    policy: &Policy,
    settle: Settle,
) -> Result<Outcome, crate::store::Error> {
    let account_sync = policy.account_sync;
    let plan = plan::plan(tx, account, rows, account_sync, &policy.trust).await?;
    let echoes = plan.echoes;
    let quarantined: HashSet<i64> = plan.quarantined.iter().map(|(id, _)| *id).collect();
    let leads: Vec<(&Lead, DateTime<Utc>)> = rows
        .iter()
        .filter(|row| !quarantined.contains(&row.id))
        .filter_map(|row| match &row.event {
            Ok(Event::Consent(c)) => c
                .lead
                .as_deref()
                .map(|l| (l, row.ranked(c.occurred_at, &policy.trust).at)),
            _ => None,
        })
        .collect();
    tx.upsert_leads(account, &leads, now).await?;
    let sent_after_opt_out = message_statuses(tx, account, rows, now, policy).await?;
    for (id, reason) in &plan.quarantined {
        tracing::warn!(outbox_id = id, %reason, "delivery quarantined");
    }
    let applied: Vec<i64> = rows
        .iter()
        .map(|row| row.id)
        .filter(|id| !quarantined.contains(id))
        .collect();
    let settled: &[i64] = match settle {
        Settle::All => &applied,
        Settle::Quarantined => &[],
    };
    tx.settle_outbox(settled, &plan.quarantined, now).await?;
    // The ledger last: on PostgreSQL appenders queue on the ledger head from their first
    // entry until they commit, so that wait covers only the entries, the states and the
    // commit.
    record_consent(tx, account, plan.consent, now, account_sync).await?;
    Ok(Outcome {
        applied: applied.len() as u64,
        quarantined: plan.quarantined.len() as u64,
        sent_after_opt_out,
        echoes,
        heard: Vec::new(),
        future_times: plan.future_times,
    })
}

/// The message statuses of `rows` applied to the mirror; the messages among them sent after
/// an opt-out of their lead.
async fn message_statuses<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    rows: &[&Pending],
    now: DateTime<Utc>,
    policy: &Policy,
) -> Result<u64, crate::store::Error> {
    let statuses: Vec<StatusObservation> = rows
        .iter()
        .filter_map(|row| match &row.event {
            Ok(Event::MessageStatus(m)) => Some(StatusObservation {
                message: &m.message,
                lead_id: m.lead_id.as_deref(),
                organization_id: m.organization_id.as_deref(),
                occurred_at: row.ranked(m.occurred_at, &policy.trust).at,
                source: Source::Webhook,
            }),
            _ => None,
        })
        .collect();
    let sent_after_opt_out = tx
        .sent_after_opt_out(
            account,
            &new_messages(&statuses, policy.confirmation_window),
        )
        .await?;
    tx.apply_statuses(account, &statuses, now).await?;
    Ok(sent_after_opt_out)
}

/// The consent events of a batch in the ledger, with the leads a number's suppression keeps
/// opted out despite them (and, with account sync, the suppressions they start or end).
async fn record_consent<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    mut observations: Vec<ConsentObservation>,
    now: DateTime<Utc>,
    account_sync: bool,
) -> Result<(), crate::store::Error> {
    // Each pair once: a batch often holds several events of one number.
    let mut keys: Vec<(&str, &str)> = observations
        .iter()
        .map(|o| (o.organization_id.as_str(), o.phone_number.as_str()))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let states = tx.consent_states(account, &keys).await?;
    let events = observations.len();
    let kept = suppressed_by_events(tx, account, &observations, &states, now).await?;
    observations.extend(kept);
    let outcomes = consent::apply(tx, account, &observations, now, states).await?;
    if account_sync {
        suppression::follow(tx, account, &observations[..events], &outcomes[..events]).await?;
    }
    let kept: Vec<&ConsentObservation> = observations[events..].iter().collect();
    suppression::queue_pushes(tx, account, &kept, &outcomes[events..], now).await?;
    Ok(())
}

/// The statuses of messages to a known lead with a creation time, each message once, with
/// the time an opt-out must precede for it to count as sent after the opt-out.
fn new_messages<'a>(
    statuses: &'a [StatusObservation<'a>],
    window: chrono::TimeDelta,
) -> Vec<crate::store::NewMessage<'a>> {
    let mut seen = HashSet::new();
    statuses
        .iter()
        .filter_map(|s| {
            let created = DateTime::parse_from_rfc3339(s.message.created_at.as_deref()?).ok()?;
            let after = Timestamp(created.to_utc() - window);
            let created = Timestamp(created.to_utc());
            let lead_id = s.lead_id?;
            seen.insert(s.message.id.as_str())
                .then_some(crate::store::NewMessage {
                    id: &s.message.id,
                    lead_id,
                    created,
                    after,
                })
        })
        .collect()
}

/// The entries that keep opted out the leads of opt-in events older than the suppression
/// of their number (a late or reordered delivery), over the states stored before the batch.
async fn suppressed_by_events<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    observations: &[ConsentObservation],
    states: &crate::model::ConsentStates,
    now: DateTime<Utc>,
) -> Result<Vec<ConsentObservation>, crate::store::Error> {
    let opt_ins: Vec<&ConsentObservation> = observations
        .iter()
        .filter(|o| !o.opted_out && o.lead_id.is_some())
        .collect();
    if opt_ins.is_empty() {
        return Ok(Vec::new());
    }
    let phones: Vec<&str> = opt_ins.iter().map(|o| o.phone_number.as_str()).collect();
    let suppressions = tx.suppressions(account, &phones).await?;
    let mut kept: Vec<ConsentObservation> = Vec::new();
    for o in opt_ins {
        let Some(suppression) = suppressions.get(&o.phone_number) else {
            continue;
        };
        let Some(lead) = o.lead_id.as_deref() else {
            continue;
        };
        let stored = states
            .0
            .get(&(o.organization_id.clone(), o.phone_number.clone()));
        // Opted out there already: last-writer-wins keeps it so, and the service had that
        // opt-out (an organization's own opt-out is last-writer-wins against the lead's own
        // events).
        if stored.is_some_and(|s| s.rank.opted_out) {
            continue;
        }
        let by = suppression::suppressed_by(lead, Some(o.occurred_at), stored, Some(suppression));
        if let Some(by) = by
            && !kept.iter().any(|k| k.lead_id.as_deref() == Some(lead))
        {
            let (org, phone) = (&o.organization_id, &o.phone_number);
            kept.push(suppression::observation(org, phone, lead, by, now));
        }
    }
    Ok(kept)
}

/// Applies status observations (see [`ApplyTx::apply_statuses`]).
pub async fn statuses<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    observations: &[StatusObservation<'_>],
    now: DateTime<Utc>,
) -> Result<u64, crate::store::Error> {
    tx.apply_statuses(account, observations, now).await
}

/// Applies consent observations over the states stored for them, locking their numbers
/// first; for callers with observations of their own (tests, tools).
pub async fn consent<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    observations: &[ConsentObservation],
    now: DateTime<Utc>,
) -> Result<Vec<ConsentApplied>, crate::store::Error> {
    let keys: Vec<(&str, &str)> = observations
        .iter()
        .map(|o| (o.organization_id.as_str(), o.phone_number.as_str()))
        .collect();
    let states = locked_states(tx, account, &keys).await?;
    consent::apply(tx, account, observations, now, states).await
}

/// Locks the numbers of `keys` (organization, number), then reads their stored states.
pub(crate) async fn locked_states<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    keys: &[(&str, &str)],
) -> Result<crate::model::ConsentStates, crate::store::Error> {
    let mut phones: Vec<&str> = keys.iter().map(|(_, phone)| *phone).collect();
    phones.sort_unstable();
    phones.dedup();
    tx.lock_numbers(&phones).await?;
    tx.consent_states(account, keys).await
}
