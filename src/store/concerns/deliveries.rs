//! The delivery concerns: the subscribers' cursors and state, and the destinations'
//! outcomes per entry (split from the other concerns to keep each file readable).

#![allow(async_fn_in_trait)] // Called on the concrete `Pool`, whose futures are Send.

/// The subscribers' delivery state.
pub trait SubscriberStore {
    /// Adds a state for each of `starts` that has none, its cursor the one given (0: the
    /// whole ledger).
    async fn ensure_subscribers(&self, starts: &[(&str, i64)]) -> Result<(), crate::store::Error>;

    /// The state of `name`, if it was ever configured.
    async fn subscriber_state(
        &self,
        name: &str,
    ) -> Result<Option<crate::model::SubscriberState>, crate::store::Error>;

    /// Moves the cursor forward to `cursor` (entries up to it were accepted, or are not
    /// the subscriber's), clearing the failures; `delivered_ms`: the last acceptance. Keeps
    /// `acks`, the acknowledged requests that carried opt-outs since the last call.
    async fn subscriber_delivered(
        &self,
        name: &str,
        generation: i64,
        cursor: i64,
        delivered_ms: Option<i64>,
        acks: &[crate::model::AckSpan],
    ) -> Result<(), crate::store::Error>;

    /// The acknowledged requests of `name` that carried entries of `first_seq..=last_seq`,
    /// by their first entry.
    async fn ack_spans(
        &self,
        name: &str,
        first_seq: i64,
        last_seq: i64,
    ) -> Result<Vec<crate::model::AckSpan>, crate::store::Error>;

    /// Counts a failed attempt; the next is due at `next_attempt_ms`.
    async fn subscriber_failed(
        &self,
        name: &str,
        generation: i64,
        error: &str,
        next_attempt_ms: i64,
    ) -> Result<(), crate::store::Error>;

    /// Stops sending to `name` (it answered 410) until a replay.
    async fn disable_subscriber(
        &self,
        name: &str,
        generation: i64,
        error: &str,
    ) -> Result<(), crate::store::Error>;

    /// Sets the cursor of `name` to `cursor` (entries after it are sent again), enables it
    /// and clears its failures; false if `name` has no state.
    async fn replay_subscriber(&self, name: &str, cursor: i64)
    -> Result<bool, crate::store::Error>;

    /// Makes the next attempt of `name` due now (its backoff or `Retry-After` is cut short;
    /// a disabled subscriber stays disabled); false if `name` has no state.
    async fn retry_subscriber(&self, name: &str) -> Result<bool, crate::store::Error>;

    /// The ledger's last seq (0 when empty). Seqs become visible in order, so every
    /// entry up to it is readable.
    async fn ledger_head(&self) -> Result<i64, crate::store::Error>;
}

/// The destinations' outcomes per entry (their cursor and state: [`SubscriberStore`]).
pub trait DestinationStore {
    /// The progress kept at `name` of entries `first_seq..=last_seq` that have any.
    async fn entry_progress(
        &self,
        name: &str,
        first_seq: i64,
        last_seq: i64,
    ) -> Result<Vec<crate::model::EntryProgress>, crate::store::Error>;

    /// Adds `actions_done` to the actions answered for entry `seq` at `name`, and
    /// `actions_unknown` to those sent whose answer never came; `at`: when.
    async fn record_progress(
        &self,
        name: &str,
        seq: i64,
        progress: (i64, i64),
        at: crate::model::Timestamp,
    ) -> Result<(), crate::store::Error>;

    /// Records how entry `seq` ended at `name` (with `actions_done` added), and, when the
    /// ending says what the destination now holds of a person, that too: in one
    /// transaction, so that what it was last told never disagrees with the outcomes.
    async fn record_ending(
        &self,
        name: &str,
        seq: i64,
        actions_done: i64,
        ending: crate::model::Ending<'_>,
        at: crate::model::Timestamp,
    ) -> Result<(), crate::store::Error>;

    /// What `name` was last told of `person`, if anything.
    async fn told(
        &self,
        name: &str,
        person: &str,
    ) -> Result<Option<crate::model::Told>, crate::store::Error>;

    /// The (account, organization) of each entry of `phone` that took effect, opted out as
    /// `opted_out` says, after `after_seq` and before `before_seq`.
    async fn changes_of_number_between(
        &self,
        phone: &str,
        opted_out: bool,
        between: (i64, i64),
    ) -> Result<Vec<(String, String)>, crate::store::Error>;

    /// The entries recorded with account-wide entry `seq` for each organization holding
    /// its number (the same event, account and number; another organization), in seq
    /// order: (seq, organization, superseded).
    async fn entries_with(&self, seq: i64)
    -> Result<Vec<(i64, String, bool)>, crate::store::Error>;

    /// How many entries `name` has of each outcome.
    async fn outcome_counts(
        &self,
        name: &str,
    ) -> Result<crate::model::OutcomeCounts, crate::store::Error>;

    /// The entries of `name` with an outcome (only `state`'s when given) after `after_seq`,
    /// in seq order, at most `limit`.
    async fn outcomes(
        &self,
        name: &str,
        state: Option<crate::model::OutcomeKind>,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::OutcomeRecord>, crate::store::Error>;

    /// What rows of a warehouse carry beside the entries `first_seq..=last_seq`: their
    /// hashes, and the evidence that names their actors.
    async fn row_extras(
        &self,
        first_seq: i64,
        last_seq: i64,
    ) -> Result<Vec<crate::model::warehouse::RowExtras>, crate::store::Error>;

    /// Records a warehouse's batch in one transaction: the entries `sent` (each `sent` at
    /// `at`) and those `refused`, each with its reason.
    async fn record_rows(
        &self,
        name: &str,
        sent: &[i64],
        refused: &[(i64, String)],
        at: crate::model::Timestamp,
    ) -> Result<(), crate::store::Error>;

    /// Every destination's outcome of entries `first_seq..=last_seq`.
    async fn outcomes_of_entries(
        &self,
        first_seq: i64,
        last_seq: i64,
    ) -> Result<Vec<crate::model::EntryOutcome>, crate::store::Error>;

    /// Forgets the `unmatched`, `refused` and `unconfirmed` outcomes of `name` from
    /// `from_seq` on, so that those entries are tried again (a replay); the actions
    /// answered stay done. `sent_too`: every outcome (a warehouse sends every row again,
    /// which it keeps once).
    async fn forget_unsent(
        &self,
        name: &str,
        from_seq: i64,
        sent_too: bool,
    ) -> Result<u64, crate::store::Error>;

    /// Ends the `error` of `name` (its key works again, or it was retried): false if it was
    /// not stopped.
    async fn enable_subscriber(&self, name: &str) -> Result<bool, crate::store::Error>;

    /// Whether `name` has an entry after `seq` that it was sent: a warehouse table holding
    /// rows through `seq` alone (or none, with `seq` 0) is behind what was sent to it.
    async fn sent_after(&self, name: &str, seq: i64) -> Result<bool, crate::store::Error>;

    /// Starts the warehouse `name` again from `from_seq`, in one transaction: every outcome
    /// from there forgotten, the cursor before it (a replay's new generation), and
    /// `refilling` with `reason` until the cursor passes where it stood.
    async fn refill(
        &self,
        name: &str,
        from_seq: i64,
        reason: &str,
    ) -> Result<(), crate::store::Error>;
}
