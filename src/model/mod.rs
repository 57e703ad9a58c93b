//! The records the daemon keeps, typed once: what the apply path decides and the storage
//! layer writes, whichever the backend.

use std::collections::HashMap;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// The hash chain over the ledger: the canonical encoding of an entry and the walk.
pub mod chain;
/// The lead and the message status as the mirror keeps them.
mod mirror;
/// Times and closed sets of words, typed across the storage boundary.
pub mod typed;

pub use chain::ChainHead;
pub use mirror::{Lead, MessageStatus, NON_TERMINAL, RECEIPT_WINDOW, is_terminal};
pub use typed::{OutboxState, PushState, Source, SubscriberStatus, Timestamp};

/// One consent observation of one (organization, number).
#[derive(Debug, Clone, PartialEq)]
pub struct ConsentObservation {
    pub organization_id: String,
    pub phone_number: String,
    pub lead_id: Option<String>,
    pub opted_out: bool,
    pub occurred_at: DateTime<Utc>,
    pub source: Source,
    /// Identifies the event: one ledger entry per event and (organization, number).
    pub event_ref: String,
    pub tag_id: Option<String>,
    pub reason: Option<String>,
    /// What it stands on, kept with its ledger entry (`None` for a webhook's, whose
    /// evidence is its stored delivery).
    pub evidence: Option<KeptEvidence>,
}

/// The evidence kept with a `reconcile` or `local` ledger entry, as JSON in its
/// `evidence` column.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum KeptEvidence {
    /// When the lead was requested from the service, and the lead as it came back.
    Reconcile {
        requested_at: Timestamp,
        lead: serde_json::Value,
    },
    /// Who made a local change: an admin token's name, or `cli:USER`.
    Local { actor: String },
}

/// What applying one consent observation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsentApplied {
    /// The new ledger entry; `None` when this event was already recorded.
    pub seq: Option<i64>,
    /// Whether it became the current state when applied.
    pub current: bool,
    /// Whether a newer state was already in place.
    pub superseded: bool,
}

/// The rank of a consent state: later event time wins, then opt-out over opt-in at the same
/// instant (the cautious answer to a tie). Times count in milliseconds, as stored; SQL
/// compares the same row value `(changed_at, opted_out)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rank {
    pub changed_at: DateTime<Utc>,
    pub opted_out: bool,
}

impl Rank {
    pub fn of(occurred_at: DateTime<Utc>, opted_out: bool) -> Self {
        Self {
            changed_at: to_millis(occurred_at),
            opted_out,
        }
    }
}

/// `at` without its sub-millisecond part: the precision both backends store.
pub fn to_millis(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}

/// The stored consent of one (organization, number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredConsent {
    pub rank: Rank,
    pub lead_id: Option<String>,
}

/// The current consent of some (organization, number) pairs, as stored.
#[derive(Debug, Default)]
pub struct ConsentStates(pub HashMap<(String, String), StoredConsent>);

impl ConsentStates {
    /// Whether the pair is opted out; `None` if nothing is known of it.
    pub fn opted_out(&self, organization_id: &str, phone_number: &str) -> Option<bool> {
        self.0
            .get(&(organization_id.to_owned(), phone_number.to_owned()))
            .map(|s| s.rank.opted_out)
    }
}

/// One message status observation.
#[derive(Debug, Clone)]
pub struct StatusObservation<'a> {
    pub message: &'a MessageStatus,
    pub lead_id: Option<&'a str>,
    pub organization_id: Option<&'a str>,
    pub occurred_at: DateTime<Utc>,
    pub source: Source,
}

/// The organizations (and lead ids) that hold a number: what account sync extends a change
/// of the number to.
pub type Holders = HashMap<String, Vec<(String, Option<String>)>>;

/// [`Holders`] from rows of (number, organization, lead).
pub fn holders(rows: Vec<(String, String, Option<String>)>) -> Holders {
    let mut holders = Holders::new();
    for (phone, organization, lead) in rows {
        holders.entry(phone).or_default().push((organization, lead));
    }
    holders
}

/// An attempted local change whose webhook may come back (the echo rule is written out in
/// `migrations/sqlite/20261121000003_pushes.sql`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PushedChange {
    /// The ledger entry of the local change.
    pub seq: i64,
    pub organization_id: String,
    pub phone_number: String,
    pub opted_out: bool,
    /// The local change's event time.
    pub occurred_at: DateTime<Utc>,
    pub first_attempt_at: DateTime<Utc>,
    pub last_attempt_at: DateTime<Utc>,
}

/// An outbox row as stored: the delivery's bytes and when they arrived.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredDelivery {
    pub id: i64,
    pub dedup_key: String,
    pub received_at: DateTime<Utc>,
    pub body: Vec<u8>,
}

/// An outbox row as retention reads it: enough to tell whether it may go.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OutboxHead {
    pub id: i64,
    pub received_at: DateTime<Utc>,
    pub state: OutboxState,
    pub body: Vec<u8>,
}

/// Which outbox rows `replay` puts back in the pending state.
#[derive(Debug, Clone, Copy)]
pub enum Requeue {
    Quarantined,
    Id(i64),
}

/// Outbox rows by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct OutboxStates {
    pub pending: i64,
    pub applied: i64,
    pub quarantined: i64,
}

/// A lease another holder has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHeld {
    pub name: String,
    pub holder: String,
    /// Until it lapses unless renewed, in milliseconds.
    pub expires_in_ms: i64,
}

/// A replica's last heartbeat, as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ReplicaBeat {
    pub name: String,
    pub last_seen_ms: i64,
    /// It holds the leader's lease.
    pub leader: bool,
}

/// A verified delivery, ready to be committed.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub dedup_key: String,
    pub received_at: DateTime<Utc>,
    pub body: Bytes,
    /// JSON object of the headers kept with the delivery.
    pub headers: String,
    pub secret_index: usize,
}

/// A delivery that failed verification, kept for diagnosis.
#[derive(Debug, Clone)]
pub struct RejectedDelivery {
    pub received_at: DateTime<Utc>,
    pub reason: String,
    /// JSON array of `[name, value]`.
    pub headers: String,
    pub body: Bytes,
}

/// A kept refused delivery, as `webhooks diagnose` reads it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KeptRejection {
    pub id: i64,
    pub received_at: Timestamp,
    pub reason: String,
    /// Stored as a JSON array of `[name, value]`.
    #[sqlx(json)]
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

// The records the read side gives out, as the contract names them.

/// Current consent of a number in one organization (the contract's consent record).
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct ConsentRecord {
    pub organization_id: String,
    pub lead_id: Option<String>,
    pub phone_number: String,
    pub opted_out: bool,
    pub changed_at: Timestamp,
    pub source: Source,
}

/// One ledger entry (the contract's ledger entry).
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct LedgerEntry {
    pub seq: i64,
    pub organization_id: String,
    pub lead_id: Option<String>,
    pub phone_number: String,
    pub opted_out: bool,
    pub occurred_at: Timestamp,
    pub recorded_at: Timestamp,
    pub source: Source,
    pub event_ref: String,
    pub superseded: bool,
    /// Local changes only: the push to the service.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[sqlx(default)]
    pub push: Option<PushState>,
    /// Returning webhooks only: the seq of the local change this entry echoes.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[sqlx(default)]
    pub echo_of: Option<i64>,
}

/// A ledger entry with what the evidence bundle adds to it, as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredEntry {
    #[sqlx(flatten)]
    pub entry: LedgerEntry,
    pub tag_id: Option<String>,
    pub reason: Option<String>,
    pub hash: Option<String>,
    /// The hash of the entry before it in seq order (`None` for the first).
    pub prev_hash: Option<String>,
    /// The `evidence` column: JSON text of a [`KeptEvidence`].
    pub evidence: Option<String>,
}

/// A stored delivery with everything needed to check its signature again.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KeptDelivery {
    pub id: i64,
    pub dedup_key: String,
    pub received_at: Timestamp,
    /// JSON object of the headers kept.
    pub headers: String,
    pub body: Vec<u8>,
    pub secret_index: i64,
}

/// A stored delivery, as `events` lists it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct StoredEvent {
    pub id: i64,
    pub dedup_key: String,
    pub received_at: Timestamp,
    /// The envelope's `type` (or `eventType`), when the body has one.
    pub event_type: Option<String>,
    pub state: OutboxState,
    pub attempts: i64,
    pub last_error: Option<String>,
}

/// The daemon's state at a glance.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Deliveries committed but not yet applied.
    pub backlog: i64,
    pub quarantined: i64,
    pub applied: i64,
    pub ledger_entries: i64,
    pub leads: i64,
    pub messages: i64,
    pub open_messages: i64,
    pub oldest_pending_at: Option<Timestamp>,
    pub last_error: Option<LastError>,
    /// The last completed leads pass of each organization.
    pub reconciliation: Vec<OrganizationPass>,
    /// Organizations whose leads pass was interrupted and resumes from a cursor.
    pub reconciliation_in_progress: Vec<String>,
    /// Local consent changes and their push to the service.
    pub pushes: PushCounts,
    /// The processes serving this database, heard from in the last minute, and the leader.
    pub replicas: Vec<ReplicaSeen>,
    /// The last ledger entry and its hash, to keep elsewhere (`ledger verify` checks the
    /// chain up to it).
    pub chain_head: ChainHead,
    /// The configured subscribers and how far behind each is.
    pub subscribers: Vec<SubscriberView>,
}

/// The last reconciliation of one organization.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct OrganizationPass {
    pub organization_id: String,
    pub finished_at: Timestamp,
    pub leads_scanned: i64,
    pub repaired: i64,
    pub error: Option<String>,
}

/// The most recent failure the daemon recorded.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct LastError {
    pub at: Timestamp,
    pub message: String,
}

/// A queued local change taken for an attempt, as the pusher reads it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DuePush {
    pub seq: i64,
    pub organization_id: String,
    pub phone_number: String,
    pub opted_out: bool,
    pub tag_id: Option<String>,
    pub lead_id: Option<String>,
    /// Attempts so far, this one included.
    pub attempts: i64,
}

/// The backlog figures `/metrics` shows, read from the database when asked.
#[derive(Debug, Clone, Default)]
pub struct Backlog {
    /// Outbox rows not applied yet.
    pub pending: i64,
    /// When the oldest of them was received.
    pub oldest_pending_at: Option<DateTime<Utc>>,
    pub quarantined: i64,
    pub pushes_pending: i64,
}

/// Pushes by state, for `status`.
#[derive(Debug, Clone, Default, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct PushCounts {
    pub pending: i64,
    pub sent: i64,
    pub failed: i64,
    /// Pending pushes that failed at least once.
    pub retrying: i64,
    pub oldest_pending_at: Option<Timestamp>,
    pub last_push_error: Option<String>,
}

/// A replica as `status` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSeen {
    pub name: String,
    pub last_seen: Timestamp,
    pub leader: bool,
}

/// A subscriber's delivery state, as kept (times in Unix milliseconds).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SubscriberState {
    pub name: String,
    /// The last seq delivered or passed over.
    pub cursor: i64,
    /// Raised by each replay.
    pub generation: i64,
    /// Answered 410: nothing is sent until a replay.
    pub disabled: bool,
    /// Failed attempts since the last success.
    pub failures: i64,
    pub next_attempt_ms: Option<i64>,
    pub last_error: Option<String>,
    pub last_success_ms: Option<i64>,
}

/// A subscriber as `GET /v1/subscribers`, `subscribers` and `status` show it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SubscriberView {
    pub name: String,
    pub url: String,
    pub cursor: i64,
    /// Ledger entries after the cursor (some may be passed over by the subscriber's filters).
    pub lag_entries: i64,
    /// Age of the oldest entry after the cursor (0 when none).
    pub lag_seconds: f64,
    pub state: SubscriberStatus,
    pub last_error: Option<String>,
    pub last_success_at: Option<Timestamp>,
    /// While retrying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<Timestamp>,
}

/// A console sign-in, as kept (times in Unix milliseconds).
#[derive(Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ConsoleSession {
    /// Hex SHA-256 of the cookie's session id.
    pub id_hash: String,
    /// The admin token's name.
    pub actor: String,
    /// Hex SHA-256 of the admin token.
    pub token_hash: String,
    /// The form token of the session.
    pub csrf: String,
    pub created_ms: i64,
    pub seen_ms: i64,
    pub expires_ms: i64,
}

impl std::fmt::Debug for ConsoleSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleSession")
            .field("actor", &self.actor)
            .field("csrf", &"[redacted]")
            .field("created_ms", &self.created_ms)
            .field("seen_ms", &self.seen_ms)
            .field("expires_ms", &self.expires_ms)
            .finish_non_exhaustive()
    }
}
