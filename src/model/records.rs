//! The records the read side gives out, as the contract names them (consent records,
//! ledger entries, stored events, the status), and what the store keeps of subscribers and
//! console sessions.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{AccountId, ChainHead, OutboxState, PushState, Source, SubscriberStatus, Timestamp};

/// Current consent of a number in one organization (the contract's consent record).
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsentRecord {
    pub organization_id: String,
    pub lead_id: Option<String>,
    pub phone_number: String,
    pub opted_out: bool,
    pub changed_at: Timestamp,
    pub source: Source,
    /// The account of the service it is of.
    pub account_id: String,
}

/// One ledger entry (the contract's ledger entry).
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow, utoipa::ToSchema)]
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
    /// The account of the service it is of.
    #[schema(value_type = String)]
    pub account_id: AccountId,
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
    /// The headers kept: a JSON array of `[name, value]` as received, in order; a JSON
    /// object (one value per name) for deliveries stored before the order was kept.
    pub headers: String,
    pub body: Vec<u8>,
    pub secret_index: i64,
    /// The place in the `headers` array of the signature header's value that verified.
    pub verified_header: Option<i64>,
    /// The account whose path it arrived on.
    pub account_id: String,
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
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
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
    /// The last check of the account's webhook registrations; `None` before the first.
    pub registration_check: Option<RegistrationCheck>,
}

/// The result of the last `webhooks check` (`webhooks register` ends with one): whether the
/// account holds the two registrations this daemon needs at its URL, each passing a mock
/// event; if not, what is missing or failing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationCheck {
    pub checked_at: Timestamp,
    pub ok: bool,
    /// Each problem in a sentence (empty when `ok`).
    pub problems: Vec<String>,
    /// The URL the registrations were checked for.
    pub target_url: String,
}

/// The last reconciliation of one organization.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrganizationPass {
    pub organization_id: String,
    pub finished_at: Timestamp,
    pub leads_scanned: i64,
    pub repaired: i64,
    pub error: Option<String>,
}

/// The most recent failure the daemon recorded.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
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
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct Backlog {
    /// Outbox rows not applied yet.
    pub pending: i64,
    /// When the oldest of them was received.
    pub oldest_pending_at: Option<DateTime<Utc>>,
    pub quarantined: i64,
    pub pushes_pending: i64,
}

/// Pushes by state, for `status`.
#[derive(Debug, Clone, Default, Serialize, sqlx::FromRow, utoipa::ToSchema)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
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
    /// A warehouse refilled from its first entry (its table found missing or behind what
    /// was sent): refilling until the cursor passes this seq again.
    pub refill_until: Option<i64>,
    /// Why it is refilled.
    pub refill_reason: Option<String>,
}

impl SubscriberState {
    /// Why it is being refilled, while it is.
    pub fn refilling(&self) -> Option<&str> {
        self.refill_until
            .filter(|until| self.cursor < *until)
            .and(self.refill_reason.as_deref())
    }
}

/// A subscriber as `GET /v1/subscribers`, `subscribers` and `status` show it.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Subscriber)]
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

/// Reconciliation passes recorded, and the consent differences they repaired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassTotals {
    pub passes: i64,
    pub repaired: i64,
}

/// One row of the `consent_current` view: the consent the mirror holds for a number in an
/// organization (and the lead, when one is known).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MirroredConsent {
    pub organization_id: String,
    pub lead_id: Option<String>,
    pub phone_number: String,
    pub opted_out: bool,
    pub account_id: String,
}
