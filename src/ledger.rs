//! The read side of the consent ledger and the mirror: the JSON records of the contract,
//! shared by the CLI and the admin API.

use serde::Serialize;
use sqlx::SqlitePool;

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
    pool: &SqlitePool,
    phone: &str,
    organization: Option<&str>,
) -> Result<Vec<ConsentRecord>, sqlx::Error> {
    sqlx::query_as(
        "SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source
         FROM consent_current WHERE phone_number = ?1 AND (?2 IS NULL OR organization_id = ?2)
         ORDER BY organization_id",
    )
    .bind(phone)
    .bind(organization)
    .fetch_all(pool)
    .await
}

/// Selected `FROM ledger`; `push` and `echo_of` come from the push queue.
pub const LEDGER_COLUMNS: &str = "seq, organization_id, lead_id, phone_number, opted_out, occurred_at, recorded_at, source, event_ref, superseded,
     (SELECT p.state FROM pushes AS p WHERE p.seq = ledger.seq) AS push,
     (SELECT p.seq FROM pushes AS p WHERE p.echo_ref = ledger.event_ref
        AND p.organization_id = ledger.organization_id AND p.phone_number = ledger.phone_number) AS echo_of";

/// Every ledger entry of `phone`, oldest first.
pub async fn history(
    pool: &SqlitePool,
    phone: &str,
    organization: Option<&str>,
) -> Result<Vec<LedgerEntry>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {LEDGER_COLUMNS} FROM ledger
         WHERE phone_number = ?1 AND (?2 IS NULL OR organization_id = ?2) ORDER BY seq"
    ))
    .bind(phone)
    .bind(organization)
    .fetch_all(pool)
    .await
}

/// Ledger entries after `after`, in `seq` order: the change feed.
pub async fn changes(
    pool: &SqlitePool,
    after: i64,
    limit: i64,
) -> Result<Vec<LedgerEntry>, sqlx::Error> {
    sqlx::query_as(&format!(
        "SELECT {LEDGER_COLUMNS} FROM ledger WHERE seq > ? ORDER BY seq LIMIT ?"
    ))
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await
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
    pool: &SqlitePool,
    quarantined_only: bool,
    limit: i64,
) -> Result<Vec<StoredEvent>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, dedup_key, received_at,
                CASE WHEN json_valid(CAST(body AS TEXT))
                     THEN COALESCE(json_extract(CAST(body AS TEXT), '$.type'),
                                   json_extract(CAST(body AS TEXT), '$.eventType')) END AS event_type,
                state, attempts, last_error
         FROM outbox WHERE (?1 = 0 OR state = 'quarantined') ORDER BY id DESC LIMIT ?2",
    )
    .bind(quarantined_only)
    .bind(limit)
    .fetch_all(pool)
    .await
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

pub async fn status(pool: &SqlitePool) -> Result<Status, sqlx::Error> {
    let (backlog, quarantined, applied, oldest_pending_at): (i64, i64, i64, Option<String>) =
        sqlx::query_as(
            "SELECT COALESCE(SUM(state = 'pending'), 0), COALESCE(SUM(state = 'quarantined'), 0),
                COALESCE(SUM(state = 'applied'), 0),
                (SELECT MIN(received_at) FROM outbox WHERE state = 'pending')
         FROM outbox",
        )
        .fetch_one(pool)
        .await?;
    let (ledger_entries, leads, messages, open_messages): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COALESCE(MAX(seq), 0) FROM ledger), (SELECT COUNT(*) FROM leads),
                (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM messages WHERE terminal = 0)",
    )
    .fetch_one(pool)
    .await?;
    let last_error = sqlx::query_as(
        "SELECT updated_at AS at, value AS message FROM daemon_state WHERE key = 'last_error'",
    )
    .fetch_optional(pool)
    .await?;
    let reconciliation = sqlx::query_as(
        "SELECT organization_id, finished_at, leads_scanned, repaired, error
         FROM reconcile_organizations ORDER BY organization_id",
    )
    .fetch_all(pool)
    .await?;
    let reconciliation_in_progress = sqlx::query_scalar(
        "SELECT organization_id FROM reconcile_checkpoints ORDER BY organization_id",
    )
    .fetch_all(pool)
    .await?;
    let replicas = crate::replica::seen(pool).await?;
    Ok(Status {
        backlog,
        quarantined,
        applied,
        ledger_entries,
        leads,
        messages,
        open_messages,
        oldest_pending_at,
        last_error,
        reconciliation,
        reconciliation_in_progress,
        pushes: crate::pusher::counts(pool).await?,
        replicas,
    })
}
