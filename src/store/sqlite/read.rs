//! The read side on SQLite: the records of `ledger`, `export` and the admin API (the
//! statements both backends share: [`crate::store::read`]). Times are stored as they are
//! shown (RFC 3339 text), booleans as 0/1, JSON as text.

use crate::model::StoredEvent;
use crate::store::codec;
use serde_json::Value;

/// Follows every text column a listing is ordered by.
pub(crate) const COLLATE: &str = "";

/// A lead `l` as the v3 resource, with its consent state `s`.
pub(crate) const LEAD_JSON: &str = "json_object('id', l.id, 'type', 'lead', 'phoneNumber',
     l.phone_number,
        'organizationId', l.organization_id, 'activeGroupIds', json(l.active_group_ids),
        'inactiveGroupIds', json(l.inactive_group_ids), 'customFields', json(l.custom_fields),
        'firstName', l.first_name, 'lastName', l.last_name, 'notes', l.notes, 'followUp',
            l.follow_up,
        'email', l.email, 'postalCode', l.postal_code, 'phoneNumberType', l.phone_number_type,
        'tagIds', json(l.tag_ids), 'globalOptedOut', json(CASE WHEN s.opted_out THEN 'true' ELSE
            'false' END),
        'createdAt', l.created_at, 'accountId', l.account_id)";

/// The states of the numbers bound as `$1`, in their order, in one organization (`$2`) or all.
pub(crate) const LOOKUP: &str =
    "SELECT s.organization_id, s.lead_id, s.phone_number, s.opted_out, s.changed_at, s.source,
                s.account_id
         FROM json_each($1) AS k JOIN consent_state AS s ON s.phone_number = k.value
         WHERE $2 IS NULL OR s.organization_id = $2
         ORDER BY k.key, s.account_id, s.organization_id";

/// `status`'s counts of the outbox: pending, quarantined, applied, and the oldest pending.
pub(crate) const OUTBOX_COUNTS: &str =
    "SELECT COALESCE(SUM(state = 'pending'), 0), COALESCE(SUM(state = 'quarantined'), 0),
            COALESCE(SUM(state = 'applied'), 0),
            (SELECT MIN(received_at) FROM outbox WHERE state = 'pending')
         FROM outbox";

/// The push queue's counts.
pub(crate) const PUSH_COUNTS: &str = "SELECT COALESCE(SUM(state = 'pending'), 0) AS pending,
     COALESCE(SUM(state = 'sent'), 0) AS sent,
                COALESCE(SUM(state = 'failed'), 0) AS failed,
                COALESCE(SUM(state = 'pending' AND last_error IS NOT NULL), 0) AS retrying,
                (SELECT MIN(created_at) FROM pushes WHERE state = 'pending') AS oldest_pending_at,
                (SELECT last_error FROM pushes WHERE last_error IS NOT NULL
                 ORDER BY last_attempt_at DESC LIMIT 1) AS last_push_error
             FROM pushes";

/// The minute of `received_at`, as `YYYY-MM-DDTHH:MM`.
pub(crate) const MINUTE: &str = "substr(received_at, 1, 16)";

/// The most recent stored deliveries, newest first ([`crate::store::ReadStore::events`]).
pub(crate) async fn events(
    pool: &sqlx::SqlitePool,
    quarantined_only: bool,
    limit: i64,
) -> Result<Vec<StoredEvent>, crate::store::Error> {
    Ok(sqlx::query_as(
        "SELECT id, dedup_key, received_at,
                CASE WHEN json_valid(CAST(body AS TEXT))
                     THEN COALESCE(json_extract(CAST(body AS TEXT), '$.type'),
                                   json_extract(CAST(body AS TEXT), '$.eventType')) END AS
                                       event_type,
                state, attempts, last_error
             FROM outbox WHERE ($1 = 0 OR state = 'quarantined') ORDER BY id DESC LIMIT $2",
    )
    .bind(quarantined_only)
    .bind(limit)
    .fetch_all(pool)
    .await?)
}

/// A tracked message as the v3 resource, built by the statement
/// ([`crate::store::ReadStore::message`]).
pub(crate) const MESSAGE: &str = "json_object('id', id, 'threadId', thread_id, 'status', status,
     'type', type,
                'createdAt', created_at, 'errorCode', error_code, 'leadId', lead_id,
                'organizationId', organization_id, 'terminal', json(CASE WHEN terminal THEN
                    'true' ELSE 'false' END),
                'statusAt', status_at, 'source', source, 'updatedAt', updated_at,
                'accountId', account_id)";

/// The message [`MESSAGE`] selected, as JSON.
pub(crate) fn message_json(found: Option<(String,)>) -> Result<Option<Value>, crate::store::Error> {
    Ok(found
        .map(|(text,)| codec::json_decoded(&text))
        .transpose()?)
}
