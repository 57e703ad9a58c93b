//! Suppression: a number opted out for the whole account (an `--account` import, or an
//! opt-out applied while `consent.account_sync` is on) stays opted out for the leads that
//! appear with it later, in any organization, until a later opt-in there. Such a lead gets
//! a `local` entry whose evidence names the entry that opted the number out, and that
//! opt-out is queued for the service (the leader's pusher sends it, once: the entry is one
//! per lead and suppressing entry).
//!
//! The same holds for an organization's own opt-out of a number (an `--org` import, a local
//! opt-out) that a new lead of that organization does not carry yet: the service never had
//! it for that lead.

use crate::model::AccountId;
use std::collections::HashMap;

use chrono::{DateTime, Utc};

use crate::model::{
    ConsentApplied, ConsentObservation, KeptEvidence, Rank, SUPPRESSION_ACTOR, Source,
    StoredConsent, Suppression,
};
use crate::store::{ApplyTx, Suppressing};

/// The entry that keeps lead `lead_id`, seen not opted out, opted out, if any: its
/// organization's own opt-out of the number made here (local, import: the service may never
/// have had it) when that was not about this lead, else the
/// number's suppression when no opt-in there is later. `opted_in_at` is the time of the
/// lead's own opt-in event (a webhook's); a reconciliation pass that finds a lead not opted
/// out has seen no opt-in, only a service that was never told.
pub(super) fn suppressed_by(
    lead_id: &str,
    opted_in_at: Option<DateTime<Utc>>,
    stored: Option<&StoredConsent>,
    suppression: Option<&Suppression>,
) -> Option<i64> {
    if let Some(state) = stored
        && state.rank.opted_out
        && matches!(state.source, Source::Local | Source::Import)
        && state.lead_id.as_deref() != Some(lead_id)
    {
        return state.seq;
    }
    let suppression = suppression?;
    let since = Rank::of(suppression.since.at(), true);
    let opted_in_later = stored.is_some_and(|s| !s.rank.opted_out && s.rank > since)
        || opted_in_at.is_some_and(|at| Rank::of(at, false) > since);
    (!opted_in_later).then_some(suppression.seq)
}

/// The entry recorded for a lead kept opted out by entry `by`.
pub(super) fn observation(
    organization_id: &str,
    phone_number: &str,
    lead_id: &str,
    by: i64,
    now: DateTime<Utc>,
) -> ConsentObservation {
    ConsentObservation {
        organization_id: organization_id.to_owned(),
        phone_number: phone_number.to_owned(),
        lead_id: Some(lead_id.to_owned()),
        opted_out: true,
        occurred_at: now,
        source: Source::Local,
        event_ref: entry_ref(by, lead_id),
        tag_id: None,
        reason: Some(format!("suppressed by entry {by}")),
        evidence: Some(KeptEvidence::Suppressed {
            actor: SUPPRESSION_ACTOR.to_owned(),
            suppressed_by: by,
        }),
    }
}

/// The `event_ref` of the entry that keeps lead `lead_id` opted out by entry `by`.
pub(super) fn entry_ref(by: i64, lead_id: &str) -> String {
    format!("suppression:{by}:{lead_id}")
}

/// Queues for the service each suppression entry just recorded.
pub(super) async fn queue_pushes<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    observations: &[&ConsentObservation],
    applied: &[ConsentApplied],
    now: DateTime<Utc>,
) -> Result<u64, crate::store::Error> {
    let mut queued = 0;
    for (observation, outcome) in observations.iter().zip(applied) {
        if let Some(seq) = outcome.seq {
            tx.queue_push(account, seq, observation, now).await?;
            queued += 1;
        }
    }
    Ok(queued)
}

/// With account sync on, what a batch's entries do to suppression: each recorded opt-out
/// suppresses its number from its event time; each recorded opt-in later than a
/// suppression ends it.
pub(super) async fn follow<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    observations: &[ConsentObservation],
    applied: &[ConsentApplied],
) -> Result<(), crate::store::Error> {
    let mut opt_outs = Vec::new();
    let mut opt_ins: HashMap<&str, DateTime<Utc>> = HashMap::new();
    for (o, outcome) in observations.iter().zip(applied) {
        let Some(seq) = outcome.seq else { continue };
        if o.opted_out {
            opt_outs.push(Suppressing {
                phone_number: &o.phone_number,
                seq,
                since: o.occurred_at,
            });
        } else {
            let at = opt_ins.entry(&o.phone_number).or_insert(o.occurred_at);
            *at = (*at).max(o.occurred_at);
        }
    }
    // Lifted first: an opt-out and a later opt-in of one number in one batch end lifted
    // only if the opt-in is later than the suppression already stored.
    let opt_ins: Vec<(&str, DateTime<Utc>)> = opt_ins.into_iter().collect();
    tx.lift_suppressions(account, &opt_ins).await?;
    tx.suppress(account, &opt_outs).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Timestamp;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().expect("time")
    }

    fn state(opted_out: bool, when: &str, lead: Option<&str>, seq: i64) -> StoredConsent {
        StoredConsent {
            rank: Rank::of(at(when), opted_out),
            lead_id: lead.map(str::to_owned),
            seq: Some(seq),
            source: Source::Import,
        }
    }

    #[test]
    fn an_organizations_opt_out_not_about_this_lead_keeps_it_opted_out() {
        let imported = state(true, "2026-11-20T00:00:00Z", None, 7);
        assert_eq!(suppressed_by("L1", None, Some(&imported), None), Some(7));
        // The same lead opted in at the service since: a repair, not a suppression.
        let own = state(true, "2026-11-20T00:00:00Z", Some("L1"), 7);
        assert_eq!(suppressed_by("L1", None, Some(&own), None), None);
        // An opt-out the service announced itself: the service had it.
        let announced = StoredConsent {
            source: Source::Webhook,
            ..imported
        };
        assert_eq!(suppressed_by("L1", None, Some(&announced), None), None);
    }

    #[test]
    fn a_suppressed_number_holds_until_a_later_opt_in_in_that_organization() {
        let suppression = Suppression {
            seq: 3,
            since: Timestamp(at("2026-11-20T00:00:00Z")),
        };
        // A lead found by a reconciliation pass carries no opt-in of its own: suppressed.
        assert_eq!(suppressed_by("L1", None, None, Some(&suppression)), Some(3));
        // An opt-in stored there later than the suppression lifts it for that organization.
        let opted_in = state(false, "2026-11-21T00:00:00Z", Some("L1"), 9);
        assert_eq!(
            suppressed_by("L1", None, Some(&opted_in), Some(&suppression)),
            None
        );
        // So does the lead's own opt-in event, when later; not one from before.
        let later = Some(at("2026-11-26T00:00:00Z"));
        let earlier = Some(at("2026-11-19T00:00:00Z"));
        assert_eq!(suppressed_by("L1", later, None, Some(&suppression)), None);
        assert_eq!(
            suppressed_by("L1", earlier, None, Some(&suppression)),
            Some(3)
        );
        // An opt-in stored from before it does not lift it either.
        let old = state(false, "2026-11-01T00:00:00Z", Some("L1"), 2);
        assert_eq!(
            suppressed_by("L1", None, Some(&old), Some(&suppression)),
            Some(3)
        );
    }
}
