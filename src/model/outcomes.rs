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
}

/// A destination's outcomes, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct OutcomeCounts {
    pub sent: i64,
    pub unmatched: i64,
    pub refused: i64,
}

/// An outcome as the compliance report reads it: which destination, which entry.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EntryOutcome {
    pub destination: String,
    pub seq: i64,
    pub outcome: OutcomeKind,
    pub reason: Option<String>,
    pub at: Timestamp,
}

/// A destination as `GET /v1/destinations` and `destinations` show it.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Destination)]
pub struct DestinationView {
    pub name: String,
    /// `van` or `action_network`.
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
}
