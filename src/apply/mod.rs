//! The one apply path. Every writer calls it inside a transaction of its own: the ingest
//! commit and the worker ([`deliveries`]), the reconciler ([`lead_page`], [`statuses`]) and
//! local changes ([`local::record`]). It owns the plan: last-writer-wins, account sync, echo
//! recognition, ledger entries, consent states, message statuses and outbox marking. The
//! statements themselves are the storage layer's ([`crate::store::ApplyTx`]).

use crate::model::Timestamp;
use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::events::{self, ConsentEvent, Event};
use crate::model::Lead;
use crate::model::{ConsentApplied, ConsentObservation, Holders, Source, StatusObservation};
use crate::store::ApplyTx;

mod consent;
mod echo;
pub mod imported;
pub mod local;
/// A reconciliation pass's page of leads.
mod page;
mod suppression;

pub use echo::{Echo, EchoMatcher, echo_reason};
pub use local::{LocalChange, LocalError, Recorded, record_local};
pub use page::{PageApplied, lead_page};

/// An outbox row ready to apply: its event as parsed from the stored bytes.
#[derive(Debug)]
pub struct Pending {
    pub id: i64,
    /// The account whose path it arrived on.
    pub account: String,
    /// The ledger's `event_ref` of the event's entries.
    pub dedup_key: String,
    pub event: Result<Event, events::ParseError>,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    pub applied: u64,
    pub quarantined: u64,
    /// Messages new to the mirror that were sent to a lead after an opt-out of its number
    /// (past the confirmation window, before a later opt-in), by the compliance report's
    /// rule: counted once the batch commits.
    pub sent_after_opt_out: u64,
    /// Returning webhooks recognised as the echo of a local change.
    pub echoes: u64,
}

/// What the configuration decides of how deliveries apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// `[consent] account_sync`.
    pub account_sync: bool,
    /// `[compliance] confirmation_window_secs`: a message this soon after an opt-out is
    /// its confirmation, not a message sent after it.
    pub confirmation_window: chrono::TimeDelta,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            account_sync: false,
            confirmation_window: chrono::TimeDelta::seconds(300),
        }
    }
}

impl Policy {
    pub fn of(settings: &crate::settings::Settings) -> Self {
        let window = settings.compliance.confirmation_window_secs;
        Self {
            account_sync: settings.consent.account_sync,
            confirmation_window: chrono::TimeDelta::seconds(
                i64::try_from(window).unwrap_or(i64::MAX),
            ),
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
    }
}

/// Why a row cannot be applied as it is; the row is quarantined with this reason.
#[derive(Debug, thiserror::Error)]
enum Unappliable {
    #[error("lead {0} is not in the mirror; replay after reconciliation")]
    UnknownLead(String),
    #[error("no lead id or number")]
    NoLead,
    #[error("{0}")]
    Unparseable(#[from] events::ParseError),
}

/// What a batch of deliveries will do to consent.
#[derive(Default)]
struct Plan {
    consent: Vec<ConsentObservation>,
    /// Rows that cannot be applied, with the reason.
    quarantined: Vec<(i64, String)>,
    /// Observations recognised as the echo of a local change.
    echoes: u64,
}

/// Applies `rows` (in receipt order) inside the caller's transaction: mirror, statuses and
/// ledger, and each row marked applied or quarantined, so the caller's commit makes the
/// whole batch take effect at once. The rows of each account apply together, in their
/// order: nothing of one account (its leads, states, entries, statuses) is another's, so
/// that is what applying them one by one would do, at the cost of one pass per account
/// however the accounts' deliveries interleave.
pub async fn deliveries<T: ApplyTx + ?Sized>(
    tx: &mut T,
    rows: &[Pending],
    now: DateTime<Utc>,
    policy: &Policy,
    settle: Settle,
) -> Result<Outcome, crate::store::Error> {
    let mut accounts: Vec<&str> = Vec::new();
    for row in rows {
        if !accounts.contains(&row.account.as_str()) {
            accounts.push(&row.account);
        }
    }
    let mut outcome = Outcome::default();
    for account in accounts {
        let of_account: Vec<&Pending> = rows.iter().filter(|r| r.account == account).collect();
        let of_run = deliveries_of(tx, account, &of_account, now, policy, settle).await?;
        outcome.applied += of_run.applied;
        outcome.quarantined += of_run.quarantined;
        outcome.sent_after_opt_out += of_run.sent_after_opt_out;
        outcome.echoes += of_run.echoes;
    }
    Ok(outcome)
}

/// [`deliveries`] of one account.
async fn deliveries_of<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &str,
    rows: &[&Pending],
    now: DateTime<Utc>,
    policy: &Policy,
    settle: Settle,
) -> Result<Outcome, crate::store::Error> {
    let account_sync = policy.account_sync;
    let plan = plan(tx, account, rows, account_sync).await?;
    let echoes = plan.echoes;
    let quarantined: HashSet<i64> = plan.quarantined.iter().map(|(id, _)| *id).collect();
    let leads: Vec<(&Lead, DateTime<Utc>)> = rows
        .iter()
        .filter(|row| !quarantined.contains(&row.id))
        .filter_map(|row| match &row.event {
            Ok(Event::Consent(c)) => c.lead.as_deref().map(|l| (l, c.occurred_at)),
            _ => None,
        })
        .collect();
    tx.upsert_leads(account, &leads, now).await?;
    let statuses: Vec<StatusObservation> = rows
        .iter()
        .filter_map(|row| match &row.event {
            Ok(Event::MessageStatus(m)) => Some(StatusObservation {
                message: &m.message,
                lead_id: m.lead_id.as_deref(),
                organization_id: m.organization_id.as_deref(),
                occurred_at: m.occurred_at,
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
    let keys: Vec<(&str, &str)> = plan
        .consent
        .iter()
        .map(|o| (o.organization_id.as_str(), o.phone_number.as_str()))
        .collect();
    let states = tx.consent_states(account, &keys).await?;
    let mut observations = plan.consent;
    let events = observations.len();
    let kept = suppressed_by_events(tx, account, &observations, &states, now).await?;
    observations.extend(kept);
    let outcomes = consent::apply(tx, account, &observations, now, states).await?;
    if account_sync {
        suppression::follow(tx, account, &observations[..events], &outcomes[..events]).await?;
    }
    let kept: Vec<&ConsentObservation> = observations[events..].iter().collect();
    suppression::queue_pushes(tx, account, &kept, &outcomes[events..], now).await?;
    Ok(Outcome {
        applied: applied.len() as u64,
        quarantined: plan.quarantined.len() as u64,
        sent_after_opt_out,
        echoes,
    })
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
    account: &str,
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

/// Turns the batch's consent events into observations, in receipt order, exactly as
/// applying the events one by one would: a lead id resolves to its number through the
/// mirror or an earlier event of the batch, and account sync reaches every holder of the
/// number known at that point. The numbers are locked before anything of them is read.
async fn plan<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &str,
    rows: &[&Pending],
    account_sync: bool,
) -> Result<Plan, crate::store::Error> {
    let consent: Vec<&ConsentEvent> = rows
        .iter()
        .filter_map(|row| match &row.event {
            Ok(Event::Consent(c)) => Some(c),
            _ => None,
        })
        .collect();
    let mut known = Known::load(tx, account, &consent, account_sync).await?;
    let mut plan = Plan::default();
    for row in rows {
        let c = match &row.event {
            Err(e) => {
                let reason = Unappliable::Unparseable(e.clone());
                plan.quarantined.push((row.id, reason.to_string()));
                continue;
            }
            Ok(Event::MessageStatus(_)) => continue,
            Ok(Event::Consent(c)) => c,
        };
        let (org, phone) = match resolve(c, &known.located) {
            Ok(pair) => pair,
            Err(reason) => {
                plan.quarantined.push((row.id, reason.to_string()));
                continue;
            }
        };
        if let Some(lead) = &c.lead_id {
            known
                .located
                .insert(lead.clone(), (org.clone(), phone.clone()));
        }
        let targets = match known.holders.as_mut() {
            Some(holders) => account_sync_targets(holders, &phone, org, c.lead_id.clone()),
            None => vec![(org, c.lead_id.clone())],
        };
        for (organization_id, lead_id) in targets {
            let mut observation = ConsentObservation {
                organization_id,
                phone_number: phone.clone(),
                lead_id,
                opted_out: c.opted_out,
                occurred_at: c.occurred_at,
                source: Source::Webhook,
                event_ref: row.dedup_key.clone(),
                tag_id: c.tag_id.clone(),
                reason: None,
                evidence: None,
            };
            if let Some(echo) = known.echoes.take(tx, &observation).await? {
                observation.occurred_at = echo.occurred_at;
                observation.reason = Some(echo_reason(echo.seq));
                plan.echoes += 1;
            }
            plan.consent.push(observation);
        }
    }
    Ok(plan)
}

/// What the batch's consent events are planned against, read once for the whole batch
/// after locking every number they touch.
struct Known {
    /// Lead id to its (organization, number): from the mirror, then from the batch's
    /// earlier events.
    located: HashMap<String, (String, String)>,
    /// The holders of each number, with account sync on; grows with the batch's events.
    holders: Option<Holders>,
    /// Local changes already pushed, whose webhook echo is recognized.
    echoes: EchoMatcher,
}

impl Known {
    async fn load<T: ApplyTx + ?Sized>(
        tx: &mut T,
        account: &str,
        consent: &[&ConsentEvent],
        account_sync: bool,
    ) -> Result<Self, crate::store::Error> {
        let unresolved: Vec<&str> = consent
            .iter()
            .filter(|c| c.organization_id.is_none() || c.phone_number.is_none())
            .filter_map(|c| c.lead_id.as_deref())
            .collect();
        let located = if unresolved.is_empty() {
            HashMap::new()
        } else {
            tx.locate_leads(account, &unresolved).await?
        };
        let mut phones: Vec<&str> = consent
            .iter()
            .filter_map(|c| c.phone_number.as_deref())
            .chain(located.values().map(|(_, phone)| phone.as_str()))
            .collect();
        phones.sort_unstable();
        phones.dedup();
        tx.lock_numbers(&phones).await?;
        let holders = if account_sync {
            Some(tx.holders_of(account, &phones).await?)
        } else {
            None
        };
        let echo_keys: Vec<(&str, &str)> = consent
            .iter()
            .filter_map(|c| Some((c.organization_id.as_deref()?, c.phone_number.as_deref()?)))
            .collect();
        let echoes = EchoMatcher::load(tx, account, &echo_keys).await?;
        Ok(Self {
            located,
            holders,
            echoes,
        })
    }
}

/// Account sync: the event's own (organization, lead) first, then every other holder of
/// `phone` known so far; the event's organization becomes a holder for the events after it.
fn account_sync_targets(
    holders: &mut Holders,
    phone: &str,
    org: String,
    lead_id: Option<String>,
) -> Vec<(String, Option<String>)> {
    let known = holders.entry(phone.to_owned()).or_default();
    let mut targets = vec![(org.clone(), lead_id.clone())];
    for (other, lead) in known.iter() {
        if !targets.iter().any(|(o, _)| o == other) {
            targets.push((other.clone(), lead.clone()));
        }
    }
    if !known.iter().any(|(o, _)| *o == org) {
        known.push((org, lead_id));
    }
    targets
}

/// The (organization, number) a consent event is about.
fn resolve(
    c: &ConsentEvent,
    located: &HashMap<String, (String, String)>,
) -> Result<(String, String), Unappliable> {
    match (&c.organization_id, &c.phone_number, &c.lead_id) {
        (Some(org), Some(phone), _) => Ok((org.clone(), phone.clone())),
        (_, _, Some(lead)) => located
            .get(lead)
            .cloned()
            .ok_or_else(|| Unappliable::UnknownLead(lead.clone())),
        _ => Err(Unappliable::NoLead),
    }
}

/// Applies status observations (see [`ApplyTx::apply_statuses`]).
pub async fn statuses<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &str,
    observations: &[StatusObservation<'_>],
    now: DateTime<Utc>,
) -> Result<u64, crate::store::Error> {
    tx.apply_statuses(account, observations, now).await
}

/// Applies consent observations over the states stored for them, locking their numbers
/// first; for callers with observations of their own (tests, tools).
pub async fn consent<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &str,
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
    account: &str,
    keys: &[(&str, &str)],
) -> Result<crate::model::ConsentStates, crate::store::Error> {
    let mut phones: Vec<&str> = keys.iter().map(|(_, phone)| *phone).collect();
    phones.sort_unstable();
    phones.dedup();
    tx.lock_numbers(&phones).await?;
    tx.consent_states(account, keys).await
}
