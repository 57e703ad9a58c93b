//! Where the destinations stand in each opt-out of a page: their outcomes, read a span of
//! seqs at a time, and when those that had an account-wide opt-out through its leads'
//! entries had them.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::super::{DestinationTime, Rules};
use super::PAGE;
use crate::model::{EntryOutcome, OptOutRow, OutcomeKind, Timestamp};
use crate::store::{DestinationStore, Pool};

/// A destination's place in an opt-out: had at its `sent` time, not yet without an
/// outcome, or unreached with its `unmatched`, `refused` or `unconfirmed` outcome and
/// reason; had without a request of its own when `already` told (at the time the entry it
/// follows was), or `through_leads` (at `leads`: when its leads' entries were).
pub(super) fn had_by(
    name: &str,
    outcome: Option<&EntryOutcome>,
    leads: Option<&Option<Timestamp>>,
) -> DestinationTime {
    let Some(o) = outcome else {
        return DestinationTime::had(name, None);
    };
    let honoured_at = match o.outcome {
        OutcomeKind::Sent => return DestinationTime::had(name, Some(o.at)),
        OutcomeKind::Already => Some(o.at),
        OutcomeKind::ThroughLeads => leads.copied().unwrap_or(Some(o.at)),
        OutcomeKind::Unmatched | OutcomeKind::Refused | OutcomeKind::Unconfirmed => None,
    };
    DestinationTime {
        outcome: Some(o.outcome),
        reason: o.reason.clone(),
        ..DestinationTime::had(name, honoured_at)
    }
}

/// When each destination had, through its leads' entries, each of `rows` it ended
/// `through_leads` (by destination and seq): when the last of the entries recorded with
/// it that the destination takes was had (sent, or told already); `None` while one has no
/// outcome there yet. Those it could not place are findings of their own (their own
/// items), not of the account-wide opt-out; with no such entry (no organization held the
/// number), when the destination passed it.
pub(super) async fn through_leads(
    pool: &Pool,
    rules: &Rules,
    rows: &[OptOutRow],
    outcomes: &Outcomes,
) -> Result<HashMap<(String, i64), Option<Timestamp>>, crate::store::Error> {
    let mut through = HashMap::new();
    for row in rows {
        let passed: Vec<(&Arc<crate::sender::Subscriber>, Timestamp)> = rules
            .destinations
            .iter()
            .filter_map(|d| {
                let o = outcomes.get(&d.name)?.get(&row.seq)?;
                (o.outcome == OutcomeKind::ThroughLeads).then_some((d, o.at))
            })
            .collect();
        if passed.is_empty() {
            continue;
        }
        let with = pool.entries_with(row.seq).await?;
        let seqs: Vec<i64> = with.iter().map(|(seq, _, _)| *seq).collect();
        let theirs = outcomes_of(pool, &seqs).await?;
        for (destination, passed_at) in passed {
            let mut at = Some(passed_at);
            for (seq, org, superseded) in &with {
                if *superseded || !destination.takes_from(&row.account_id, org, row.source) {
                    continue;
                }
                let had = theirs.get(&destination.name).and_then(|of| of.get(seq));
                at = match had {
                    None => None,
                    Some(o) if o.outcome.unreached() => at,
                    Some(o) => at.zip(Some(o.at)).map(|(a, b)| a.max(b)),
                };
            }
            through.insert((destination.name.clone(), row.seq), at);
        }
    }
    Ok(through)
}

/// The destinations' outcomes of `rows`, by destination and seq.
type Outcomes = HashMap<String, HashMap<i64, EntryOutcome>>;

/// Most seqs one read of outcomes spans: the rows of a page may lie far apart (one
/// organization's opt-outs in a ledger of many), and what lies between them is not read
/// into memory.
const OUTCOME_SPAN: i64 = 4 * PAGE as i64;

/// The destinations' outcomes of `rows` (in seq order), read a span of seqs at a time.
pub(super) async fn destination_outcomes(
    pool: &Pool,
    rules: &Rules,
    rows: &[OptOutRow],
) -> Result<Outcomes, crate::store::Error> {
    if rules.destinations.is_empty() {
        return Ok(Outcomes::new());
    }
    let seqs: Vec<i64> = rows.iter().map(|row| row.seq).collect();
    outcomes_of(pool, &seqs).await
}

/// Every destination's outcomes of the entries `seqs` (in seq order), read a span of seqs
/// at a time.
async fn outcomes_of(pool: &Pool, seqs: &[i64]) -> Result<Outcomes, crate::store::Error> {
    let mut by_destination = Outcomes::new();
    let mut rest = seqs;
    while let Some(&first) = rest.first() {
        let within = rest
            .iter()
            .take_while(|seq| **seq - first < OUTCOME_SPAN)
            .count();
        let (span, after) = rest.split_at(within);
        rest = after;
        let last = span.last().copied().unwrap_or(first);
        let seqs: HashSet<i64> = span.iter().copied().collect();
        for outcome in pool.outcomes_of_entries(first, last).await? {
            if seqs.contains(&outcome.seq) {
                by_destination
                    .entry(outcome.destination.clone())
                    .or_default()
                    .insert(outcome.seq, outcome);
            }
        }
    }
    Ok(by_destination)
}
