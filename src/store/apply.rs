//! The apply path's side of the storage layer: what a write transaction is given (new
//! ledger entries, consent states, leads, a page's checkpoint), how new entries are chained,
//! and the [`ApplyTx`] trait of a write transaction (`apply/tx.rs`).

/// The apply path's writes, on a [`Tx`](crate::store::Tx).
mod tx;
pub use tx::ApplyTx;

use super::codec;
use crate::model::Lead;
use crate::model::{
    ConsentObservation, ConsentStates, Rank, Source, StatusObservation, StoredConsent, Timestamp,
};
use chrono::{DateTime, Utc};
use std::collections::HashSet;

/// Where a leads pass stands after writing one page.
#[derive(Debug, Clone, Copy)]
pub struct PageCheckpoint<'a> {
    pub account: &'a str,
    pub pass_id: &'a str,
    pub organization: &'a str,
    /// The next page's cursor; `None` after the last page.
    pub next: Option<&'a str>,
    /// Leads scanned and repaired on this page.
    pub scanned: i64,
    pub repaired: i64,
    pub now: DateTime<Utc>,
}

/// A finished reconciliation pass, as kept.
#[derive(Debug, Clone, Copy)]
pub struct PassRecord<'a> {
    pub account: &'a str,
    pub id: &'a str,
    /// RFC 3339.
    pub started_at: &'a str,
    pub finished_at: &'a str,
    /// The pass's summary, as JSON.
    pub summary: &'a str,
}

/// The `daemon_state` key of the latest failure.
pub const LAST_ERROR: &str = "last_error";

/// One ledger entry to append.
#[derive(Debug, Clone, Copy)]
pub struct NewEntry<'a> {
    pub observation: &'a ConsentObservation,
    /// The observation's lead, or the one stored for its (organization, number).
    pub lead_id: Option<&'a str>,
    /// A newer state was already in place.
    pub superseded: bool,
}

/// The chained fields of a new entry with its `seq` and times as stored.
pub(crate) fn entry_fields<'a>(
    account: &'a str,
    e: &NewEntry<'a>,
    seq: i64,
    recorded_at: Timestamp,
) -> crate::model::chain::Fields<'a> {
    let o = e.observation;
    crate::model::chain::Fields {
        seq,
        organization_id: &o.organization_id,
        lead_id: e.lead_id,
        phone_number: &o.phone_number,
        opted_out: o.opted_out,
        occurred_at: Timestamp(o.occurred_at),
        recorded_at,
        source: o.source,
        event_ref: &o.event_ref,
        superseded: e.superseded,
        tag_id: o.tag_id.as_deref(),
        reason: o.reason.as_deref(),
        account_id: account,
    }
}

/// What makes a ledger entry unique: (event_ref, organization, number).
pub(crate) fn entry_key<'a>(e: &NewEntry<'a>) -> (&'a str, &'a str, &'a str) {
    let o = e.observation;
    (&o.event_ref, &o.organization_id, &o.phone_number)
}

/// Which of `entries` to append, by index: those not `recorded` already, and an event twice
/// in `entries` once (its first occurrence).
pub(crate) fn unrecorded(entries: &[NewEntry<'_>], recorded: &HashSet<usize>) -> Vec<usize> {
    let mut seen = HashSet::new();
    (0..entries.len())
        .filter(|i| !recorded.contains(i) && seen.insert(entry_key(&entries[*i])))
        .collect()
}

/// A new ledger entry as it is inserted: its place in the chain and its stored forms.
pub(crate) struct Chained<'e, 'a> {
    pub entry: &'e NewEntry<'a>,
    pub seq: i64,
    pub hash: String,
    /// The kept evidence, as JSON.
    pub evidence: Option<String>,
}

/// Chains the entries `new` (indices into `entries`) after the entry `head_seq` whose hash
/// is `head_hash`, in order: each entry's hash covers its fields and the hash before it.
pub(crate) fn chain_after<'e, 'a>(
    account: &'a str,
    entries: &'e [NewEntry<'a>],
    new: &[usize],
    head_seq: i64,
    head_hash: String,
    recorded_at: Timestamp,
) -> Result<Vec<Chained<'e, 'a>>, crate::store::Error> {
    let mut prev = head_hash;
    let mut chained = Vec::with_capacity(new.len());
    for (seq, &i) in (head_seq + 1..).zip(new) {
        let entry = &entries[i];
        prev = entry_fields(account, entry, seq, recorded_at).hash_after(&prev);
        let evidence = entry
            .observation
            .evidence
            .as_ref()
            .map(codec::json_param)
            .transpose()?;
        chained.push(Chained {
            entry,
            seq,
            hash: prev.clone(),
            evidence,
        });
    }
    Ok(chained)
}

/// A current consent state to set where it outranks the stored one.
#[derive(Debug, Clone, Copy)]
pub struct StateWrite<'a> {
    pub organization_id: &'a str,
    pub phone_number: &'a str,
    pub lead_id: Option<&'a str>,
    pub rank: Rank,
    /// The event's own time (`changed_at`), to the millisecond; the rank may be later.
    pub changed_at: chrono::DateTime<chrono::Utc>,
    pub source: Source,
    /// The ledger entry that sets it.
    pub seq: i64,
    /// The pair had a state stored before this transaction.
    pub stored: bool,
}

/// The statement of [`ApplyTx::sent_after_opt_out`], one text for both backends: `messages`
/// gives each message as `k (id, lead, created, after)`, `account_param` is the account's
/// parameter (its placeholder). It is the compliance report's rule (`compliance/items.rs`)
/// from the message's side: the opt-outs of its lead by the entry's own lead (on the index
/// of opt-outs by lead), or by the lead the number's state holds, the number found through
/// the mirror (an index by lead on the states would slow the first import).
pub(crate) fn sent_after_opt_out(messages: &str, account_param: &str) -> String {
    format!(
        "SELECT COUNT(*) FROM {messages}
             WHERE NOT EXISTS (SELECT 1 FROM messages AS m
                               WHERE m.id = k.id AND m.account_id = {account_param})
               AND (EXISTS (SELECT 1 FROM ledger AS e
                            WHERE e.lead_id = k.lead AND e.account_id = {account_param} AND
                                {OPTED_OUT_BEFORE_K})
                    OR EXISTS (SELECT 1 FROM leads AS l
                               JOIN consent_state AS s
                                 ON s.phone_number = l.phone_number
                                AND s.organization_id = l.organization_id
                                AND s.account_id = l.account_id
                               JOIN ledger AS e
                                 ON e.phone_number = s.phone_number
                                AND e.organization_id = s.organization_id
                                AND e.account_id = s.account_id
                               WHERE l.id = k.lead AND l.account_id = {account_param}
                                 AND s.lead_id = l.id AND {OPTED_OUT_BEFORE_K}))"
    )
}

/// The statement of [`ApplyTx::pushed_changes`], one text for both backends: `pairs` gives
/// the (organization, number) pairs as `k` with their pushes `p`, `attempted` what else an
/// attempted push must have.
pub(crate) fn pushed_changes(pairs: &str, attempted: &str) -> String {
    format!(
        "SELECT p.seq, p.organization_id, p.phone_number, p.opted_out, l.occurred_at,
                p.first_attempt_at, p.last_attempt_at,
                (SELECT MIN(c.occurred_at) FROM ledger AS c
                 WHERE c.phone_number = p.phone_number AND c.organization_id = p.organization_id
                   AND c.account_id = p.account_id AND c.opted_out <> p.opted_out
                   AND c.occurred_at >= p.first_attempt_at) AS contradicted_at
         FROM {pairs}
         JOIN ledger AS l ON l.seq = p.seq
         WHERE p.attempts >= 1 AND p.state IN ('pending', 'sent') AND p.echo_ref IS NULL{attempted}
         ORDER BY p.seq"
    )
}

/// An opt-out entry `e` (not the echo of a local change) earlier than the message `k`'s
/// `after`, with no opt-in of its number up to the message's creation.
const OPTED_OUT_BEFORE_K: &str = "e.opted_out AND e.occurred_at < k.after
         AND NOT EXISTS (SELECT 1 FROM ledger AS i
                         WHERE i.phone_number = e.phone_number
                           AND i.organization_id = e.organization_id
                           AND i.account_id = e.account_id
                           AND NOT i.opted_out AND i.occurred_at > e.occurred_at
                           AND i.occurred_at <= k.created)
         AND NOT EXISTS (SELECT 1 FROM pushes AS p
                         WHERE p.echo_ref = e.event_ref
                           AND p.organization_id = e.organization_id
                           AND p.phone_number = e.phone_number
                           AND p.account_id = e.account_id)";

/// A message status about to be applied, for [`ApplyTx::sent_after_opt_out`].
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct NewMessage<'a> {
    pub id: &'a str,
    pub lead_id: &'a str,
    /// Its creation.
    pub created: Timestamp,
    /// Its creation less the confirmation window.
    pub after: Timestamp,
}

/// An account-wide opt-out of a number, which suppresses it.
#[derive(Debug, Clone, Copy)]
pub struct Suppressing<'a> {
    pub phone_number: &'a str,
    /// Its ledger entry.
    pub seq: i64,
    /// Its event time.
    pub since: DateTime<Utc>,
}

/// A lead's JSON columns, as stored.
pub(crate) struct LeadJson {
    pub active_group_ids: String,
    pub inactive_group_ids: String,
    pub tag_ids: String,
    pub custom_fields: String,
    /// [`content_hash`] of the lead with these columns.
    pub hash: i64,
}

impl LeadJson {
    pub fn of(lead: &Lead) -> Result<Self, crate::store::Error> {
        let custom_fields = codec::json_param(&lead.custom_fields)?;
        Ok(Self {
            active_group_ids: codec::json_param(&lead.active_group_ids)?,
            inactive_group_ids: codec::json_param(&lead.inactive_group_ids)?,
            tag_ids: codec::json_param(&lead.tag_ids)?,
            hash: content_hash(lead, &custom_fields),
            custom_fields,
        })
    }
}

/// A hash of a lead's mirrored fields (consent excluded: it lives elsewhere), with its
/// custom fields as encoded. Should it change with a new toolchain, the next scan rewrites
/// each lead once; nothing else.
fn content_hash(lead: &Lead, custom_fields: &str) -> i64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    // Every field but `global_opted_out`, without copying the lead.
    (
        &lead.id,
        &lead.organization_id,
        &lead.phone_number,
        (
            &lead.first_name,
            &lead.last_name,
            &lead.notes,
            &lead.follow_up,
        ),
        (
            &lead.email,
            &lead.postal_code,
            &lead.phone_number_type,
            &lead.created_at,
        ),
        (
            &lead.active_group_ids,
            &lead.inactive_group_ids,
            &lead.tag_ids,
        ),
        custom_fields,
    )
        .hash(&mut hasher);
    hasher.finish() as i64
}

/// A status observation's rank: terminal first, then time, status text and error code.
pub(crate) fn status_rank<'a>(
    o: &'a StatusObservation<'_>,
) -> (bool, DateTime<Utc>, &'a str, &'a str) {
    (
        crate::model::is_terminal(&o.message.status),
        crate::model::to_millis(o.occurred_at),
        o.message.status.as_str(),
        o.message.error_code.as_deref().unwrap_or(""),
    )
}

/// What an upsert of `leads` sets on a lead already mirrored: every column, where the
/// observation is not older and the content changed.
pub(crate) const LEADS_ON_CONFLICT: &str = "ON CONFLICT (id, account_id) DO UPDATE SET
             organization_id = excluded.organization_id, phone_number = excluded.phone_number,
             first_name = excluded.first_name, last_name = excluded.last_name,
             notes = excluded.notes, follow_up = excluded.follow_up, email = excluded.email,
             postal_code = excluded.postal_code, phone_number_type = excluded.phone_number_type,
             active_group_ids = excluded.active_group_ids,
             inactive_group_ids = excluded.inactive_group_ids, tag_ids = excluded.tag_ids,
             custom_fields = excluded.custom_fields, created_at = excluded.created_at,
             observed_at = excluded.observed_at, content_hash = excluded.content_hash,
             updated_at = excluded.updated_at
         WHERE excluded.observed_at >= leads.observed_at
           AND excluded.content_hash <> leads.content_hash";

/// A stored consent state as each backend reads it: (organization, number, rank time,
/// opted out, lead, seq, source).
pub(crate) type StateRow = (String, String, Timestamp, bool, Option<String>, i64, Source);

/// The stored states of [`ApplyTx::consent_states`], by (organization, number).
fn consent_states(rows: Vec<StateRow>) -> ConsentStates {
    let states = rows
        .into_iter()
        .map(|(o, p, at, opted_out, lead_id, seq, source)| {
            let rank = Rank {
                changed_at: at.at(),
                opted_out,
            };
            let state = StoredConsent {
                rank,
                lead_id,
                seq: Some(seq),
                source,
            };
            ((o, p), state)
        })
        .collect();
    ConsentStates(states)
}
