//! The read side on SQLite: the records of `ledger`, `export` and the admin API. Times are
//! stored as they are shown (RFC 3339 text), booleans as 0/1, JSON as text.

use crate::store::ExportStore;
use crate::store::ReadStore;
use crate::store::codec;
use futures::Stream;
use futures::StreamExt as _;
use futures::TryStreamExt as _;
use futures::stream::BoxStream;
use serde_json::Value;
use sqlx::SqlitePool;

use crate::model::{ConsentRecord, LedgerEntry, PushCounts, Status, StoredEvent, Timestamp};

use crate::store::read::ledger_columns;

impl ReadStore for SqlitePool {
    async fn current(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<ConsentRecord>, crate::store::Error> {
        Ok(sqlx::query_as(
            "SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source
         FROM consent_current WHERE phone_number = ?1 AND (?2 IS NULL OR organization_id = ?2)
         ORDER BY organization_id",
        )
        .bind(phone)
        .bind(organization)
        .fetch_all(self)
        .await?)
    }

    async fn lookup(
        &self,
        phones: &[&str],
        organization: Option<&str>,
    ) -> Result<Vec<ConsentRecord>, crate::store::Error> {
        Ok(sqlx::query_as(
        "SELECT s.organization_id, s.lead_id, s.phone_number, s.opted_out, s.changed_at, s.source
         FROM json_each(?1) AS k JOIN consent_state AS s ON s.phone_number = k.value
         WHERE ?2 IS NULL OR s.organization_id = ?2
         ORDER BY k.key, s.organization_id",
    )
    .bind(codec::json_param(phones)?)
    .bind(organization)
    .fetch_all(self)
    .await?)
    }

    crate::store::read::shared!();

    async fn events(
        &self,
        quarantined_only: bool,
        limit: i64,
    ) -> Result<Vec<StoredEvent>, crate::store::Error> {
        Ok(sqlx::query_as(
        "SELECT id, dedup_key, received_at,
                CASE WHEN json_valid(CAST(body AS TEXT))
                     THEN COALESCE(json_extract(CAST(body AS TEXT), '$.type'),
                                   json_extract(CAST(body AS TEXT), '$.eventType')) END AS event_type,
                state, attempts, last_error
         FROM outbox WHERE (?1 = 0 OR state = 'quarantined') ORDER BY id DESC LIMIT ?2",
    )
    .bind(quarantined_only)
    .bind(limit)
    .fetch_all(self)
    .await?)
    }

    async fn status(&self) -> Result<Status, crate::store::Error> {
        let (backlog, quarantined, applied, oldest_pending_at): (i64, i64, i64, Option<Timestamp>) =
        sqlx::query_as(
            "SELECT COALESCE(SUM(state = 'pending'), 0), COALESCE(SUM(state = 'quarantined'), 0),
                COALESCE(SUM(state = 'applied'), 0),
                (SELECT MIN(received_at) FROM outbox WHERE state = 'pending')
         FROM outbox",
        )
        .fetch_one(self)
        .await?;
        let (ledger_entries, leads, messages, open_messages): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COALESCE(MAX(seq), 0) FROM ledger), (SELECT COUNT(*) FROM leads),
                (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM messages WHERE terminal = 0)",
    )
    .fetch_one(self)
    .await?;
        let last_error = sqlx::query_as(
            "SELECT updated_at AS at, value AS message FROM daemon_state WHERE key = 'last_error'",
        )
        .fetch_optional(self)
        .await?;
        let reconciliation = sqlx::query_as(
            "SELECT organization_id, finished_at, leads_scanned, repaired, error
         FROM reconcile_organizations ORDER BY organization_id",
        )
        .fetch_all(self)
        .await?;
        let reconciliation_in_progress = sqlx::query_scalar(
            "SELECT organization_id FROM reconcile_checkpoints ORDER BY organization_id",
        )
        .fetch_all(self)
        .await?;
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
            pushes: self.push_counts().await?,
            replicas: Vec::new(),
            chain_head: crate::model::chain::ChainHead::empty(),
            subscribers: Vec::new(),
            registration_check: None,
        })
    }

    async fn push_counts(&self) -> Result<PushCounts, crate::store::Error> {
        Ok(sqlx::query_as(
        "SELECT COALESCE(SUM(state = 'pending'), 0) AS pending, COALESCE(SUM(state = 'sent'), 0) AS sent,
                COALESCE(SUM(state = 'failed'), 0) AS failed,
                COALESCE(SUM(state = 'pending' AND last_error IS NOT NULL), 0) AS retrying,
                (SELECT MIN(created_at) FROM pushes WHERE state = 'pending') AS oldest_pending_at,
                (SELECT last_error FROM pushes WHERE last_error IS NOT NULL
                 ORDER BY last_attempt_at DESC LIMIT 1) AS last_push_error
         FROM pushes",
    )
    .fetch_one(self)
    .await?)
    }

    async fn lead(&self, id: &str) -> Result<Option<Value>, crate::store::Error> {
        let found: Option<String> =
            sqlx::query_scalar(&format!("SELECT {LEAD_JSON} WHERE l.id = ?"))
                .bind(id)
                .fetch_optional(self)
                .await?;
        Ok(found.as_deref().map(codec::json_decoded).transpose()?)
    }

    async fn leads(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<Value>, crate::store::Error> {
        let rows: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT {LEAD_JSON} WHERE l.phone_number = ?1 AND (?2 IS NULL OR l.organization_id = ?2)
         ORDER BY l.organization_id, l.id"
    ))
        .bind(phone)
        .bind(organization)
        .fetch_all(self)
        .await?;
        Ok(rows
            .iter()
            .map(|text| codec::json_decoded(text))
            .collect::<Result<_, sqlx::Error>>()?)
    }

    async fn message(&self, id: &str) -> Result<Option<Value>, crate::store::Error> {
        let found: Option<String> = sqlx::query_scalar(
        "SELECT json_object('id', id, 'threadId', thread_id, 'status', status, 'type', type,
                'createdAt', created_at, 'errorCode', error_code, 'leadId', lead_id,
                'organizationId', organization_id, 'terminal', json(CASE WHEN terminal THEN 'true' ELSE 'false' END),
                'statusAt', status_at, 'source', source, 'updatedAt', updated_at)
         FROM messages WHERE id = ?",
    )
    .bind(id)
    .fetch_optional(self)
    .await?;
        Ok(found.as_deref().map(codec::json_decoded).transpose()?)
    }

    async fn deliveries_per_minute(
        &self,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<(String, i64)>, crate::store::Error> {
        Ok(sqlx::query_as(
            "SELECT substr(received_at, 1, 16) AS minute, COUNT(*) FROM outbox
         WHERE id > COALESCE((SELECT id FROM outbox WHERE received_at < ?1
                              ORDER BY id DESC LIMIT 1), 0)
           AND received_at >= ?1
         GROUP BY minute ORDER BY minute",
        )
        .bind(codec::timestamp(since))
        .fetch_all(self)
        .await?)
    }
}

/// `consent_state` rows set by a ledger entry after `since`, by organization and number.
fn export_consent_stream(
    pool: &SqlitePool,
    since: i64,
) -> impl Stream<Item = Result<ConsentRecord, crate::store::Error>> + Send + '_ {
    sqlx::query_as(
        "SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source
                       FROM consent_state WHERE seq > ? ORDER BY organization_id, phone_number",
    )
    .bind(since)
    .fetch(pool)
    .map_err(Into::into)
}

/// Ledger entries after `since`, in seq order.
fn export_ledger_stream(
    pool: &SqlitePool,
    since: i64,
) -> impl Stream<Item = Result<LedgerEntry, crate::store::Error>> + Send + '_ {
    sqlx::query_as(concat!(
        "SELECT ",
        ledger_columns!(),
        " FROM ledger WHERE seq > ? ORDER BY seq"
    ))
    .bind(since)
    .fetch(pool)
    .map_err(Into::into)
}

/// The v3 Lead resource, its `globalOptedOut` from the consent state of its number.
const LEAD_JSON: &str = "json_object('id', l.id, 'type', 'lead', 'phoneNumber', l.phone_number,
    'organizationId', l.organization_id, 'activeGroupIds', json(l.active_group_ids),
    'inactiveGroupIds', json(l.inactive_group_ids), 'customFields', json(l.custom_fields),
    'firstName', l.first_name, 'lastName', l.last_name, 'notes', l.notes, 'followUp', l.follow_up,
    'email', l.email, 'postalCode', l.postal_code, 'phoneNumberType', l.phone_number_type,
    'tagIds', json(l.tag_ids), 'globalOptedOut', json(CASE WHEN s.opted_out THEN 'true' ELSE 'false' END),
    'createdAt', l.created_at)
    FROM leads AS l LEFT JOIN consent_state AS s
    ON s.organization_id = l.organization_id AND s.phone_number = l.phone_number";

impl ExportStore for SqlitePool {
    fn export_consent(
        &self,
        since: i64,
    ) -> BoxStream<'_, Result<ConsentRecord, crate::store::Error>> {
        export_consent_stream(self, since).boxed()
    }

    fn export_ledger(&self, since: i64) -> BoxStream<'_, Result<LedgerEntry, crate::store::Error>> {
        export_ledger_stream(self, since).boxed()
    }
}
