//! The apply path's writes ([`ApplyTx`]), on the caller's write transaction
//! ([`Tx`](crate::store::Tx)): the trait, what each write takes and gives, here; its one
//! implementation, for whatever lends a backend's connection, in `tx/each_backend.rs` (those
//! with one text for both backends written there, the others each backend's `apply` and
//! `mirror`, of the same names; what comes before and after them, an empty batch or the rows
//! shaped as records, written there once).

/// The implementation, on each backend's connection.
mod each_backend;

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use super::{NewEntry, NewMessage, PageCheckpoint, StateWrite, Suppressing};
use crate::model::{
    AccountId, ConsentObservation, ConsentStates, Holders, Lead, PushedChange, StatusObservation,
    Suppression,
};

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
        account: &AccountId,
        lead_ids: &[&str],
    ) -> impl Future<Output = Result<HashMap<String, (String, String)>, crate::store::Error>> + Send;

    /// The organizations (and lead ids) holding each of `phones`. Every mirrored lead has
    /// the consent record of its (organization, number), so consent records are enough.
    fn holders_of(
        &mut self,
        account: &AccountId,
        phones: &[&str],
    ) -> impl Future<Output = Result<Holders, crate::store::Error>> + Send;

    /// Attempted local changes of these (organization, number) pairs whose echo has not
    /// come back yet, oldest first.
    fn pushed_changes(
        &mut self,
        account: &AccountId,
        keys: &[(&str, &str)],
    ) -> impl Future<Output = Result<Vec<PushedChange>, crate::store::Error>> + Send;

    /// Those of `keys` (organization, number) with an opt-out queued for the service and not
    /// sent yet.
    fn unsent_opt_outs_of(
        &mut self,
        account: &AccountId,
        keys: &[(&str, &str)],
    ) -> impl Future<Output = Result<HashSet<(String, String)>, crate::store::Error>> + Send;

    /// The push of the entry `event_ref` (with no organization of its own: a lead's
    /// suppression entry) once the service answered it with success.
    fn answered_push(
        &mut self,
        account: &AccountId,
        event_ref: &str,
    ) -> impl Future<Output = Result<Option<i64>, crate::store::Error>> + Send;

    /// The latest push of an opt-out of lead `lead_id` (of `organization` and `phone`) made
    /// at `since` or later that the service answered with success: it had the opt-out then.
    fn opt_out_answered_since(
        &mut self,
        account: &AccountId,
        lead: (&str, &str, &str),
        since: crate::model::Timestamp,
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
        account: &AccountId,
        keys: &[(&str, &str)],
    ) -> impl Future<Output = Result<ConsentStates, crate::store::Error>> + Send;

    /// The stored state of every organization holding each of `phones` (the account-wide
    /// one too): its holders and their states in one read.
    fn states_of_numbers(
        &mut self,
        account: &AccountId,
        phones: &[&str],
    ) -> impl Future<Output = Result<ConsentStates, crate::store::Error>> + Send;

    /// Appends the entries not in the ledger yet, in order: the seq of each new one, `None`
    /// for an event already recorded (or recorded earlier in `entries`).
    fn append_ledger(
        &mut self,
        account: &AccountId,
        entries: &[NewEntry<'_>],
        recorded_at: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<Option<i64>>, crate::store::Error>> + Send;

    /// Sets each state where it outranks the stored one; at most one per pair.
    fn write_states(
        &mut self,
        account: &AccountId,
        states: &[StateWrite<'_>],
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;

    /// Inserts or updates mirrored leads, each only if its observation is not older than
    /// what the mirror holds and its fields changed (an unchanged lead is not rewritten on
    /// every scan). Returns how many rows were written.
    fn upsert_leads(
        &mut self,
        account: &AccountId,
        leads: &[(&Lead, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<u64, crate::store::Error>> + Send;

    /// Applies status observations: a terminal status beats a non-terminal one whatever
    /// the times; otherwise the later wins (ties broken by status text, then error code, so
    /// the outcome never depends on arrival order). Returns how many changed a stored row.
    fn apply_statuses(
        &mut self,
        account: &AccountId,
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
        account: &AccountId,
        messages: &[NewMessage<'_>],
    ) -> impl Future<Output = Result<u64, crate::store::Error>> + Send;

    /// The suppressions in force of those of `phones` that are suppressed.
    fn suppressions(
        &mut self,
        account: &AccountId,
        phones: &[&str],
    ) -> impl Future<Output = Result<HashMap<String, Suppression>, crate::store::Error>> + Send;

    /// Suppresses each number from its account-wide opt-out (its entry and event time); a
    /// number already suppressed keeps its earlier suppression.
    fn suppress(
        &mut self,
        account: &AccountId,
        opt_outs: &[Suppressing<'_>],
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;

    /// Ends the suppression of each number whose account-wide opt-in is later than it.
    fn lift_suppressions(
        &mut self,
        account: &AccountId,
        opt_ins: &[(&str, DateTime<Utc>)],
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;

    /// Queues the local change recorded as `seq` for the service, superseding older changes
    /// of the pair never attempted.
    fn queue_push(
        &mut self,
        account: &AccountId,
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
