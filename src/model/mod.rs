//! The records the daemon keeps, typed once: what the apply path decides and the storage
//! layer writes, whichever the backend.

use std::collections::HashMap;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// The account a record is of, and the scope of a read.
mod account;
pub use account::{AccountId, InvalidAccount, Scope, well_formed_name};
/// The wait between failed attempts, one rule for the client, the pusher and the senders.
pub mod backoff;
/// Business days and the legal deadline of an opt-out counted in them.
pub mod business_days;
/// Callers: who a revocation binds.
pub mod caller;
/// The hash chain over the ledger: the canonical encoding of an entry and the walk.
pub mod chain;
/// The lead and the message status as the mirror keeps them.
mod mirror;
/// What destinations keep per entry, and how they are shown.
mod outcomes;
/// Phone numbers normalized to E.164, one function for every way a number comes in.
pub mod phone;
/// What a source reads or is posted, as records, and the `event_ref` of what it records.
pub mod read;
/// The records the read side gives out.
mod records;
/// Replies put to a person, and the decisions made of them.
pub mod review;
/// What a person's reply to a text says about consent: the FCC's revocation words, Twilio's.
pub mod revocation;
pub use outcomes::{
    DestinationView, Ending, EntryOutcome, EntryProgress, OutcomeCounts, OutcomeRecord,
    SourceCounts, Told,
};
/// Someone else's text made safe for a terminal, a log, an error message or a spreadsheet.
pub mod text;
/// What another system says, believed only so far: the time rule and the region numbers
/// are read in.
pub mod trust;
/// Times and closed sets of words, typed across the storage boundary.
pub mod typed;

pub mod warehouse;

pub use chain::ChainHead;
pub use mirror::{Lead, MessageStatus, NON_TERMINAL, RECEIPT_WINDOW, is_terminal};
pub use records::{
    Backlog, ConsentRecord, ConsoleSession, DuePush, KeptDelivery, LastError, LedgerEntry,
    MirroredConsent, OrganizationPass, PassTotals, PushCounts, RegistrationCheck, ReplicaSeen,
    Status, StoredEntry, StoredEvent, SubscriberState, SubscriberView,
};
pub use typed::{
    DestinationStatus, OutboxState, OutcomeKind, PushState, Source, SubscriberStatus, Timestamp,
};

/// Longest `reason` kept with a consent change, in characters: the console, the admin API,
/// the CLI and imports refuse a longer one (the ledger is never pruned).
pub const MAX_REASON_CHARS: usize = 500;
/// Longest organization or tag id taken with a local change, in characters.
pub const MAX_ID_CHARS: usize = 200;
/// The rule of an id a user gives (length, no control character): [`text::id_problem`].
pub use text::id_problem;

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

/// The evidence kept with a `reconcile`, `import` or `local` ledger entry, as JSON in its
/// `evidence` column. (Untagged: a variant whose fields are a subset of another's comes
/// after it.)
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(untagged, rename_all_fields = "camelCase")]
pub enum KeptEvidence {
    /// When the lead was requested from the service, and the lead as it came back.
    Reconcile {
        requested_at: Timestamp,
        lead: serde_json::Value,
        /// The suppression's push, answered by the service, that an opt-in found there
        /// since follows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        follows_push: Option<i64>,
    },
    /// The imported list the number came from: its name as given, the SHA-256 of its exact
    /// bytes, the line, who imported it and why.
    Import {
        file: String,
        sha256: String,
        line: u64,
        actor: String,
        reason: Option<String>,
    },
    /// An opt-out read back by a `[[source]]`: `actor` is the source's name, `record` what
    /// makes it one record there (recorded once), `standsOn` what the system gave (VAN: the
    /// job, the file's SHA-256, the row and the row itself; Action Network: the person's
    /// identifier, `modified_date` and the person as read).
    Read {
        actor: String,
        record: String,
        stands_on: serde_json::Value,
    },
    /// An opt-out shared from another account: `actor` is `shared`, `follows` the ledger
    /// entry it follows, of the account `account_id`.
    Shared {
        actor: String,
        follows: i64,
        account_id: String,
        /// The caller whose member the entry followed was, and the rule that binds the
        /// others (absent when shared across accounts).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        caller: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
    },
    /// A lead that appeared with a number opted out before it: `actor` is `suppression`,
    /// `suppressed_by` the ledger entry that opted the number out.
    Suppressed { actor: String, suppressed_by: i64 },
    /// Who made a local change: an admin token's name, or `cli:USER`.
    Local { actor: String },
}

/// The account a configuration without `[[account]]` describes, and that of every row
/// recorded before the ledger held accounts.
pub const DEFAULT_ACCOUNT: &str = "default";

/// An opt-out to share with the other accounts: its entry, account, number and time.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct OptOutToShare {
    pub seq: i64,
    pub account_id: AccountId,
    pub organization_id: String,
    pub phone_number: String,
    pub occurred_at: Timestamp,
    /// Not an act of the person's but what follows from one recorded already: the
    /// service's echo of a change pushed from here, or a lead kept opted out by a
    /// suppression. Passed, not shared: what it follows was shared, or is a shared copy.
    pub derived: bool,
}

/// The actor of the entries sharing across accounts records.
pub const SHARED_ACTOR: &str = "shared";

/// The actor of the entries suppression records.
pub const SUPPRESSION_ACTOR: &str = "suppression";

/// The organization of an account-wide entry: an `--account` import records each number
/// there once, and that entry is what suppresses it.
pub const ACCOUNT_WIDE: &str = "*";

/// An opt-out entry as the compliance report reads it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OptOutRow {
    pub seq: i64,
    pub organization_id: String,
    pub lead_id: Option<String>,
    pub phone_number: String,
    pub occurred_at: Timestamp,
    pub recorded_at: Timestamp,
    pub source: Source,
    /// Its push to the service, for an opt-out made here.
    pub push_state: Option<PushState>,
    pub push_finished_at: Option<Timestamp>,
    /// The first opt-in of its (organization, number) after it.
    pub opted_in_at: Option<Timestamp>,
    /// The lead the mirror holds for its (organization, number).
    pub state_lead_id: Option<String>,
    /// It did not take effect (a newer change of its pair was already in place).
    pub superseded: bool,
    pub account_id: AccountId,
    /// `shared:SEQ` for a copy of another account's opt-out.
    pub event_ref: String,
}

/// A copy of an opt-out shared with another account, as the compliance report reads it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SharedCopy {
    /// `shared:SEQ`: the opt-out it copies.
    pub event_ref: String,
    pub account_id: AccountId,
    pub organization_id: String,
    pub recorded_at: Timestamp,
    /// Its push to that account's service, for a mirrored lead.
    pub push_state: Option<PushState>,
    pub push_finished_at: Option<Timestamp>,
}

impl SharedCopy {
    /// The entry it copies.
    pub fn follows(&self) -> Option<i64> {
        self.event_ref.strip_prefix("shared:")?.parse().ok()
    }
}

impl OptOutRow {
    /// The leads its messages may have gone to: its own, and the mirror's for its pair.
    pub fn leads(&self) -> impl Iterator<Item = &str> {
        let own = self.lead_id.as_deref();
        let held = self
            .state_lead_id
            .as_deref()
            .filter(|held| Some(*held) != own);
        own.into_iter().chain(held)
    }
}

/// A mirrored message of a lead.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LeadMessage {
    pub account_id: String,
    pub lead_id: String,
    pub id: String,
    pub status: String,
    /// As the service gave it.
    pub created_at: Option<String>,
}

/// A request a subscriber acknowledged (2xx) that carried opt-outs: entries
/// `first_seq..=last_seq` of its filter were in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct AckSpan {
    pub first_seq: i64,
    pub last_seq: i64,
    pub acked_at: Timestamp,
}

/// A number opted out for the whole account: by the ledger entry `seq`, from `since` (its
/// event time) until an account-wide opt-in later than that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Suppression {
    pub seq: i64,
    pub since: Timestamp,
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

    /// The rank of `o`, compared at the precision its time shares with the others. The
    /// service writes its event times in whole seconds, while a pass, a local change or an
    /// import is timed to the millisecond: an opt-out announced at 12:00:00 may have been
    /// given at any instant of that second, so it outranks whatever else happened in it (it
    /// ranks at the second's last millisecond), and an opt-in announced so ranks at its
    /// first, below an opt-out of that second. Between two times of the same precision
    /// nothing changes: the later wins, and at the same instant the opt-out. The same holds
    /// for what a source reads back from a system that writes whole seconds (Action
    /// Network's `modified_date`; VAN's change time when it has no fraction).
    pub fn observed(o: &ConsentObservation) -> Self {
        let whole_second =
            o.source.in_whole_seconds() && o.occurred_at.timestamp_subsec_nanos() == 0;
        if whole_second && o.opted_out {
            let end = o.occurred_at + chrono::TimeDelta::milliseconds(999);
            return Self::of(end, true);
        }
        Self::of(o.occurred_at, o.opted_out)
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
    /// The ledger entry that set it (`None` for a state decided earlier in the same batch).
    pub seq: Option<i64>,
    /// Where that entry came from.
    pub source: Source,
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
    /// The earliest time, since the first attempt, of a change of the pair the other way
    /// (recorded, or earlier in the same batch): a webhook of the push's direction that is
    /// later than it follows that change, so it is the person's new act, not the echo.
    pub contradicted_at: Option<DateTime<Utc>>,
}

/// An outbox row as stored: the delivery's bytes and when they arrived.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredDelivery {
    pub id: i64,
    pub account_id: String,
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
    /// The account whose path it arrived on: a duplicate is one of the same account.
    pub account: String,
    pub dedup_key: String,
    pub received_at: DateTime<Utc>,
    pub body: Bytes,
    /// JSON array of `[name, value]`: every header kept with the delivery, as received and
    /// in order.
    pub headers: String,
    pub secret_index: usize,
    /// The place in `headers` of the signature header's value that verified (`None` when
    /// that header is not kept).
    pub verified_header: Option<usize>,
}

/// A delivery that failed verification, kept for diagnosis.
#[derive(Debug, Clone)]
pub struct RejectedDelivery {
    /// The account whose path it arrived on.
    pub account: String,
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
    /// The account whose path it arrived on (`None` for one kept before accounts existed).
    pub account_id: Option<String>,
}
