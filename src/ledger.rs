//! The read side of the consent ledger and the mirror: the JSON records of the contract,
//! shared by the CLI and the admin API, the same on either backend (the statements are in
//! `store::{sqlite, postgres}::read`). Only reads.

use serde::Serialize;
use serde_json::Value;

use crate::store::{Pool, postgres, sqlite};

/// Current consent of a number in one organization (the contract's consent record).
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct ConsentRecord {
    pub organization_id: String,
    pub lead_id: Option<String>,
    pub phone_number: String,
    pub opted_out: bool,
    pub changed_at: String,
    pub source: String,
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
    pub occurred_at: String,
    pub recorded_at: String,
    pub source: String,
    pub event_ref: String,
    pub superseded: bool,
    /// Local changes only: the push to the service (`pending`, `sent`, `failed`,
    /// `superseded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push: Option<String>,
    /// Returning webhooks only: the seq of the local change this entry echoes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub echo_of: Option<i64>,
}

/// `{"items": [...]}`, the list shape of the contract.
#[derive(Debug, Serialize)]
pub struct Items<T> {
    pub items: Vec<T>,
}

/// Current consent of `phone` in every organization, or in one.
pub async fn current(
    pool: impl Into<Pool>,
    phone: &str,
    organization: Option<&str>,
) -> Result<Vec<ConsentRecord>, sqlx::Error> {
    match &pool.into() {
        Pool::Sqlite(pool) => sqlite::read::current(pool, phone, organization).await,
        Pool::Postgres(pool) => postgres::read::current(pool, phone, organization).await,
    }
}

/// Current consent of each of `phones` (without duplicates), in their order, organizations
/// sorted; in every organization or in one. Numbers without a record are left out.
pub async fn lookup(
    pool: impl Into<Pool>,
    phones: &[&str],
    organization: Option<&str>,
) -> Result<Vec<ConsentRecord>, sqlx::Error> {
    match &pool.into() {
        Pool::Sqlite(pool) => sqlite::read::lookup(pool, phones, organization).await,
        Pool::Postgres(pool) => postgres::read::lookup(pool, phones, organization).await,
    }
}

/// Every ledger entry of `phone`, oldest first.
pub async fn history(
    pool: impl Into<Pool>,
    phone: &str,
    organization: Option<&str>,
) -> Result<Vec<LedgerEntry>, sqlx::Error> {
    match &pool.into() {
        Pool::Sqlite(pool) => sqlite::read::history(pool, phone, organization).await,
        Pool::Postgres(pool) => postgres::read::history(pool, phone, organization).await,
    }
}

/// Ledger entries after `after`, in `seq` order: the change feed. On either backend seqs
/// become visible in seq order, so reading `seq > after` never skips an entry that commits
/// later with a smaller seq.
pub async fn changes(
    pool: impl Into<Pool>,
    after: i64,
    limit: i64,
) -> Result<Vec<LedgerEntry>, sqlx::Error> {
    match &pool.into() {
        Pool::Sqlite(pool) => sqlite::read::changes(pool, after, limit).await,
        Pool::Postgres(pool) => postgres::read::changes(pool, after, limit).await,
    }
}

/// A stored delivery, as `events` lists it.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct StoredEvent {
    pub id: i64,
    pub dedup_key: String,
    pub received_at: String,
    /// The envelope's `type` (or `eventType`), when the body has one.
    pub event_type: Option<String>,
    pub state: String,
    pub attempts: i64,
    pub last_error: Option<String>,
}

/// The most recent stored deliveries, newest first.
pub async fn events(
    pool: impl Into<Pool>,
    quarantined_only: bool,
    limit: i64,
) -> Result<Vec<StoredEvent>, sqlx::Error> {
    match &pool.into() {
        Pool::Sqlite(pool) => sqlite::read::events(pool, quarantined_only, limit).await,
        Pool::Postgres(pool) => postgres::read::events(pool, quarantined_only, limit).await,
    }
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
    pub oldest_pending_at: Option<String>,
    pub last_error: Option<LastError>,
    /// The last completed leads pass of each organization.
    pub reconciliation: Vec<OrganizationPass>,
    /// Organizations whose leads pass was interrupted and resumes from a cursor.
    pub reconciliation_in_progress: Vec<String>,
    /// Local consent changes and their push to the service.
    pub pushes: crate::pusher::PushCounts,
    /// The processes serving this database, heard from in the last minute, and the leader.
    pub replicas: Vec<crate::replica::ReplicaSeen>,
}

/// The last reconciliation of one organization.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct OrganizationPass {
    pub organization_id: String,
    pub finished_at: String,
    pub leads_scanned: i64,
    pub repaired: i64,
    pub error: Option<String>,
}

/// The most recent failure the daemon recorded.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[serde(rename_all = "camelCase")]
pub struct LastError {
    pub at: String,
    pub message: String,
}

/// The daemon's state at a glance: counts, the last error, reconciliation, pushes and
/// replicas.
pub async fn status(pool: impl Into<Pool>) -> Result<Status, sqlx::Error> {
    let pool = pool.into();
    let mut status = match &pool {
        Pool::Sqlite(pool) => sqlite::read::status(pool).await?,
        Pool::Postgres(pool) => postgres::read::status(pool).await?,
    };
    status.replicas = crate::replica::seen(pool).await?;
    Ok(status)
}

/// The mirrored lead `id` as the v3 Lead resource (its `globalOptedOut` from the consent
/// state of its number), with nulls.
pub async fn lead(pool: impl Into<Pool>, id: &str) -> Result<Option<Value>, sqlx::Error> {
    match &pool.into() {
        Pool::Sqlite(pool) => sqlite::read::lead(pool, id).await,
        Pool::Postgres(pool) => postgres::read::lead(pool, id).await,
    }
}

/// The mirrored leads of `phone` as v3 Lead resources, in every organization or in one,
/// by organization and id.
pub async fn leads(
    pool: impl Into<Pool>,
    phone: &str,
    organization: Option<&str>,
) -> Result<Vec<Value>, sqlx::Error> {
    match &pool.into() {
        Pool::Sqlite(pool) => sqlite::read::leads(pool, phone, organization).await,
        Pool::Postgres(pool) => postgres::read::leads(pool, phone, organization).await,
    }
}

/// The tracked message `id`, with nulls.
pub async fn message(pool: impl Into<Pool>, id: &str) -> Result<Option<Value>, sqlx::Error> {
    match &pool.into() {
        Pool::Sqlite(pool) => sqlite::read::message(pool, id).await,
        Pool::Postgres(pool) => postgres::read::message(pool, id).await,
    }
}
