//! The read side on PostgreSQL: the records of `ledger`, `export` and the admin API, the
//! same as on SQLite for the same data (the statements both backends share:
//! [`crate::store::read`]). Times are `timestamptz`, decoded into the records'
//! [`Timestamp`]s; text is sorted bytewise (`COLLATE "C"`), as SQLite sorts it, whatever the
//! database's collation.

use serde_json::{Value, json};

use crate::model::{OutboxState, Source, StoredEvent, Timestamp};

/// Follows every text column a listing is ordered by.
pub(crate) const COLLATE: &str = " COLLATE \"C\"";

/// A lead `l` as the v3 resource, with its consent state `s`. `json`, not `jsonb`, keeps the
/// keys of a lead in this order; its JSON columns come as stored, and its `globalOptedOut`
/// is false without a consent state, as on SQLite.
pub(crate) const LEAD_JSON: &str =
    "json_build_object('id', l.id, 'type', 'lead', 'phoneNumber', l.phone_number,
    'organizationId', l.organization_id, 'activeGroupIds', l.active_group_ids,
    'inactiveGroupIds', l.inactive_group_ids, 'customFields', l.custom_fields,
    'firstName', l.first_name, 'lastName', l.last_name, 'notes', l.notes, 'followUp', l.follow_up,
    'email', l.email, 'postalCode', l.postal_code, 'phoneNumberType', l.phone_number_type,
    'tagIds', l.tag_ids, 'globalOptedOut', COALESCE(s.opted_out, FALSE),
    'createdAt', l.created_at, 'accountId', l.account_id)::text";

/// The states of the numbers bound as `$1`, in their order, in one organization (`$2`) or all.
pub(crate) const LOOKUP: &str =
    "SELECT s.organization_id, s.lead_id, s.phone_number, s.opted_out, s.changed_at, s.source,
                s.account_id
         FROM unnest($1::text[]) WITH ORDINALITY AS k (phone_number, i)
         JOIN consent_state AS s ON s.phone_number = k.phone_number
         WHERE $2::text IS NULL OR s.organization_id = $2
         ORDER BY k.i, s.account_id COLLATE \"C\", s.organization_id COLLATE \"C\"";

/// `status`'s counts of the outbox: pending, quarantined, applied, and the oldest pending.
pub(crate) const OUTBOX_COUNTS: &str = "SELECT COUNT(*) FILTER (WHERE state = 'pending'),
            COUNT(*) FILTER (WHERE state = 'quarantined'),
            COUNT(*) FILTER (WHERE state = 'applied'),
            (SELECT MIN(received_at) FROM outbox WHERE state = 'pending')
         FROM outbox";

// NULLS LAST: SQLite sorts NULL lowest, so a descending order puts it last.
/// The push queue's counts.
pub(crate) const PUSH_COUNTS: &str = "SELECT COUNT(*) FILTER (WHERE state = 'pending') AS pending,
                COUNT(*) FILTER (WHERE state = 'sent') AS sent,
                COUNT(*) FILTER (WHERE state = 'failed') AS failed,
                COUNT(*) FILTER (WHERE state = 'pending' AND last_error IS NOT NULL) AS retrying,
                (SELECT MIN(created_at) FROM pushes WHERE state = 'pending') AS oldest_pending_at,
                (SELECT last_error FROM pushes WHERE last_error IS NOT NULL
                 ORDER BY last_attempt_at DESC NULLS LAST LIMIT 1) AS last_push_error
         FROM pushes";

/// The minute of `received_at`, as `YYYY-MM-DDTHH:MM`.
pub(crate) const MINUTE: &str =
    "to_char(date_trunc('minute', received_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD\"T\"HH24:MI')";

/// The most recent stored deliveries, newest first ([`crate::store::ReadStore::events`]).
pub(crate) async fn events(
    pool: &sqlx::PgPool,
    quarantined_only: bool,
    limit: i64,
) -> Result<Vec<StoredEvent>, crate::store::Error> {
    let rows: Vec<EventRow> = sqlx::query_as(
        "SELECT id, dedup_key, received_at, body, state, attempts::BIGINT AS attempts, last_error
         FROM outbox WHERE (NOT $1 OR state = 'quarantined') ORDER BY id DESC LIMIT $2",
    )
    .bind(quarantined_only)
    .bind(limit)
    .fetch_all(pool)
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

/// A tracked message's columns, made the v3 resource by [`message_json`]
/// ([`crate::store::ReadStore::message`]).
pub(crate) const MESSAGE: &str =
    "id, thread_id, status, type AS message_type, created_at, error_code, lead_id,
                organization_id, terminal, status_at, source, updated_at, account_id";

/// The message [`MESSAGE`] selected, as the v3 resource.
pub(crate) fn message_json(
    found: Option<MessageRow>,
) -> Result<Option<Value>, crate::store::Error> {
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
            "accountId": m.account_id,
        })
    }))
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

/// A tracked message, as stored.
#[derive(sqlx::FromRow)]
pub(crate) struct MessageRow {
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
    account_id: String,
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
