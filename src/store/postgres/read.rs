//! The read side on PostgreSQL: the records of `ledger`, `export` and the admin API, the
//! same as on SQLite for the same data. Times are `timestamptz`, decoded into the records'
//! [`Timestamp`](crate::model::Timestamp)s; text is sorted bytewise (`COLLATE "C"`), as SQLite sorts it,
//! whatever the database's collation.
//!
//! One file over 400 lines on purpose: each read mirrors SQLite's `read.rs` method by
//! method, so the two are compared side by side.

use crate::store::ExportStore;
use crate::store::ReadStore;
use crate::store::codec;
use chrono::{DateTime, Utc};
use futures::Stream;
use futures::StreamExt as _;
use futures::TryStreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::model::{
    ConsentRecord, LedgerEntry, OutboxState, PushCounts, Source, Status, StoredEvent, Timestamp,
};

use crate::store::read::ledger_columns;

impl ReadStore for PgPool {
    async fn current(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<ConsentRecord>, crate::store::Error> {
        Ok(sqlx::query_as(
            "SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source
         FROM consent_current WHERE phone_number = $1 AND ($2::text IS NULL OR organization_id = $2)
         ORDER BY organization_id COLLATE \"C\"",
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
         FROM unnest($1::text[]) WITH ORDINALITY AS k (phone_number, i)
         JOIN consent_state AS s ON s.phone_number = k.phone_number
         WHERE $2::text IS NULL OR s.organization_id = $2
         ORDER BY k.i, s.organization_id COLLATE \"C\"",
    )
    .bind(phones)
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
        let rows: Vec<EventRow> = sqlx::query_as(
        "SELECT id, dedup_key, received_at, body, state, attempts::BIGINT AS attempts, last_error
         FROM outbox WHERE (NOT $1 OR state = 'quarantined') ORDER BY id DESC LIMIT $2",
    )
    .bind(quarantined_only)
    .bind(limit)
    .fetch_all(self)
    .await?;
        Ok(rows
            .into_iter()
            .map(|row| StoredEvent {
                event_type: event_type(&row.body),
                id: row.id,
                dedup_key: row.dedup_key,
                received_at: row.received_at,
                state: row.state,
                attempts: row.attempts,
                last_error: row.last_error,
            })
            .collect())
    }

    async fn status(&self) -> Result<Status, crate::store::Error> {
        let (backlog, quarantined, applied, oldest_pending_at): (i64, i64, i64, Option<Timestamp>) =
            sqlx::query_as(
                "SELECT COUNT(*) FILTER (WHERE state = 'pending'),
                COUNT(*) FILTER (WHERE state = 'quarantined'),
                COUNT(*) FILTER (WHERE state = 'applied'),
                (SELECT MIN(received_at) FROM outbox WHERE state = 'pending')
         FROM outbox",
            )
            .fetch_one(self)
            .await?;
        let (ledger_entries, leads, messages, open_messages): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT COALESCE(MAX(seq), 0) FROM ledger), (SELECT COUNT(*) FROM leads),
                (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM messages WHERE NOT terminal)",
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
         FROM reconcile_organizations ORDER BY organization_id COLLATE \"C\"",
        )
        .fetch_all(self)
        .await?;
        let reconciliation_in_progress = sqlx::query_scalar(
        "SELECT organization_id FROM reconcile_checkpoints ORDER BY organization_id COLLATE \"C\"",
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
        // NULLS LAST: SQLite sorts NULL lowest, so a descending order puts it last.
        Ok(sqlx::query_as(
            "SELECT COUNT(*) FILTER (WHERE state = 'pending') AS pending,
                COUNT(*) FILTER (WHERE state = 'sent') AS sent,
                COUNT(*) FILTER (WHERE state = 'failed') AS failed,
                COUNT(*) FILTER (WHERE state = 'pending' AND last_error IS NOT NULL) AS retrying,
                (SELECT MIN(created_at) FROM pushes WHERE state = 'pending') AS oldest_pending_at,
                (SELECT last_error FROM pushes WHERE last_error IS NOT NULL
                 ORDER BY last_attempt_at DESC NULLS LAST LIMIT 1) AS last_push_error
         FROM pushes",
        )
        .fetch_one(self)
        .await?)
    }

    async fn lead(&self, id: &str) -> Result<Option<Value>, crate::store::Error> {
        let found: Option<String> =
            sqlx::query_scalar(&format!("SELECT {LEAD_JSON} WHERE l.id = $1"))
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
        "SELECT {LEAD_JSON} WHERE l.phone_number = $1 AND ($2::text IS NULL OR l.organization_id = $2)
         ORDER BY l.organization_id COLLATE \"C\", l.id COLLATE \"C\""
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
        let found: Option<MessageRow> = sqlx::query_as(
            "SELECT id, thread_id, status, type AS message_type, created_at, error_code, lead_id,
                organization_id, terminal, status_at, source, updated_at
         FROM messages WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(self)
        .await?;
        Ok(found.map(|m| {
            json!({
                "id": m.id,
                "threadId": m.thread_id,
                "status": m.status,
                "type": m.message_type,
                "createdAt": m.created_at,
                "errorCode": m.error_code,
                "leadId": m.lead_id,
                "organizationId": m.organization_id,
                "terminal": m.terminal,
                "statusAt": m.status_at,
                "source": m.source,
                "updatedAt": m.updated_at,
            })
        }))
    }

    async fn deliveries_per_minute(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, i64)>, crate::store::Error> {
        Ok(sqlx::query_as(
            "SELECT to_char(date_trunc('minute', received_at AT TIME ZONE 'UTC'),
                        'YYYY-MM-DD\"T\"HH24:MI') AS minute, COUNT(*)
         FROM outbox
         WHERE id > COALESCE((SELECT id FROM outbox WHERE received_at < $1
                              ORDER BY id DESC LIMIT 1), 0)
           AND received_at >= $1
         GROUP BY minute ORDER BY minute",
        )
        .bind(since)
        .fetch_all(self)
        .await?)
    }
}

/// A stored delivery, body and all.
#[derive(sqlx::FromRow)]
struct EventRow {
    id: i64,
    dedup_key: String,
    received_at: Timestamp,
    body: Vec<u8>,
    state: OutboxState,
    attempts: i64,
    last_error: Option<String>,
}

/// The envelope's `type` (or `eventType`) of a body that is JSON, as SQLite's
/// `COALESCE(json_extract(body, '$.type'), json_extract(body, '$.eventType'))` gives it:
/// a string as is, an object or array as its JSON text. Read here rather than in SQL:
/// PostgreSQL refuses to cast bytes that are not UTF-8 or not JSON, which would fail the
/// whole listing for one bad delivery.
fn event_type(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let field = |name: &str| value.get(name).filter(|v| !v.is_null());
    match field("type").or_else(|| field("eventType"))? {
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

/// `consent_state` rows set by a ledger entry after `since`, by organization and number.
fn export_consent_stream(
    pool: &PgPool,
    since: i64,
) -> impl Stream<Item = Result<ConsentRecord, crate::store::Error>> + Send + '_ {
    sqlx::query_as(
        "SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source
         FROM consent_state WHERE seq > $1
         ORDER BY organization_id COLLATE \"C\", phone_number COLLATE \"C\"",
    )
    .bind(since)
    .fetch(pool)
    .map_err(Into::into)
}

/// Ledger entries after `since`, in seq order.
fn export_ledger_stream(
    pool: &PgPool,
    since: i64,
) -> impl Stream<Item = Result<LedgerEntry, crate::store::Error>> + Send + '_ {
    sqlx::query_as(concat!(
        "SELECT ",
        ledger_columns!(),
        " FROM ledger WHERE seq > $1 ORDER BY seq"
    ))
    .bind(since)
    .fetch(pool)
    .map_err(Into::into)
}

/// The v3 Lead resource, its `globalOptedOut` from the consent state of its number (false
/// without one, as on SQLite). `json`, not `jsonb`, keeps the keys in this order; the JSON
/// columns come as stored.
const LEAD_JSON: &str =
    "json_build_object('id', l.id, 'type', 'lead', 'phoneNumber', l.phone_number,
    'organizationId', l.organization_id, 'activeGroupIds', l.active_group_ids,
    'inactiveGroupIds', l.inactive_group_ids, 'customFields', l.custom_fields,
    'firstName', l.first_name, 'lastName', l.last_name, 'notes', l.notes, 'followUp', l.follow_up,
    'email', l.email, 'postalCode', l.postal_code, 'phoneNumberType', l.phone_number_type,
    'tagIds', l.tag_ids, 'globalOptedOut', COALESCE(s.opted_out, FALSE),
    'createdAt', l.created_at)::text
    FROM leads AS l LEFT JOIN consent_state AS s
    ON s.organization_id = l.organization_id AND s.phone_number = l.phone_number";

#[derive(sqlx::FromRow)]
struct MessageRow {
    id: String,
    thread_id: Option<String>,
    status: String,
    message_type: Option<String>,
    created_at: Option<String>,
    error_code: Option<String>,
    lead_id: Option<String>,
    organization_id: Option<String>,
    terminal: bool,
    status_at: Timestamp,
    source: Source,
    updated_at: Timestamp,
}

impl ExportStore for PgPool {
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

#[cfg(test)]
mod tests {
    use super::event_type;

    #[test]
    fn the_event_type_is_read_as_sqlite_reads_it() {
        assert_eq!(
            event_type(br#"{"type":"consentUpdate-v1"}"#).as_deref(),
            Some("consentUpdate-v1")
        );
        assert_eq!(
            event_type(br#"{"type":null,"eventType":"messageStatus-v1"}"#).as_deref(),
            Some("messageStatus-v1")
        );
        assert_eq!(
            event_type(br#"{"type":{"a":1}}"#).as_deref(),
            Some(r#"{"a":1}"#)
        );
        assert_eq!(event_type(br#"{"id":"evt"}"#), None);
        assert_eq!(event_type(b"[1]"), None);
        assert_eq!(event_type(b"not json"), None);
        assert_eq!(event_type(b"\xff\xfe"), None);
    }
}
