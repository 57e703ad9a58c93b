//! The storage layer: every statement the apply path runs, a folder per backend. Each
//! backend writes its statements for its own engine (SQLite: multi-row VALUES and
//! `json_each`, one hand-over to its thread per statement; PostgreSQL: arrays, `unnest`,
//! `ON CONFLICT`, row and advisory locks), behind one trait the apply path is written
//! against.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use chrono::{DateTime, Utc};

use crate::model::Lead;
use crate::model::{
    ConsentObservation, ConsentStates, Holders, PushedChange, Rank, Source, StatusObservation,
};

/// Opening the configured database, and the embedded migrations of each backend.
mod open;
pub use open::{
    DbError, MIGRATOR, POSTGRES_MIGRATOR, connection, migrate, migrate_postgres,
    migrations_applied, open, pool, postgres_connection,
};

/// How values cross the storage boundary as text (JSON, times, rowids).
pub mod codec;

/// `migrate --from`: a SQLite database copied into PostgreSQL.
pub mod copy;

/// The SQLite backend.
pub mod sqlite;

/// The PostgreSQL backend.
pub mod postgres;

/// Lease and heartbeat statements, one text for both backends.
mod leases;

/// Outbox statements with one text for both backends.
mod outbox;

/// Subscribers' delivery state, one text for both backends.
mod console;
mod subscribers;

/// Write transactions and the dedicated write connection, whichever the backend.
mod tx;
pub use tx::{IngestStore, Tx};

/// One trait per concern, implemented by both backends and dispatched by [`Pool`].
mod concerns;
pub use concerns::{
    ChainStore, EvidenceStore, ExportStore, LeaseStore, OutboxCounts, OutboxStore, PassStore,
    PushStore, ReadStore, RetentionStore, SessionStore, StateStore, SubscriberStore,
};

/// What the demo's live view reads, beside `status`.
mod demo;
pub use demo::{DemoStore, MirroredConsent, PassTotals};

/// A pool of connections to the configured database, whichever the backend: chosen once,
/// when the database is opened ([`open`]); every concern's trait is implemented for it by
/// dispatching to the backend's pool.
#[derive(Debug, Clone)]
#[enum_dispatch::enum_dispatch(
    ChainStore,
    SessionStore,
    EvidenceStore,
    ExportStore,
    LeaseStore,
    OutboxStore,
    OutboxCounts,
    PassStore,
    PushStore,
    ReadStore,
    RetentionStore,
    StateStore,
    SubscriberStore,
    DemoStore
)]
pub enum Pool {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl From<&sqlx::SqlitePool> for Pool {
    fn from(pool: &sqlx::SqlitePool) -> Self {
        Pool::Sqlite(pool.clone())
    }
}

impl From<&sqlx::PgPool> for Pool {
    fn from(pool: &sqlx::PgPool) -> Self {
        Pool::Postgres(pool.clone())
    }
}

/// So that functions taking `impl Into<Pool>` take a borrowed `Pool` too.
impl From<&Pool> for Pool {
    fn from(pool: &Pool) -> Self {
        pool.clone()
    }
}

impl Pool {
    /// The `daemon_state` value of `key`.
    pub async fn state(&self, key: &str) -> Result<Option<String>, sqlx::Error> {
        self.state_value(key).await
    }

    /// Sets the `daemon_state` value of `key`.
    pub async fn set_state(&self, key: &str, value: &str) -> Result<(), sqlx::Error> {
        let now = Utc::now();
        self.put_state(key, value, now).await
    }

    /// Closes every connection of the pool, waiting for those in use.
    pub async fn close(&self) {
        match self {
            Pool::Sqlite(pool) => pool.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }

    /// Records the latest failure for `status`, from a loop that is already handling it:
    /// when even the record cannot be written (often the same broken database), that is
    /// logged with its cause and the loop goes on.
    pub async fn note_error(&self, message: &str) {
        if let Err(error) = self.set_state(LAST_ERROR, message).await {
            tracing::error!(%error, last_error = message, "cannot record the last error for `status`");
        }
    }
}

/// A connection of its own, for a task that runs many write transactions in a row (the
/// outbox writer, a leads pass).
pub enum Connection {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl Connection {
    /// Closes the connection, logging (not raising) a failure: the work on it is done.
    pub async fn close(self) {
        use sqlx::Connection as _;
        let closed = match self {
            Self::Sqlite(conn) => conn.close().await,
            Self::Postgres(conn) => conn.close().await,
        };
        if let Err(error) = closed {
            tracing::debug!(%error, "closing a dedicated connection");
        }
    }
}

/// Where a leads pass stands after writing one page.
#[derive(Debug, Clone, Copy)]
pub struct PageCheckpoint<'a> {
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
    e: &NewEntry<'a>,
    seq: i64,
    occurred_at: &'a str,
    recorded_at: &'a str,
) -> crate::model::chain::Fields<'a> {
    let o = e.observation;
    crate::model::chain::Fields {
        seq,
        organization_id: &o.organization_id,
        lead_id: e.lead_id,
        phone_number: &o.phone_number,
        opted_out: o.opted_out,
        occurred_at,
        recorded_at,
        source: o.source.as_str(),
        event_ref: &o.event_ref,
        superseded: e.superseded,
        tag_id: o.tag_id.as_deref(),
        reason: o.reason.as_deref(),
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
    /// RFC 3339, as hashed.
    pub occurred_at: String,
    pub hash: String,
    /// The kept evidence, as JSON.
    pub evidence: Option<String>,
}

/// Chains the entries `new` (indices into `entries`) after the entry `head_seq` whose hash
/// is `head_hash`, in order: each entry's hash covers its fields and the hash before it.
pub(crate) fn chain_after<'e, 'a>(
    entries: &'e [NewEntry<'a>],
    new: &[usize],
    head_seq: i64,
    head_hash: String,
    recorded_at: &str,
) -> Result<Vec<Chained<'e, 'a>>, sqlx::Error> {
    let mut prev = head_hash;
    let mut chained = Vec::with_capacity(new.len());
    for (seq, &i) in (head_seq + 1..).zip(new) {
        let entry = &entries[i];
        let occurred_at = codec::timestamp(entry.observation.occurred_at);
        prev = entry_fields(entry, seq, &occurred_at, recorded_at).hash_after(&prev);
        let evidence = entry
            .observation
            .evidence
            .as_ref()
            .map(codec::json_param)
            .transpose()?;
        chained.push(Chained {
            entry,
            seq,
            occurred_at,
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
    pub source: Source,
    /// The ledger entry that sets it.
    pub seq: i64,
    /// The pair had a state stored before this transaction.
    pub stored: bool,
}

/// The writes of the apply path, inside a transaction the caller began and commits. Every
/// method takes a whole batch.
pub trait ApplyTx: Send {
    /// Keeps every other writer of these numbers waiting until this transaction ends, so
    /// what it reads of them (states, holders, pushes) stays true until it commits. To be
    /// called once per transaction, before the reads (locks are taken in one order).
    fn lock_numbers(
        &mut self,
        phones: &[&str],
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// The (organization, number) of each of `lead_ids` the mirror knows.
    fn locate_leads(
        &mut self,
        lead_ids: &[&str],
    ) -> impl Future<Output = Result<HashMap<String, (String, String)>, sqlx::Error>> + Send;

    /// The organizations (and lead ids) holding each of `phones`. Every mirrored lead has
    /// the consent record of its (organization, number), so consent records are enough.
    fn holders_of(
        &mut self,
        phones: &[&str],
    ) -> impl Future<Output = Result<Holders, sqlx::Error>> + Send;

    /// Attempted local changes of these (organization, number) pairs whose echo has not
    /// come back yet, oldest first.
    fn pushed_changes(
        &mut self,
        keys: &[(&str, &str)],
    ) -> impl Future<Output = Result<Vec<PushedChange>, sqlx::Error>> + Send;

    /// Marks the local change `push_seq` as echoed by `event_ref`.
    fn mark_echo(
        &mut self,
        push_seq: i64,
        event_ref: &str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// The stored state of each known pair of `keys`.
    fn consent_states(
        &mut self,
        keys: &[(&str, &str)],
    ) -> impl Future<Output = Result<ConsentStates, sqlx::Error>> + Send;

    /// Appends the entries not in the ledger yet, in order: the seq of each new one, `None`
    /// for an event already recorded (or recorded earlier in `entries`).
    fn append_ledger(
        &mut self,
        entries: &[NewEntry<'_>],
        recorded_at: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<Option<i64>>, sqlx::Error>> + Send;

    /// Sets each state where it outranks the stored one; at most one per pair.
    fn write_states(
        &mut self,
        states: &[StateWrite<'_>],
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// Inserts or updates mirrored leads, each only if its observation is not older than
    /// what the mirror holds and its fields changed (an unchanged lead is not rewritten on
    /// every scan). Returns how many rows were written.
    fn upsert_leads(
        &mut self,
        leads: &[(&Lead, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Applies status observations: a terminal status beats a non-terminal one whatever
    /// the times; otherwise the later wins (ties broken by status text, then error code, so
    /// the outcome never depends on arrival order). Returns how many changed a stored row.
    fn apply_statuses(
        &mut self,
        observations: &[StatusObservation<'_>],
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Marks outbox rows applied, and others quarantined with their reason. (PostgreSQL's
    /// worker claims its rows marked applied already: there only the quarantined change.)
    fn settle_outbox(
        &mut self,
        applied: &[i64],
        quarantined: &[(i64, String)],
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// Queues the local change recorded as `seq` for the service, superseding older changes
    /// of the pair never attempted.
    fn queue_push(
        &mut self,
        seq: i64,
        change: &ConsentObservation,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// The next `limit` pending outbox rows, in id order, taken for this transaction (on
    /// PostgreSQL marked applied at `now` in the same statement, so that workers of every
    /// replica take disjoint batches; the transaction settles those it quarantines).
    fn claim_pending(
        &mut self,
        limit: i64,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<crate::model::StoredDelivery>, sqlx::Error>> + Send;

    /// In a leads page's transaction: moves the checkpoint to the next page, or, after the
    /// last page, records the organization's finished scan and drops its checkpoint.
    fn page_written(
        &mut self,
        page: PageCheckpoint<'_>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
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
    pub fn of(lead: &Lead) -> Result<Self, sqlx::Error> {
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
