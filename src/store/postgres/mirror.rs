//! The mirror's writes on PostgreSQL, in the apply path's transaction: leads and message
//! statuses as arrays (`unnest`), one row per lead or message (an upsert cannot touch a row
//! twice).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use super::apply::column;
use crate::model::{AccountId, Lead, StatusObservation, is_terminal};
use crate::store::{LeadJson, status_rank};

pub(crate) async fn upsert_leads(
    conn: &mut PgConnection,
    account: &AccountId,
    leads: &[(&Lead, DateTime<Utc>)],
    now: DateTime<Utc>,
) -> Result<u64, crate::store::Error> {
    // One row per lead (an upsert cannot touch a row twice): its latest observation.
    let mut latest: HashMap<&str, &(&Lead, DateTime<Utc>)> = HashMap::new();
    for observed in leads {
        let slot = latest.entry(observed.0.id.as_str()).or_insert(observed);
        if observed.1 >= slot.1 {
            *slot = observed;
        }
    }
    if latest.is_empty() {
        return Ok(0);
    }
    let rows: Vec<&(&Lead, DateTime<Utc>)> = latest.into_values().collect();
    let json = rows
        .iter()
        .map(|(lead, _)| LeadJson::of(lead))
        .collect::<Result<Vec<_>, _>>()?;
    let done = sqlx::query(&format!(
        "INSERT INTO leads (id, organization_id, phone_number, first_name, last_name, notes,
             follow_up, email, postal_code, phone_number_type, active_group_ids,
             inactive_group_ids, tag_ids, custom_fields, created_at, observed_at,
             content_hash, updated_at, account_id)
         SELECT id, o, p, fn, ln, notes, fu, email, pc, pt, ag::jsonb, ig::jsonb, tags::jsonb,
                cf::jsonb, created, observed, hash, $18, $19
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                     $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
                     $13::text[], $14::text[], $15::text[], $16::timestamptz[], $17::int8[])
              AS r (id, o, p, fn, ln, notes, fu, email, pc, pt, ag, ig, tags, cf, created,
                    observed, hash) {}",
        crate::store::LEADS_ON_CONFLICT
    ))
    .bind(column(&rows, |r| r.0.id.as_str()))
    .bind(column(&rows, |r| r.0.organization_id.as_str()))
    .bind(column(&rows, |r| r.0.phone_number.as_str()))
    .bind(column(&rows, |r| r.0.first_name.as_deref()))
    .bind(column(&rows, |r| r.0.last_name.as_deref()))
    .bind(column(&rows, |r| r.0.notes.as_deref()))
    .bind(column(&rows, |r| r.0.follow_up.as_deref()))
    .bind(column(&rows, |r| r.0.email.as_deref()))
    .bind(column(&rows, |r| r.0.postal_code.as_deref()))
    .bind(column(&rows, |r| r.0.phone_number_type.as_deref()))
    .bind(column(&json, |j| j.active_group_ids.as_str()))
    .bind(column(&json, |j| j.inactive_group_ids.as_str()))
    .bind(column(&json, |j| j.tag_ids.as_str()))
    .bind(column(&json, |j| j.custom_fields.as_str()))
    .bind(column(&rows, |r| r.0.created_at.as_deref()))
    .bind(
        rows.iter()
            .map(|(_, at)| crate::model::to_millis(*at))
            .collect::<Vec<_>>(),
    )
    .bind(json.iter().map(|j| j.hash).collect::<Vec<_>>())
    .bind(now)
    .bind(account)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected())
}

pub(crate) async fn apply_statuses(
    conn: &mut PgConnection,
    account: &AccountId,
    observations: &[StatusObservation<'_>],
    now: DateTime<Utc>,
) -> Result<u64, crate::store::Error> {
    // One row per message (an upsert cannot touch a row twice): its highest-ranked
    // observation, which is what applying them one by one would leave.
    let mut best: HashMap<&str, &StatusObservation<'_>> = HashMap::new();
    for o in observations {
        let slot = best.entry(o.message.id.as_str()).or_insert(o);
        if status_rank(o) >= status_rank(slot) {
            *slot = o;
        }
    }
    if best.is_empty() {
        return Ok(0);
    }
    let rows: Vec<&StatusObservation<'_>> = best.into_values().collect();
    let done = sqlx::query(
        "INSERT INTO messages (id, thread_id, status, type, created_at, error_code, lead_id,
             organization_id, terminal, status_at, source, first_seen_at, updated_at, account_id)
         SELECT id, thread, status, kind, created, code, lead, org, terminal, at, src, $12, $12, $13
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                     $7::text[], $8::text[], $9::bool[], $10::timestamptz[], $11::text[])
              AS r (id, thread, status, kind, created, code, lead, org, terminal, at, src)
         ON CONFLICT (id, account_id) DO UPDATE SET
             thread_id = COALESCE(excluded.thread_id, messages.thread_id),
             status = excluded.status, type = COALESCE(excluded.type, messages.type),
             created_at = COALESCE(excluded.created_at, messages.created_at),
             error_code = excluded.error_code,
             lead_id = COALESCE(excluded.lead_id, messages.lead_id),
             organization_id = COALESCE(excluded.organization_id, messages.organization_id),
             terminal = excluded.terminal, status_at = excluded.status_at,
             source = excluded.source, updated_at = excluded.updated_at
         WHERE (excluded.terminal, excluded.status_at, excluded.status,
             COALESCE(excluded.error_code, ''))
             > (messages.terminal, messages.status_at, messages.status,
                 COALESCE(messages.error_code, ''))",
    )
    .bind(
        rows.iter()
            .map(|o| o.message.id.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(column(&rows, |o| o.message.thread_id.as_deref()))
    .bind(
        rows.iter()
            .map(|o| o.message.status.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(column(&rows, |o| o.message.kind.as_deref()))
    .bind(column(&rows, |o| o.message.created_at.as_deref()))
    .bind(column(&rows, |o| o.message.error_code.as_deref()))
    .bind(column(&rows, |o| o.lead_id))
    .bind(column(&rows, |o| o.organization_id))
    .bind(
        rows.iter()
            .map(|o| is_terminal(&o.message.status))
            .collect::<Vec<_>>(),
    )
    .bind(
        rows.iter()
            .map(|o| crate::model::to_millis(o.occurred_at))
            .collect::<Vec<_>>(),
    )
    .bind(rows.iter().map(|o| o.source.as_str()).collect::<Vec<_>>())
    .bind(now)
    .bind(account)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected())
}
