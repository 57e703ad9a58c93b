//! One trait per concern of the storage layer, each implemented once for [`super::Pool`]
//! in `store/<concern>.rs`, every statement a body run on either backend's pool
//! (`on_backend!`, `store/backend.rs`).
//!
//! One file over 400 lines on purpose: it is the table of every statement the daemon runs,
//! by concern, where a reader looks one up; the delivery concerns (subscribers and
//! destinations) are in [`deliveries`].
#![allow(async_fn_in_trait)] // Called on the concrete `Pool`, whose futures are Send.

/// The subscribers' and destinations' delivery state.
mod deliveries;
pub use deliveries::{DestinationStore, SubscriberStore};

/// The ledger's hash chain as stored.
pub trait ChainStore {
    /// The last entry, as stored (an empty ledger's head is the genesis).
    async fn chain_head(&self) -> Result<crate::model::chain::ChainHead, crate::store::Error>;

    /// Up to `limit` entries after `after`, in seq order.
    async fn chain_page(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::chain::ChainRow>, crate::store::Error>;
}

/// The console's sessions.
pub trait SessionStore {
    /// Stores a new session, and drops those that have lapsed.
    async fn create_session(
        &self,
        session: &crate::model::ConsoleSession,
        idle_ms: i64,
    ) -> Result<(), crate::store::Error>;

    /// The session of `id_hash`, if it has not lapsed by `now_ms`.
    async fn find_session(
        &self,
        id_hash: &str,
        now_ms: i64,
        idle_ms: i64,
    ) -> Result<Option<crate::model::ConsoleSession>, crate::store::Error>;

    /// Records a use of the session.
    async fn touch_session(&self, id_hash: &str, now_ms: i64) -> Result<(), crate::store::Error>;

    /// Ends the session (sign-out).
    async fn delete_session(&self, id_hash: &str) -> Result<(), crate::store::Error>;
}

/// What each ledger entry of a number stands on.
pub trait EvidenceStore {
    /// Every ledger entry of `phone` (in one organization or all), oldest first.
    async fn evidence_entries(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<crate::model::StoredEntry>, crate::store::Error>;

    /// The stored deliveries of these dedup keys (those still kept).
    async fn evidence_deliveries(
        &self,
        dedup_keys: &[&str],
    ) -> Result<Vec<crate::model::KeptDelivery>, crate::store::Error>;
}

/// Leases and replica heartbeats.
pub trait LeaseStore {
    /// Takes every lease of `names` for `holder` for `ttl_ms`, or none: the first one held
    /// by another holder and not lapsed is returned, and nothing is taken.
    async fn take_leases(
        &self,
        names: &[String],
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<crate::model::LeaseHeld>, crate::store::Error>;

    /// Extends `holder`'s leases by `ttl_ms` from now; the first one found with another
    /// holder is returned (and the ones after it are left alone).
    async fn renew_leases(
        &self,
        names: &[String],
        holder: &str,
        ttl_ms: i64,
    ) -> Result<Option<String>, crate::store::Error>;

    /// Gives `holder`'s leases of `names` back.
    async fn release_leases(
        &self,
        names: &[String],
        holder: &str,
    ) -> Result<(), crate::store::Error>;

    /// Records `name`'s heartbeat; forgets replicas not heard from for `forget_after_ms`.
    async fn heartbeat(&self, name: &str, forget_after_ms: i64) -> Result<(), crate::store::Error>;

    /// The replicas heard from in the last `listed_for_ms`, by name, and which holds the lease
    /// `leader_lease`.
    async fn replicas(
        &self,
        leader_lease: &str,
        listed_for_ms: i64,
    ) -> Result<Vec<crate::model::ReplicaBeat>, crate::store::Error>;
}

/// The outbox as the worker and `replay` use it.
pub trait OutboxStore {
    /// Counts a failed attempt against the pending row `id`, quarantining it after
    /// `max_attempts`; returns its id if it was quarantined.
    async fn record_failure(
        &self,
        id: i64,
        error: &str,
        max_attempts: i64,
    ) -> Result<Option<i64>, crate::store::Error>;

    /// Puts rows back in the pending state; returns their ids.
    async fn requeue(
        &self,
        selection: crate::model::Requeue,
    ) -> Result<Vec<i64>, crate::store::Error>;
}

/// How many stored deliveries are in each state.
pub trait OutboxCounts {
    /// The states of the outbox rows `ids`, by state: how many are pending, applied and
    /// quarantined.
    async fn outbox_states(
        &self,
        ids: &[i64],
    ) -> Result<crate::model::OutboxStates, crate::store::Error>;
}

/// Local consent changes queued for the service.
pub trait PushStore {
    /// The service refused the push `seq` for good.
    async fn push_failed(
        &self,
        seq: i64,
        error: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), crate::store::Error>;

    /// The earliest time a pending push is due, if any.
    async fn next_push_due(
        &self,
        account: &crate::model::AccountId,
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>, crate::store::Error>;

    /// The push `seq` failed for now; it is due again at `next`.
    async fn retry_push_at(
        &self,
        seq: i64,
        error: &str,
        next: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), crate::store::Error>;

    /// The push `seq` reached the service as lead `lead_id`.
    async fn push_sent(
        &self,
        seq: i64,
        lead_id: &str,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), crate::store::Error>;

    /// Takes the oldest push due at `now` whose number has no older change pending, counting
    /// the attempt before it is made.
    async fn take_due_pushes(
        &self,
        account: &crate::model::AccountId,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<crate::model::DuePush>, crate::store::Error>;
}

/// The compliance report's reads.
pub trait ComplianceStore {
    /// The first `limit` opt-out entries after seq `after` that occurred in `since..until`
    /// (in the scope: one organization or all, one account or all), echoes of local changes
    /// left out, in seq order, each with its push, the next opt-in of its (organization,
    /// number) and the lead the mirror holds for that pair. A report reads them a page at a time.
    async fn opt_outs(
        &self,
        since: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
        scope: crate::model::Scope<'_>,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::OptOutRow>, crate::store::Error>;

    /// The opt-outs made here whose push the service has not accepted (pending, or
    /// refused), oldest first: (seq, event time).
    async fn unsent_opt_outs(
        &self,
        limit: i64,
    ) -> Result<Vec<(i64, crate::model::Timestamp)>, crate::store::Error>;

    /// The opt-out entries after `after`, in seq order: (seq, (account, organization),
    /// source, event time).
    async fn opt_outs_after(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<
        Vec<(
            i64,
            (String, String),
            crate::model::Source,
            crate::model::Timestamp,
        )>,
        crate::store::Error,
    >;

    /// The copies of opt-outs shared with other accounts whose `event_ref` is one of `refs`
    /// (`shared:SEQ`), with their pushes.
    async fn shared_copies(
        &self,
        refs: &[String],
    ) -> Result<Vec<crate::model::SharedCopy>, crate::store::Error>;

    /// The mirrored messages of `lead_ids`.
    async fn messages_of_leads(
        &self,
        lead_ids: &[&str],
    ) -> Result<Vec<crate::model::LeadMessage>, crate::store::Error>;
}

/// The read side: the ledger, the mirror and the daemon's state, as records.
pub trait ReadStore {
    /// The outbox and push backlog.
    async fn backlog(&self) -> Result<crate::model::Backlog, crate::store::Error>;

    /// Ledger entries after `after`, in `seq` order.
    async fn changes(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::LedgerEntry>, crate::store::Error>;

    /// Current consent of `phone` in every organization, or in one.
    async fn current(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<crate::model::ConsentRecord>, crate::store::Error>;

    /// The suppression in force of `phone`, if it is suppressed.
    async fn suppression(
        &self,
        phone: &str,
        account: Option<&str>,
    ) -> Result<Option<crate::model::Suppression>, crate::store::Error>;

    /// Deliveries received since `since`, counted per minute: `(minute as "YYYY-MM-DDTHH:MM",
    /// count)`, oldest first. Ids grow with receipt, so the rows of the window are found by
    /// walking the primary key back from the newest, not by a scan of the whole outbox.
    async fn deliveries_per_minute(
        &self,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<(String, i64)>, crate::store::Error>;

    /// The most recent stored deliveries, newest first.
    async fn events(
        &self,
        quarantined_only: bool,
        limit: i64,
    ) -> Result<Vec<crate::model::StoredEvent>, crate::store::Error>;

    /// Every ledger entry of `phone`, oldest first.
    async fn history(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<crate::model::LedgerEntry>, crate::store::Error>;

    /// The mirrored lead `id` of `account`, as the v3 Lead resource.
    async fn lead(
        &self,
        id: &str,
        account: &crate::model::AccountId,
    ) -> Result<Option<serde_json::Value>, crate::store::Error>;

    /// The mirrored leads of `phone`, in every organization or in one, of every account or
    /// of one.
    async fn leads(
        &self,
        phone: &str,
        organization: Option<&str>,
        account: Option<&str>,
    ) -> Result<Vec<serde_json::Value>, crate::store::Error>;

    /// Current consent of each of `phones`, in their order, organizations sorted.
    async fn lookup(
        &self,
        phones: &[&str],
        organization: Option<&str>,
    ) -> Result<Vec<crate::model::ConsentRecord>, crate::store::Error>;

    /// The tracked message `id` of `account`.
    async fn message(
        &self,
        id: &str,
        account: &crate::model::AccountId,
    ) -> Result<Option<serde_json::Value>, crate::store::Error>;

    /// The accounts the ledger holds entries of, by name.
    async fn ledger_accounts(&self) -> Result<Vec<String>, crate::store::Error>;

    /// Pushes by state.
    async fn push_counts(&self) -> Result<crate::model::PushCounts, crate::store::Error>;

    /// The kept refused deliveries, newest first.
    async fn rejected(&self) -> Result<Vec<crate::model::KeptRejection>, crate::store::Error>;

    /// The daemon's state at a glance, but for the replicas (listed by `crate::replica`).
    async fn status(&self) -> Result<crate::model::Status, crate::store::Error>;
}

/// Reconciliation passes, each of one account: checkpoints, records and the messages to look
/// up.
pub trait PassStore {
    /// The cursor to resume `organization` from, starting a checkpoint if there is none.
    async fn checkpoint(
        &self,
        account: &crate::model::AccountId,
        pass_id: &str,
        organization: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Option<String>, crate::store::Error>;

    /// Ends `organization`'s scan with an error: what was scanned is recorded with the error
    /// `describe` gives for that count, and the checkpoint goes. Returns the error.
    async fn end_with_error<E: std::fmt::Display + Send>(
        &self,
        account: &crate::model::AccountId,
        pass_id: &str,
        organization: &str,
        now: chrono::DateTime<chrono::Utc>,
        describe: impl FnOnce(i64) -> E + Send,
    ) -> Result<E, crate::store::Error>;

    /// Messages to look up: not final and first seen before `stale_before`, or `sent` since
    /// `receipt_since` (a carrier receipt may follow).
    async fn open_messages(
        &self,
        account: &crate::model::AccountId,
        stale_before: chrono::DateTime<chrono::Utc>,
        receipt_since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<String>, crate::store::Error>;

    /// Records that `organization` could not be scanned in this pass.
    async fn organization_failed(
        &self,
        account: &crate::model::AccountId,
        pass_id: &str,
        organization: &str,
        now: chrono::DateTime<chrono::Utc>,
        error: &str,
    ) -> Result<(), crate::store::Error>;

    /// Keeps a finished pass's summary.
    async fn record_pass(
        &self,
        pass: crate::store::PassRecord<'_>,
    ) -> Result<(), crate::store::Error>;

    /// Starts `organization`'s scan again from the first page.
    async fn restart_checkpoint(
        &self,
        account: &crate::model::AccountId,
        organization: &str,
    ) -> Result<(), crate::store::Error>;
}

/// Pruning stored deliveries and finished messages.
pub trait RetentionStore {
    /// Pages of the database file that are free and could go back to the file system
    /// (SQLite; PostgreSQL reuses freed space and gives none back: 0).
    async fn free_pages(&self) -> Result<i64, crate::store::Error>;

    /// Gives back to the file system up to `pages` free pages; returns how many remain
    /// free (PostgreSQL: nothing to give, 0).
    async fn vacuum_step(&self, pages: i64) -> Result<i64, crate::store::Error>;

    /// Tracked messages with a terminal status dating from before `before`: what
    /// [`RetentionStore::delete_finished_messages`] would remove, all batches together
    /// (the `messages_done` index).
    async fn count_finished_messages(
        &self,
        before: chrono::DateTime<chrono::Utc>,
    ) -> Result<u64, crate::store::Error>;

    /// Deletes those of `ids` that are still applied (a row put back to pending by `replay`
    /// since it was scanned stays); returns how many went.
    async fn delete_applied(&self, ids: &[i64]) -> Result<u64, crate::store::Error>;

    /// Deletes up to `limit` tracked messages with a terminal status dating from before
    /// `before` (a non-terminal one is never touched: the reconciler looks it up); returns how
    /// many went. One statement, so a status applied meanwhile (SQLite has one writer) is
    /// either seen or waits for it.
    async fn delete_finished_messages(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        limit: i64,
    ) -> Result<u64, crate::store::Error>;

    /// Removes the subscribers' acknowledgements and the destinations' finished outcomes
    /// older than `before` (the consent evidence's retention); returns how many went.
    async fn delete_acks_before(
        &self,
        before: chrono::DateTime<chrono::Utc>,
    ) -> Result<u64, crate::store::Error>;

    /// Removes up to `limit` of the sources' records noted before `before`, oldest first;
    /// returns how many went.
    async fn delete_source_records_before(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        limit: i64,
    ) -> Result<u64, crate::store::Error>;

    /// Removes up to `limit` of the replies decided before `before` (never one waiting),
    /// oldest first; returns how many went.
    async fn delete_decided_replies_before(
        &self,
        before: chrono::DateTime<chrono::Utc>,
        limit: i64,
    ) -> Result<u64, crate::store::Error>;

    /// Up to `limit` outbox rows after `after`, in id order, with their bodies (what kind of
    /// delivery each is).
    async fn scan_outbox(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::OutboxHead>, crate::store::Error>;
}

/// `daemon_state`: small durable facts of the daemon, by key.
pub trait StateStore {
    async fn state_value(&self, key: &str) -> Result<Option<String>, crate::store::Error>;

    async fn put_state(
        &self,
        key: &str,
        value: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), crate::store::Error>;

    /// Counts one more failed token request in the JSON state under `key` (see
    /// `upstream::DbTokenGuardStore`), in one statement: processes failing at once each add
    /// theirs. The failure that reaches `max` blocks until `block_until`. Returns the new value.
    async fn count_token_failure(
        &self,
        key: &str,
        max: i64,
        block_until: chrono::DateTime<chrono::Utc>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<String, crate::store::Error>;
}

/// Streamed exports of the consent state and the ledger.
pub trait ExportStore {
    /// Consent records whose current state was set by an entry after `since`, by
    /// organization and number (byte order on either backend).
    fn export_consent(
        &self,
        since: i64,
    ) -> futures::stream::BoxStream<'_, Result<crate::model::ConsentRecord, crate::store::Error>>;

    /// Ledger entries after `since`, in seq order.
    fn export_ledger(
        &self,
        since: i64,
    ) -> futures::stream::BoxStream<'_, Result<crate::model::LedgerEntry, crate::store::Error>>;
}
