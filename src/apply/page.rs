//! A reconciliation pass's page of leads, applied: their fields, each consent that differs
//! from the mirror's as a `reconcile` observation timed at the fetch, and the suppressed or
//! already opted-out numbers among them.

use crate::model::AccountId;
use std::collections::HashSet;

use chrono::{DateTime, Utc};

use super::{consent, locked_states, suppression};
use crate::model::{ConsentApplied, ConsentObservation, KeptEvidence, Lead, Source, Timestamp};
use crate::store::ApplyTx;

/// What applying one page of a reconciliation pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PageApplied {
    pub scanned: u64,
    /// Numbers the mirror did not know.
    pub new: u64,
    /// Numbers whose mirrored consent was wrong and is now right.
    pub repaired: u64,
    /// Leads found not opted out whose number is suppressed (or opted out in their
    /// organization before they existed): opted out here and queued for the service.
    pub suppressed: u64,
}

/// Applies one page of leads as fetched at `fetched_at`: their fields, and each consent
/// that differs from the mirror's as a `reconcile` observation timed at the fetch.
pub async fn lead_page<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    pass_id: &str,
    leads: &[Lead],
    fetched_at: DateTime<Utc>,
) -> Result<PageApplied, crate::store::Error> {
    let keys: Vec<(&str, &str)> = leads
        .iter()
        .map(|l| (l.organization_id.as_str(), l.phone_number.as_str()))
        .collect();
    let mirrored = locked_states(tx, account, &keys).await?;
    let not_opted_out: Vec<&str> = leads
        .iter()
        .filter(|l| !l.global_opted_out)
        .map(|l| l.phone_number.as_str())
        .collect();
    let suppressions = tx.suppressions(account, &not_opted_out).await?;
    let on_their_way = opt_outs_on_their_way(tx, account, leads, &mirrored).await?;
    let observed: Vec<(&Lead, DateTime<Utc>)> = leads.iter().map(|l| (l, fetched_at)).collect();
    tx.upsert_leads(account, &observed, fetched_at).await?;
    // Each difference, with whether the mirror knew the number (a repair) or not (new);
    // then the leads kept opted out by an opt-out the service never had for them.
    let mut observations = Vec::new();
    let mut known = Vec::new();
    let mut suppressed = Vec::new();
    let mut suppressed_new = 0;
    for l in leads {
        let stored = mirrored
            .0
            .get(&(l.organization_id.clone(), l.phone_number.clone()));
        let suppression = suppressions.get(&l.phone_number);
        if !l.global_opted_out
            && let Some(by) = suppression::suppressed_by(&l.id, None, stored, suppression)
        {
            if let Some(opt_in) = opt_in_given_since(
                tx,
                account,
                (pass_id, l, fetched_at),
                by,
                (stored, suppression),
            )
            .await?
            {
                observations.push(opt_in);
                known.push(stored.is_some());
                continue;
            }
            let (org, phone) = (&l.organization_id, &l.phone_number);
            suppressed.push(suppression::observation(org, phone, &l.id, by, fetched_at));
            suppressed_new += u64::from(stored.is_none());
            continue;
        }
        let was = stored.map(|s| s.rank.opted_out);
        if was == Some(l.global_opted_out)
            || on_their_way.contains(&(l.organization_id.clone(), l.phone_number.clone()))
        {
            continue;
        }
        observations.push(reconcile_observation(pass_id, l, fetched_at));
        known.push(was.is_some());
    }
    let differences = observations.len();
    observations.extend(suppressed);
    // The states just read serve the apply too: the numbers are locked.
    let applied: Vec<ConsentApplied> =
        consent::apply(tx, account, &observations, fetched_at, mirrored).await?;
    let mut counts = counted(leads.len(), suppressed_new, &known, &applied);
    let kept: Vec<&ConsentObservation> = observations[differences..].iter().collect();
    counts.suppressed =
        suppression::queue_pushes(tx, account, &kept, &applied[differences..], fetched_at).await?;
    Ok(counts)
}

/// What a page did to the differences it found: `known` says, for each, whether the
/// mirror knew the number (a repair once applied) or not (new).
fn counted(
    scanned: usize,
    suppressed_new: u64,
    known: &[bool],
    applied: &[ConsentApplied],
) -> PageApplied {
    let mut counts = PageApplied {
        scanned: scanned as u64,
        new: suppressed_new,
        ..PageApplied::default()
    };
    for (known, outcome) in known.iter().zip(applied) {
        match (known, outcome.current) {
            (false, _) => counts.new += 1,
            (true, true) => counts.repaired += 1,
            (true, false) => {}
        }
    }
    counts
}

/// The opt-in a pass found for lead `l`, whose number entry `by` suppresses, when the
/// service had that lead opted out after the suppression (it took the suppression's push or
/// another push of the lead's opt-out made since, or showed the lead opted out since) and
/// shows it opted in now: an opt-in given since, by the person, in that organization.
/// Recorded, it lifts the suppression for this lead alone.
async fn opt_in_given_since<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    (pass_id, l, fetched_at): (&str, &Lead, DateTime<Utc>),
    by: i64,
    (stored, suppression): (
        Option<&crate::model::StoredConsent>,
        Option<&crate::model::Suppression>,
    ),
) -> Result<Option<ConsentObservation>, crate::store::Error> {
    let mut answered = tx
        .answered_push(account, &suppression::entry_ref(by, &l.id))
        .await?;
    // Another push of the lead's opt-out since (a shared copy's, made with the suppression)
    // that the service took says the same.
    if answered.is_none()
        && let Some(suppression) = suppression
    {
        let lead = (
            l.organization_id.as_str(),
            l.phone_number.as_str(),
            l.id.as_str(),
        );
        answered = tx
            .opt_out_answered_since(account, lead, suppression.since)
            .await?;
    }
    if answered.is_none() && !service_had_it_since(stored, suppression) {
        return Ok(None);
    }
    let mut opt_in = reconcile_observation(pass_id, l, fetched_at);
    if let Some(KeptEvidence::Reconcile { follows_push, .. }) = &mut opt_in.evidence {
        *follows_push = answered;
    }
    Ok(Some(opt_in))
}

/// Whether the service itself showed the pair opted out (a webhook or a pass) no earlier than
/// the number's suppression: it had the opt-out then, so finding the lead opted in now is
/// an opt-in given after the suppression, not a service that was never told.
fn service_had_it_since(
    stored: Option<&crate::model::StoredConsent>,
    suppression: Option<&crate::model::Suppression>,
) -> bool {
    let (Some(state), Some(suppression)) = (stored, suppression) else {
        return false;
    };
    state.rank.opted_out
        && matches!(state.source, Source::Webhook | Source::Reconcile)
        && state.rank.changed_at >= suppression.since.at()
}

/// The pairs of `leads` found not opted out whose opt-out made here is still queued for the
/// service. Such a page read the service before the opt-out arrived: it is not undone, and
/// the next pass sees it there.
async fn opt_outs_on_their_way<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    leads: &[Lead],
    mirrored: &crate::model::ConsentStates,
) -> Result<HashSet<(String, String)>, crate::store::Error> {
    let reverting: Vec<(&str, &str)> = leads
        .iter()
        .filter(|l| {
            !l.global_opted_out
                && mirrored.opted_out(&l.organization_id, &l.phone_number) == Some(true)
        })
        .map(|l| (l.organization_id.as_str(), l.phone_number.as_str()))
        .collect();
    tx.unsent_opt_outs_of(account, &reverting).await
}

/// A lead's consent as a pass fetched it, as a `reconcile` observation timed at the fetch.
fn reconcile_observation(pass_id: &str, l: &Lead, fetched_at: DateTime<Utc>) -> ConsentObservation {
    ConsentObservation {
        organization_id: l.organization_id.clone(),
        phone_number: l.phone_number.clone(),
        lead_id: Some(l.id.clone()),
        opted_out: l.global_opted_out,
        occurred_at: fetched_at,
        source: Source::Reconcile,
        event_ref: format!("reconcile:{pass_id}:{}", l.id),
        tag_id: None,
        reason: None,
        evidence: Some(KeptEvidence::Reconcile {
            requested_at: Timestamp(fetched_at),
            lead: lead_json(l),
            follows_push: None,
        }),
    }
}

/// A fetched lead as the v3 Lead resource it came as (the typed lead's fields: what this
/// daemon read of it).
fn lead_json(lead: &Lead) -> serde_json::Value {
    serde_json::to_value(lead).unwrap_or_else(|error| {
        // Strings, booleans and JSON values cannot fail to encode; said if they ever do.
        serde_json::json!({ "id": lead.id, "encodingError": error.to_string() })
    })
}
