//! Last-writer-wins over consent observations: every observation becomes a ledger entry,
//! and the current state of each (organization, number) moves to the highest-ranked one.
//! The state kept is the maximum of a total order, so any order and any duplication of the
//! same events ends in one state.

use crate::model::AccountId;
use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::model::{ConsentApplied, ConsentObservation, ConsentStates, Rank, StoredConsent};
use crate::store::{ApplyTx, NewEntry, StateWrite};

/// What one observation does, decided over the stored states and the batch before it.
struct Decision {
    rank: Rank,
    /// It outranks the state in place.
    wins: bool,
    /// A newer state was already in place.
    superseded: bool,
    /// Its lead, or the one known for its pair.
    lead_id: Option<String>,
    /// Its pair had a stored state.
    stored: bool,
}

/// Records every observation in the ledger, in order, and moves the current state of each
/// (organization, number) to the highest-ranked one, over `states`: the stored states of
/// every pair of `observations`, read in this transaction after locking their numbers. The
/// outcome is the one of applying the observations one by one.
pub async fn apply<T: ApplyTx + ?Sized>(
    tx: &mut T,
    account: &AccountId,
    observations: &[ConsentObservation],
    now: DateTime<Utc>,
    states: ConsentStates,
) -> Result<Vec<ConsentApplied>, crate::store::Error> {
    if observations.is_empty() {
        return Ok(Vec::new());
    }
    let decisions = decide(observations, &states);
    let entries: Vec<NewEntry> = observations
        .iter()
        .zip(&decisions)
        .map(|(observation, d)| NewEntry {
            observation,
            lead_id: d.lead_id.as_deref(),
            superseded: d.superseded,
        })
        .collect();
    let seqs = tx.append_ledger(account, &entries, now).await?;
    let mut results = Vec::with_capacity(observations.len());
    let mut winners = Vec::new();
    for ((o, d), seq) in observations.iter().zip(&decisions).zip(seqs) {
        // An event already in the ledger was applied before: its state is in place.
        let current = d.wins && seq.is_some();
        if let (true, Some(seq)) = (current, seq) {
            winners.push(StateWrite {
                organization_id: &o.organization_id,
                phone_number: &o.phone_number,
                lead_id: d.lead_id.as_deref(),
                rank: d.rank,
                changed_at: crate::model::to_millis(o.occurred_at),
                source: o.source,
                seq,
                stored: d.stored,
            });
        }
        results.push(ConsentApplied {
            seq,
            current,
            superseded: seq.is_some() && d.superseded,
        });
    }
    // Each pair ends in its last winner: each winner outranks those before it.
    let mut seen = HashSet::new();
    let mut last: Vec<StateWrite> = winners
        .into_iter()
        .rev()
        .filter(|w| seen.insert((w.organization_id, w.phone_number)))
        .collect();
    last.reverse();
    tx.write_states(account, &last).await?;
    Ok(results)
}

/// Walks the batch in order, as if each observation were applied alone.
fn decide(observations: &[ConsentObservation], states: &ConsentStates) -> Vec<Decision> {
    let stored = &states.0;
    // The winners of this batch so far, over the stored states.
    let mut overlay: HashMap<(&str, &str), StoredConsent> = HashMap::new();
    observations
        .iter()
        .map(|o| {
            let key = (o.organization_id.as_str(), o.phone_number.as_str());
            let rank = Rank::observed(o);
            let stored_state = stored.get(&(o.organization_id.clone(), o.phone_number.clone()));
            let in_place = overlay.get(&key).or(stored_state);
            let (wins, superseded, known_lead) = match in_place {
                None => (true, false, None),
                Some(current) => (
                    rank > current.rank,
                    current.rank > rank,
                    current.lead_id.clone(),
                ),
            };
            let lead_id = o.lead_id.clone().or(known_lead);
            if wins {
                let state = StoredConsent {
                    rank,
                    lead_id: lead_id.clone(),
                    seq: None,
                    source: o.source,
                };
                overlay.insert(key, state);
            }
            Decision {
                rank,
                wins,
                superseded,
                lead_id,
                stored: stored_state.is_some(),
            }
        })
        .collect()
}
