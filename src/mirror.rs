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
    /// Whether the current state changed.
    pub changed: bool,
    /// Whether a newer state was already in place.
    pub superseded: bool,
}

/// The order in which consent observations win: later event time, then opt-out over
/// opt-in at the same instant (the cautious answer to a tie).
fn consent_rank(changed_at: &str, opted_out: bool) -> (&str, bool) {
    (changed_at, opted_out)
}

/// Records `change` in the ledger and, if it is the newest, in the current state and the
/// mirrored leads with that number in that organization.
pub async fn apply_consent(
    conn: &mut SqliteConnection,
    change: &ConsentChange<'_>,
    now: DateTime<Utc>,
) -> Result<ConsentApplied, sqlx::Error> {
    let occurred_at = db::timestamp(change.occurred_at);
    let current: Option<(bool, String, Option<String>)> = sqlx::query_as(
        "SELECT opted_out, changed_at, lead_id FROM consent_state
         WHERE organization_id = ? AND phone_number = ?",
    )
    .bind(change.organization_id)
    .bind(change.phone_number)
    .fetch_optional(&mut *conn)
    .await?;
    let new_rank = consent_rank(&occurred_at, change.opted_out);
    let (wins, superseded) = match &current {
        None => (true, false),
        Some((opted_out, changed_at, _)) => {
            let old_rank = consent_rank(changed_at, *opted_out);
            (new_rank > old_rank, old_rank > new_rank)
        }
    };
    let lead_id = change
        .lead_id
        .map(str::to_owned)
        .or_else(|| current.as_ref().and_then(|c| c.2.clone()));
    let seq: Option<i64> = sqlx::query_scalar(
        "INSERT INTO ledger (organization_id, lead_id, phone_number, opted_out, occurred_at,
                             recorded_at, source, event_ref, superseded, tag_id, reason)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (event_ref, organization_id, phone_number) DO NOTHING
         RETURNING seq",
    )
    .bind(change.organization_id)
    .bind(&lead_id)
    .bind(change.phone_number)
    .bind(change.opted_out)
    .bind(&occurred_at)
    .bind(db::timestamp(now))
    .bind(change.source.as_str())
    .bind(change.event_ref)
    .bind(superseded)
    .bind(change.tag_id)
    .bind(change.reason)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(seq) = seq else {
        return Ok(ConsentApplied {
            seq: None,
            changed: false,
            superseded,
        });
    };
    if wins {
        sqlx::query(
            "INSERT INTO consent_state (organization_id, phone_number, lead_id, opted_out, changed_at, source, seq)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (organization_id, phone_number) DO UPDATE SET
                lead_id = COALESCE(?3, lead_id), opted_out = ?4, changed_at = ?5, source = ?6, seq = ?7",
        )
        .bind(change.organization_id)
        .bind(change.phone_number)
        .bind(&lead_id)
        .bind(change.opted_out)
        .bind(&occurred_at)
        .bind(change.source.as_str())
        .bind(seq)
        .execute(&mut *conn)
        .await?;
        sqlx::query(
            "UPDATE leads SET global_opted_out = ?, updated_at = ?
             WHERE organization_id = ? AND phone_number = ? AND global_opted_out <> ?",
        )
        .bind(change.opted_out)
        .bind(db::timestamp(now))
        .bind(change.organization_id)
        .bind(change.phone_number)
        .bind(change.opted_out)
        .execute(&mut *conn)
        .await?;
    }
    let changed = wins && current.as_ref().is_none_or(|c| c.0 != change.opted_out);
    Ok(ConsentApplied {
        seq: Some(seq),
        changed,
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
/// mirror holds. Consent is left to [`apply_consent`]; a new lead starts from the current
/// consent of its number if one is known.
pub async fn upsert_lead(
    conn: &mut SqliteConnection,
    lead: &Lead,
    observed_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO leads (id, organization_id, phone_number, global_opted_out, first_name, last_name,
             notes, follow_up, email, postal_code, phone_number_type, active_group_ids,
             inactive_group_ids, tag_ids, custom_fields, created_at, observed_at, updated_at)
         VALUES (?1, ?2, ?3,
             COALESCE((SELECT opted_out FROM consent_state WHERE organization_id = ?2 AND phone_number = ?3), ?4),
             ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)
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
    .bind(lead.global_opted_out)
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
/// times; otherwise the later wins. Returns whether the stored status changed.
pub async fn apply_message_status(
    conn: &mut SqliteConnection,
    change: &StatusChange<'_>,
    now: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    let m = change.message;
    let terminal = is_terminal(&m.status);
    let status_at = db::timestamp(change.occurred_at);
    let error_code = m.error_code.clone().unwrap_or_default();
    let current: Option<(bool, String, String, String)> = sqlx::query_as(
        "SELECT terminal, status_at, status, COALESCE(error_code, '') FROM messages WHERE id = ?",
    )
    .bind(&m.id)
    .fetch_optional(&mut *conn)
    .await?;
    let new_rank = (
        terminal,
        status_at.as_str(),
        m.status.as_str(),
        error_code.as_str(),
    );
    let wins = current
        .as_ref()
        .is_none_or(|(t, at, s, e)| new_rank > (*t, at.as_str(), s.as_str(), e.as_str()));
    if !wins {
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO messages (id, thread_id, status, type, created_at, error_code, lead_id,
             organization_id, terminal, status_at, source, first_seen_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12)
         ON CONFLICT (id) DO UPDATE SET
             thread_id = COALESCE(?2, thread_id), status = ?3, type = COALESCE(?4, type),
             created_at = COALESCE(?5, created_at), error_code = ?6,
             lead_id = COALESCE(?7, lead_id), organization_id = COALESCE(?8, organization_id),
             terminal = ?9, status_at = ?10, source = ?11, updated_at = ?12",
    )
    .bind(&m.id)
    .bind(&m.thread_id)
    .bind(&m.status)
    .bind(&m.kind)
    .bind(&m.created_at)
    .bind(&m.error_code)
    .bind(change.lead_id)
    .bind(change.organization_id)
    .bind(terminal)
    .bind(&status_at)
    .bind(change.source.as_str())
    .bind(db::timestamp(now))
    .execute(&mut *conn)
    .await?;
    Ok(current.is_none_or(|(_, _, s, e)| s != m.status || e != error_code))
}
