//! The apply path's side of the storage layer: what a write transaction is given (new
//! ledger entries, consent states, leads, a page's checkpoint), how new entries are chained,
//! and the [`ApplyTx`] trait each backend's connection implements.

use super::codec;
use crate::model::Lead;
use crate::model::{
    ConsentObservation, ConsentStates, Holders, PushedChange, Rank, Source, StatusObservation,
    Suppression, Timestamp,
};
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};

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

/// The statement of [`ApplyTx::sent_after_opt_out`], one text for both backends: `$messages`
/// gives each message as `k (id, lead, created, after)`. It is the compliance report's rule
/// (`compliance/items.rs`) from the message's side: the opt-outs of its lead by the entry's
/// own lead (on the index of opt-outs by lead), or by the lead the number's state holds, the
/// number found through the mirror (an index by lead on the states would slow the first
/// import).
macro_rules! sent_after_opt_out {
    ($messages:literal, $account:literal) => {
        concat!(
            "SELECT COUNT(*) FROM ",
            $messages,
            "
             WHERE NOT EXISTS (SELECT 1 FROM messages AS m
                               WHERE m.id = k.id AND m.account_id = ",
            $account,
            ")
               AND (EXISTS (SELECT 1 FROM ledger AS e
                            WHERE e.lead_id = k.lead AND e.account_id = ",
            $account,
            " AND ",
            $crate::store::apply::opted_out_before_k!(),
            ")
                    OR EXISTS (SELECT 1 FROM leads AS l
                               JOIN consent_state AS s
                                 ON s.phone_number = l.phone_number
                                AND s.organization_id = l.organization_id
                                AND s.account_id = l.account_id
                               JOIN ledger AS e
                                 ON e.phone_number = s.phone_number
                                AND e.organization_id = s.organization_id
                                AND e.account_id = s.account_id
                               WHERE l.id = k.lead AND l.account_id = ",
            $account,
            "
                                 AND s.lead_id = l.id AND ",
            $crate::store::apply::opted_out_before_k!(),
            "))"
        )
    };
}
pub(crate) use sent_after_opt_out;

/// An opt-out entry `e` (not the echo of a local change) earlier than the message `k`'s
/// `after`, with no opt-in of its number up to the message's creation.
macro_rules! opted_out_before_k {
    () => {
        "e.opted_out AND e.occurred_at < k.after
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
                           AND p.account_id = e.account_id)"
    };
}
pub(crate) use opted_out_before_k;

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

// `Tx` forwards each method to its backend's connection (`forwarded!`).
crate::store::tx::forwarded! {
/// The writes of the apply path, inside a transaction the caller began and commits. Every
/// method takes a whole batch.
pub trait ApplyTx: Send {
    /// Keeps every other writer of these numbers waiting until this transaction ends, so
    /// what it reads of them (states, holders, pushes) stays true until it commits. To be
    /// called once per transaction, before the reads (locks are taken in one order).
    fn lock_numbers(
        &mut self,
        phones: &[&str],
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;

    /// The (organization, number) of each of `lead_ids` the mirror knows.
    fn locate_leads(
        &mut self,
        account: &str,
        lead_ids: &[&str],
    ) -> impl Future<Output = Result<HashMap<String, (String, String)>, crate::store::Error>> + Send;

    /// The organizations (and lead ids) holding each of `phones`. Every mirrored lead has
    /// the consent record of its (organization, number), so consent records are enough.
    fn holders_of(
        &mut self,
        account: &str,
        phones: &[&str],
    ) -> impl Future<Output = Result<Holders, crate::store::Error>> + Send;

    /// Attempted local changes of these (organization, number) pairs whose echo has not
    /// come back yet, oldest first.
    fn pushed_changes(
        &mut self,
        account: &str,
        keys: &[(&str, &str)],
    ) -> impl Future<Output = Result<Vec<PushedChange>, crate::store::Error>> + Send;

    /// Those of `keys` (organization, number) with an opt-out queued for the service and not
    /// sent yet.
    fn unsent_opt_outs_of(
        &mut self,
        account: &str,
        keys: &[(&str, &str)],
    ) -> impl Future<Output = Result<HashSet<(String, String)>, crate::store::Error>> + Send;

    /// The push of the entry `event_ref` (with no organization of its own: a lead's
    /// suppression entry) once the service answered it with success.
    fn answered_push(
        &mut self,
        account: &str,
        event_ref: &str,
    ) -> impl Future<Output = Result<Option<i64>, crate::store::Error>> + Send;

    /// Marks the local change `push_seq` as echoed by `event_ref`.
    fn mark_echo(
        &mut self,
        push_seq: i64,
        event_ref: &str,
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;

    /// The stored state of each known pair of `keys`.
    fn consent_states(
        &mut self,
        account: &str,
        keys: &[(&str, &str)],
    ) -> impl Future<Output = Result<ConsentStates, crate::store::Error>> + Send;

    /// Appends the entries not in the ledger yet, in order: the seq of each new one, `None`
    /// for an event already recorded (or recorded earlier in `entries`).
    fn append_ledger(
        &mut self,
        account: &str,
        entries: &[NewEntry<'_>],
        recorded_at: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<Option<i64>>, crate::store::Error>> + Send;

    /// Sets each state where it outranks the stored one; at most one per pair.
    fn write_states(
        &mut self,
        account: &str,
        states: &[StateWrite<'_>],
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;

    /// Inserts or updates mirrored leads, each only if its observation is not older than
    /// what the mirror holds and its fields changed (an unchanged lead is not rewritten on
    /// every scan). Returns how many rows were written.
    fn upsert_leads(
        &mut self,
        account: &str,
        leads: &[(&Lead, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<u64, crate::store::Error>> + Send;

    /// Applies status observations: a terminal status beats a non-terminal one whatever
    /// the times; otherwise the later wins (ties broken by status text, then error code, so
    /// the outcome never depends on arrival order). Returns how many changed a stored row.
    fn apply_statuses(
        &mut self,
        account: &str,
        observations: &[StatusObservation<'_>],
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<u64, crate::store::Error>> + Send;

    /// Marks outbox rows applied, and others quarantined with their reason. (PostgreSQL's
    /// worker claims its rows marked applied already: there only the quarantined change.)
    fn settle_outbox(
        &mut self,
        applied: &[i64],
        quarantined: &[(i64, String)],
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;

    /// How many of `messages` are new to the mirror and were sent after an opt-out, by the
    /// compliance report's rule: an opt-out entry (not the echo of a local change) of the
    /// message's lead, by the entry's own lead or by the lead `consent_state` holds for the
    /// entry's number, earlier than the message's `after` (its creation less the confirmation
    /// window), with no opt-in of that number between the opt-out and the message's creation.
    /// By its own lead the mirror need not hold the lead; by the state's lead the number is
    /// the mirror's for that lead.
    fn sent_after_opt_out(
        &mut self,
        account: &str,
        messages: &[NewMessage<'_>],
    ) -> impl Future<Output = Result<u64, crate::store::Error>> + Send;

    /// The suppressions in force of those of `phones` that are suppressed.
    fn suppressions(
        &mut self,
        account: &str,
        phones: &[&str],
    ) -> impl Future<Output = Result<HashMap<String, Suppression>, crate::store::Error>> + Send;

    /// Suppresses each number from its account-wide opt-out (its entry and event time); a
    /// number already suppressed keeps its earlier suppression.
    fn suppress(
        &mut self,
        account: &str,
        opt_outs: &[Suppressing<'_>],
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;

    /// Ends the suppression of each number whose account-wide opt-in is later than it.
    fn lift_suppressions(
        &mut self,
        account: &str,
        opt_ins: &[(&str, DateTime<Utc>)],
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;

    /// Queues the local change recorded as `seq` for the service, superseding older changes
    /// of the pair never attempted.
    fn queue_push(
        &mut self,
        account: &str,
        seq: i64,
        change: &ConsentObservation,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;

    /// The next `limit` pending outbox rows, in id order, taken for this transaction (on
    /// PostgreSQL marked applied at `now` in the same statement, so that workers of every
    /// replica take disjoint batches; the transaction settles those it quarantines).
    fn claim_pending(
        &mut self,
        limit: i64,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<crate::model::StoredDelivery>, crate::store::Error>> + Send;

    /// In a leads page's transaction: moves the checkpoint to the next page, or, after the
    /// last page, records the organization's finished scan and drops its checkpoint.
    fn page_written(
        &mut self,
        page: PageCheckpoint<'_>,
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;
}
for crate::store::Tx<'_>;
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
/// observation is not older and the content changed. A macro, so that the statements built
/// with it are literals.
macro_rules! leads_on_conflict {
    () => {
        "ON CONFLICT (id, account_id) DO UPDATE SET
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
           AND excluded.content_hash <> leads.content_hash"
    };
}

pub(crate) use leads_on_conflict;

/// `ApplyTx` for the connection type `$conn`: the statements with one text for both
/// backends (`$N` parameters, times bound as [`Timestamp`](crate::model::Timestamp)) are
/// here; the others are functions of the same names in the backend's `apply`, taking the
/// connection first, or (`$own`) methods written there.
macro_rules! statements {
    ($conn:ty, $($own:tt)*) => {
        impl $crate::store::ApplyTx for $conn {
            async fn answered_push(
                &mut self,
                account: &str,
                event_ref: &str,
            ) -> Result<Option<i64>, crate::store::Error> {
                Ok(sqlx::query_scalar(
                    "SELECT p.seq FROM ledger AS l JOIN pushes AS p ON p.seq = l.seq
                     WHERE l.event_ref = $1 AND l.account_id = $2 AND p.state = 'sent'
                     LIMIT 1",
                )
                .bind(event_ref)
                .bind(account)
                .fetch_optional(&mut *self)
                .await?)
            }

            async fn mark_echo(
                &mut self,
                push_seq: i64,
                event_ref: &str,
            ) -> Result<(), crate::store::Error> {
                sqlx::query("UPDATE pushes SET echo_ref = $2 WHERE seq = $1")
                    .bind(push_seq)
                    .bind(event_ref)
                    .execute(&mut *self)
                    .await?;
                Ok(())
            }

            async fn queue_push(
                &mut self,
                account: &str,
                seq: i64,
                change: &crate::model::ConsentObservation,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), crate::store::Error> {
                let now = crate::model::Timestamp(now);
                sqlx::query(
                    "UPDATE pushes SET state = 'superseded', finished_at = $3
                     WHERE organization_id = $1 AND phone_number = $2 AND state = 'pending' AND attempts = 0
                       AND account_id = $4",
                )
                .bind(&change.organization_id)
                .bind(&change.phone_number)
                .bind(now)
                .bind(account)
                .execute(&mut *self)
                .await?;
                sqlx::query(
                    "INSERT INTO pushes (seq, organization_id, phone_number, opted_out, tag_id, lead_id,
                                         next_attempt_at, created_at, account_id)
                     VALUES ($1, $2, $3, $4, $5,
                             (SELECT lead_id FROM consent_state
                              WHERE organization_id = $2 AND phone_number = $3 AND account_id = $7),
                             $6, $6, $7)",
                )
                .bind(seq)
                .bind(&change.organization_id)
                .bind(&change.phone_number)
                .bind(change.opted_out)
                .bind(&change.tag_id)
                .bind(now)
                .bind(account)
                .execute(&mut *self)
                .await?;
                Ok(())
            }

            async fn page_written(
                &mut self,
                page: crate::store::PageCheckpoint<'_>,
            ) -> Result<(), crate::store::Error> {
                super::reconcile::page_written(self, page).await
            }

            async fn lock_numbers(&mut self, phones: &[&str]) -> Result<(), crate::store::Error> {
                lock_numbers(self, phones).await
            }

            async fn locate_leads(
                &mut self,
                account: &str,
                lead_ids: &[&str],
            ) -> Result<std::collections::HashMap<String, (String, String)>, crate::store::Error> {
                locate_leads(self, account, lead_ids).await
            }

            async fn holders_of(
                &mut self,
                account: &str,
                phones: &[&str],
            ) -> Result<crate::model::Holders, crate::store::Error> {
                holders_of(self, account, phones).await
            }

            async fn pushed_changes(
                &mut self,
                account: &str,
                keys: &[(&str, &str)],
            ) -> Result<Vec<crate::model::PushedChange>, crate::store::Error> {
                pushed_changes(self, account, keys).await
            }

            async fn unsent_opt_outs_of(
                &mut self,
                account: &str,
                keys: &[(&str, &str)],
            ) -> Result<std::collections::HashSet<(String, String)>, crate::store::Error> {
                unsent_opt_outs_of(self, account, keys).await
            }

            async fn consent_states(
                &mut self,
                account: &str,
                keys: &[(&str, &str)],
            ) -> Result<crate::model::ConsentStates, crate::store::Error> {
                consent_states(self, account, keys).await
            }

            async fn append_ledger(
                &mut self,
                account: &str,
                entries: &[crate::store::NewEntry<'_>],
                recorded_at: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<Option<i64>>, crate::store::Error> {
                append_ledger(self, account, entries, recorded_at).await
            }

            async fn write_states(
                &mut self,
                account: &str,
                states: &[crate::store::StateWrite<'_>],
            ) -> Result<(), crate::store::Error> {
                write_states(self, account, states).await
            }

            async fn upsert_leads(
                &mut self,
                account: &str,
                leads: &[(&crate::model::Lead, chrono::DateTime<chrono::Utc>)],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<u64, crate::store::Error> {
                upsert_leads(self, account, leads, now).await
            }

            async fn apply_statuses(
                &mut self,
                account: &str,
                observations: &[crate::model::StatusObservation<'_>],
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<u64, crate::store::Error> {
                apply_statuses(self, account, observations, now).await
            }

            async fn suppress(
                &mut self,
                account: &str,
                opt_outs: &[crate::store::Suppressing<'_>],
            ) -> Result<(), crate::store::Error> {
                suppress(self, account, opt_outs).await
            }

            async fn lift_suppressions(
                &mut self,
                account: &str,
                opt_ins: &[(&str, chrono::DateTime<chrono::Utc>)],
            ) -> Result<(), crate::store::Error> {
                lift_suppressions(self, account, opt_ins).await
            }

            async fn claim_pending(
                &mut self,
                limit: i64,
                now: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<crate::model::StoredDelivery>, crate::store::Error> {
                claim_pending(self, limit, now).await
            }

            $($own)*
        }
    };
}

pub(crate) use statements;
