//! What the destinations' senders keep per entry, and how destinations are shown.

use serde::Serialize;

use super::{DestinationStatus, OutcomeKind, Timestamp};

/// An entry's progress at a destination, as kept: the actions answered with success so
/// far (a bit each, the kind's own), and its outcome once it has one.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EntryProgress {
    pub seq: i64,
    pub actions_done: i64,
    pub outcome: Option<OutcomeKind>,
    /// Actions sent whose answer never came (no answer within the timeout): each is sent
    /// once more at most.
    pub actions_unknown: i64,
}

/// What a destination was last told of one person (VAN: a VAN ID and a number; Action
/// Network: a number): by entry `seq`, answered at `at`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Told {
    pub opted_out: bool,
    pub seq: i64,
    pub at: Timestamp,
    /// False when its request was sent twice and never answered (`unconfirmed`).
    pub confirmed: bool,
}

/// How an entry's outcome is recorded: what it ended in, why, and (`already`) the entry it
/// follows; with `told`, what the destination now holds of the person (a person key and
/// whether opted out), kept in the same transaction.
#[derive(Debug, Clone, Copy)]
pub struct Ending<'a> {
    pub outcome: OutcomeKind,
    pub reason: Option<&'a str>,
    pub follows: Option<i64>,
    pub told: Option<(&'a str, bool, bool)>,
}

/// One entry's outcome at a destination, as `destinations outcomes NAME` lists it.
#[derive(Debug, Clone, Serialize, PartialEq, sqlx::FromRow, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = DestinationOutcome)]
pub struct OutcomeRecord {
    pub seq: i64,
    pub phone_number: String,
    pub organization_id: String,
    pub lead_id: Option<String>,
    pub outcome: OutcomeKind,
    /// Why it was unmatched, or the system's own words when it refused.
    pub reason: Option<String>,
    pub at: Timestamp,
    /// The account of its entry.
    pub account_id: String,
    /// `already`: the entry that told the destination what this one says (its `at` is
    /// when that one was answered).
    pub follows: Option<i64>,
}

/// A destination's outcomes, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct OutcomeCounts {
    pub sent: i64,
    pub unmatched: i64,
    pub refused: i64,
    pub already: i64,
    pub through_leads: i64,
    pub unconfirmed: i64,
}

/// An outcome as the compliance report reads it: which destination, which entry.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EntryOutcome {
    pub destination: String,
    pub seq: i64,
    pub outcome: OutcomeKind,
    pub reason: Option<String>,
    pub at: Timestamp,
    /// `already`: the entry it follows.
    pub follows: Option<i64>,
}

/// A destination as `GET /v1/destinations` and `destinations` show it.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Destination)]
pub struct DestinationView {
    pub name: String,
    /// `van`, `action_network`, `bigquery` or `postgres`.
    pub kind: String,
    pub cursor: i64,
    /// Ledger entries after the cursor (some may be passed over by its filters).
    pub lag_entries: i64,
    /// Age of the oldest entry after the cursor (0 when none).
    pub lag_seconds: f64,
    pub state: DestinationStatus,
    pub last_error: Option<String>,
    pub last_success_at: Option<Timestamp>,
    pub sent: i64,
    pub unmatched: i64,
    pub refused: i64,
    /// Entries that sent nothing: the destination had been told what they say.
    pub already: i64,
    /// Account-wide entries that reach it through their leads' entries.
    pub through_leads: i64,
    /// Entries with an action sent twice and never answered.
    pub unconfirmed: i64,
}

/// What a batch of records came to, added to the source's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceCounts {
    pub read: i64,
    pub opt_outs: i64,
    /// Recorded opt-ins (a source with `opt_ins = true`).
    pub opt_ins: i64,
    pub confirmed: i64,
    pub ignored: i64,
    /// Change times further past their reading than the tolerance, ranked at the reading
    /// (counted, not kept in the source's row).
    pub future: i64,
    /// Replies kept for a person to decide (the review queue is their count).
    pub review: i64,
}

impl std::ops::AddAssign for SourceCounts {
    fn add_assign(&mut self, other: Self) {
        self.read += other.read;
        self.opt_outs += other.opt_outs;
        self.opt_ins += other.opt_ins;
        self.confirmed += other.confirmed;
        self.ignored += other.ignored;
        self.future += other.future;
        self.review += other.review;
    }
}
