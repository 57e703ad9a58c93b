//! The plan of a batch of deliveries: each consent event resolved to its (organization,
//! number), reaching every holder of the number with account sync, and recognised as the
//! echo of a push where it is one, exactly as applying the events one by one would.

use crate::model::AccountId;
use std::collections::HashMap;

use super::{EchoMatcher, Pending, echo_reason};
use crate::events::{self, ConsentEvent, Event};
use crate::model::{ConsentObservation, Holders, Source};
use crate::store::ApplyTx;

/// Why a row cannot be applied as it is; the row is quarantined with this reason.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unappliable {
    #[error("lead {0} is not in the mirror; replay after reconciliation")]
    UnknownLead(String),
    #[error("no lead id or number")]
    NoLead,
    #[error("{0}")]
    Unparseable(#[from] events::ParseError),
}

/// What a batch of deliveries will do to consent.
#[derive(Default)]
pub(super) struct Plan {
    pub consent: Vec<ConsentObservation>,
    /// Rows that cannot be applied, with the reason.
    pub quarantined: Vec<(i64, String)>,
    /// Observations recognised as the echo of a local change.
    pub echoes: u64,
    /// Events whose time lay further past their receipt than the tolerance.
    pub future_times: u64,
}

/// Turns the batch's consent events into observations, in receipt order, exactly as
/// applying the events one by one would: a lead id resolves to its number through the
/// mirror or an earlier event of the batch, and account sync reaches every holder of the
/// number known at that point. The numbers are locked before anything of them is read.
pub(super) async fn plan<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    rows: &[&Pending],
    account_sync: bool,
    trust: &crate::model::trust::Trust,
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
            Ok(Event::MessageStatus(_) | Event::Heard(_)) => continue,
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
        let ranked = ranked_time(row, c, trust, &mut plan);
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
                occurred_at: ranked.at,
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

/// The time consent event `c` of `row` ranks at ([`crate::model::trust::Trust::time`]); a
/// time in the future is counted in `plan` and logged.
fn ranked_time(
    row: &Pending,
    c: &ConsentEvent,
    trust: &crate::model::trust::Trust,
    plan: &mut Plan,
) -> crate::model::trust::Ranked {
    let ranked = row.ranked(c.occurred_at, trust);
    if ranked.future.is_some() {
        plan.future_times += 1;
        tracing::warn!(
            outbox_id = row.id,
            given = %c.occurred_at,
            ranked_at = %ranked.at,
            "a delivery's time lies in the future: it ranks at its receipt"
        );
    }
    ranked
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
        account: &AccountId,
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
        let mut echo_keys: Vec<(&str, &str)> = consent
            .iter()
            .filter_map(|c| Some((c.organization_id.as_deref()?, c.phone_number.as_deref()?)))
            .collect();
        echo_keys.sort_unstable();
        echo_keys.dedup();
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
