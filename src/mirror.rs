//! The apply path shared by the worker, the reconciler and local changes: the lead mirror,
//! message statuses and the append-only consent ledger, each change inside the caller's
//! transaction.
//!
//! Both merges are order-independent: the state kept is the maximum of a total order over
//! observations, so any order and any duplication of the same events ends in one state.

use chrono::{DateTime, Utc};
use sqlx::SqliteConnection;

use crate::db;
use crate::events::{Lead, MessageStatus, is_terminal};

/// Where a consent observation comes from (the contract's `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Webhook,
    Reconcile,
    Local,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Webhook => "webhook",
            Source::Reconcile => "reconcile",
            Source::Local => "local",
        }
    }
}

/// One consent observation of one (organization, number).
#[derive(Debug, Clone)]
pub struct ConsentChange<'a> {
    pub organization_id: &'a str,
    pub phone_number: &'a str,
    pub lead_id: Option<&'a str>,
    pub opted_out: bool,
    pub occurred_at: DateTime<Utc>,
    pub source: Source,
    /// Identifies the event: one ledger entry per event and (organization, number).
    pub event_ref: &'a str,
    pub tag_id: Option<&'a str>,
    pub reason: Option<&'a str>,
}

/// What applying a consent observation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsentApplied {
    /// The new ledger entry; `None` when this event was already recorded.
    pub seq: Option<i64>,
    /// Whether it became the current state.
    pub current: bool,
    /// Whether a newer state was already in place.
    pub superseded: bool,
}

/// Records `change` in the ledger and, if it ranks above the current state, makes it the
/// current state. Observations rank by event time, then opt-out over opt-in at the same
/// instant (the cautious answer to a tie); the rank is the row value
/// `(changed_at, opted_out)` in both statements.
pub async fn apply_consent(
    conn: &mut SqliteConnection,
    change: &ConsentChange<'_>,
    now: DateTime<Utc>,
) -> Result<ConsentApplied, sqlx::Error> {
    let occurred_at = db::timestamp(change.occurred_at);
    let recorded: Option<(i64, bool, Option<String>)> = sqlx::query_as(
        "INSERT INTO ledger (organization_id, lead_id, phone_number, opted_out, occurred_at,
                             recorded_at, source, event_ref, superseded, tag_id, reason)
         SELECT ?1, COALESCE(?2, current.lead_id), ?3, ?4, ?5, ?6, ?7, ?8,
                COALESCE((current.changed_at, current.opted_out) > (?5, ?4), 0), ?9, ?10
         FROM (SELECT 1) LEFT JOIN consent_state AS current
              ON current.organization_id = ?1 AND current.phone_number = ?3
         WHERE true
         ON CONFLICT (event_ref, organization_id, phone_number) DO NOTHING
         RETURNING seq, superseded, lead_id",
    )
    .bind(change.organization_id)
    .bind(change.lead_id)
    .bind(change.phone_number)
    .bind(change.opted_out)
    .bind(&occurred_at)
    .bind(db::timestamp(now))
    .bind(change.source.as_str())
    .bind(change.event_ref)
    .bind(change.tag_id)
    .bind(change.reason)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((seq, superseded, lead_id)) = recorded else {
        return Ok(ConsentApplied {
            seq: None,
            current: false,
            superseded: false,
        });
    };
    if superseded {
        return Ok(ConsentApplied {
            seq: Some(seq),
            current: false,
            superseded,
        });
    }
    let current = sqlx::query(
        "INSERT INTO consent_state (organization_id, phone_number, lead_id, opted_out, changed_at, source, seq)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (organization_id, phone_number) DO UPDATE SET
            lead_id = COALESCE(excluded.lead_id, lead_id), opted_out = excluded.opted_out,
            changed_at = excluded.changed_at, source = excluded.source, seq = excluded.seq
         WHERE (excluded.changed_at, excluded.opted_out) > (changed_at, opted_out)",
    )
    .bind(change.organization_id)
    .bind(change.phone_number)
    .bind(&lead_id)
    .bind(change.opted_out)
    .bind(&occurred_at)
    .bind(change.source.as_str())
    .bind(seq)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        > 0;
    Ok(ConsentApplied {
        seq: Some(seq),
        current,
        superseded,
    })
}

/// Every (organization, number, lead) whose consent follows a change of `phone_number`
/// under account sync: the mirrored leads and consent records with that number.
pub async fn account_sync_targets(
    conn: &mut SqliteConnection,
    phone_number: &str,
) -> Result<Vec<(String, Option<String>)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT organization_id, lead_id FROM consent_state WHERE phone_number = ?1
         UNION
         SELECT organization_id, id FROM leads WHERE phone_number = ?1
           AND organization_id NOT IN (SELECT organization_id FROM consent_state WHERE phone_number = ?1)",
    )
    .bind(phone_number)
    .fetch_all(&mut *conn)
    .await
}

/// Inserts or updates a mirrored lead's fields if `observed_at` is not older than what the
/// mirror holds. Its consent is the `consent_state` of its number, set by [`apply_consent`].
pub async fn upsert_lead(
    conn: &mut SqliteConnection,
    lead: &Lead,
    observed_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO leads (id, organization_id, phone_number, first_name, last_name,
             notes, follow_up, email, postal_code, phone_number_type, active_group_ids,
             inactive_group_ids, tag_ids, custom_fields, created_at, observed_at, updated_at)
         VALUES (?1, ?2, ?3, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)
         ON CONFLICT (id) DO UPDATE SET
             organization_id = ?2, phone_number = ?3, first_name = ?5, last_name = ?6, notes = ?7,
             follow_up = ?8, email = ?9, postal_code = ?10, phone_number_type = ?11,
             active_group_ids = ?12, inactive_group_ids = ?13, tag_ids = ?14, custom_fields = ?15,
             created_at = ?16, observed_at = ?17, updated_at = ?18
         WHERE ?17 >= leads.observed_at",
    )
    .bind(&lead.id)
    .bind(&lead.organization_id)
    .bind(&lead.phone_number)
    .bind(lead.global_opted_out) // ?4, unused: consent lives in consent_state
    .bind(&lead.first_name)
    .bind(&lead.last_name)
    .bind(&lead.notes)
    .bind(&lead.follow_up)
    .bind(&lead.email)
    .bind(&lead.postal_code)
    .bind(&lead.phone_number_type)
    .bind(json(&lead.active_group_ids))
    .bind(json(&lead.inactive_group_ids))
    .bind(json(&lead.tag_ids))
    .bind(json(&lead.custom_fields))
    .bind(&lead.created_at)
    .bind(db::timestamp(observed_at))
    .bind(db::timestamp(now))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// JSON text of a mirrored collection.
fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

/// One message status observation.
#[derive(Debug, Clone)]
pub struct StatusChange<'a> {
    pub message: &'a MessageStatus,
    pub lead_id: Option<&'a str>,
    pub organization_id: Option<&'a str>,
    pub occurred_at: DateTime<Utc>,
    pub source: Source,
}

/// Applies a status observation: a terminal status beats a non-terminal one whatever the
/// times; otherwise the later wins (ties broken by status text, then error code, so the
/// outcome never depends on arrival order). Returns whether the stored status changed.
pub async fn apply_message_status(
    conn: &mut SqliteConnection,
    change: &StatusChange<'_>,
    now: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    let m = change.message;
    let updated = sqlx::query(
        "INSERT INTO messages (id, thread_id, status, type, created_at, error_code, lead_id,
             organization_id, terminal, status_at, source, first_seen_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12)
         ON CONFLICT (id) DO UPDATE SET
             thread_id = COALESCE(excluded.thread_id, thread_id), status = excluded.status,
             type = COALESCE(excluded.type, type), created_at = COALESCE(excluded.created_at, created_at),
             error_code = excluded.error_code, lead_id = COALESCE(excluded.lead_id, lead_id),
             organization_id = COALESCE(excluded.organization_id, organization_id),
             terminal = excluded.terminal, status_at = excluded.status_at,
             source = excluded.source, updated_at = excluded.updated_at
         WHERE (excluded.terminal, excluded.status_at, excluded.status, COALESCE(excluded.error_code, ''))
             > (terminal, status_at, status, COALESCE(error_code, ''))",
    )
    .bind(&m.id)
    .bind(&m.thread_id)
    .bind(&m.status)
    .bind(&m.kind)
    .bind(&m.created_at)
    .bind(&m.error_code)
    .bind(change.lead_id)
    .bind(change.organization_id)
    .bind(is_terminal(&m.status))
    .bind(db::timestamp(change.occurred_at))
    .bind(change.source.as_str())
    .bind(db::timestamp(now))
    .execute(&mut *conn)
    .await?;
    Ok(updated.rows_affected() > 0)
}
