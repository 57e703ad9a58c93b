//! The mirror's writes on SQLite, in the apply path's transaction: leads as multi-row
//! statements with bound values (cheaper than JSON extraction for wide rows), message
//! statuses as one JSON array read with `json_each`.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::model::{AccountId, Lead, MessageStatus, StatusObservation, Timestamp, is_terminal};
use crate::store::exec::{self, Arg, Exec, args};
use crate::store::{LeadJson, codec};

/// Rows per INSERT of leads: 19 parameters each, under SQLite's 32,766.
const LEADS_PER_STATEMENT: usize = 1000;

pub(crate) async fn upsert_leads(
    conn: &mut impl Exec,
    account: &AccountId,
    leads: &[(&Lead, DateTime<Utc>)],
    now: DateTime<Utc>,
) -> Result<u64, crate::store::Error> {
    let now = Timestamp(now);
    // Leads the mirror does not have yet are plain inserts, which cannot abort and so
    // need no statement journal; the others (and a lead's later observations in the same
    // batch) are updated where newer and different. Rows are bound as parameters: for
    // wide rows that is cheaper than JSON extraction.
    let ids: Vec<&str> = leads.iter().map(|(lead, _)| lead.id.as_str()).collect();
    let stored: HashSet<String> = exec::json::<Vec<String>, _>(
        conn,
        "SELECT json_group_array(l.id) FROM json_each(?1) AS k
         JOIN leads AS l ON l.id = k.value AND l.account_id = ?2",
        &args![&codec::json_param(&ids)?, account],
    )
    .await?
    .into_iter()
    .collect();
    let mut first = HashSet::new();
    type Observed<'a> = &'a (&'a Lead, DateTime<Utc>);
    let (fresh, known): (Vec<Observed>, Vec<Observed>) = leads.iter().partition(|(lead, _)| {
        !stored.contains(lead.id.as_str()) && first.insert(lead.id.as_str())
    });
    let mut written = 0;
    let on_conflict = format!(" {}", crate::store::LEADS_ON_CONFLICT);
    for (rows, insert_sql, conflict) in [
        (fresh, "INSERT OR IGNORE INTO", ""),
        (known, "INSERT INTO", on_conflict.as_str()),
    ] {
        written += write_leads(conn, account, &rows, insert_sql, conflict, now).await?;
    }
    Ok(written)
}

pub(crate) async fn apply_statuses(
    conn: &mut impl Exec,
    account: &AccountId,
    observations: &[StatusObservation<'_>],
    now: DateTime<Utc>,
) -> Result<u64, crate::store::Error> {
    #[derive(Serialize)]
    struct StatusRow<'a> {
        #[serde(flatten)]
        message: &'a MessageStatus,
        lead: Option<&'a str>,
        org: Option<&'a str>,
        terminal: bool,
        at: Timestamp,
        src: &'static str,
    }
    let rows: Vec<StatusRow> = observations
        .iter()
        .map(|o| StatusRow {
            message: o.message,
            lead: o.lead_id,
            org: o.organization_id,
            terminal: is_terminal(&o.message.status),
            at: Timestamp(o.occurred_at),
            src: o.source.as_str(),
        })
        .collect();
    let done = conn
        .run(
            "INSERT INTO messages (id, thread_id, status, type, created_at, error_code, lead_id,
             organization_id, terminal, status_at, source, first_seen_at, updated_at, account_id)
         SELECT value ->> 'id', value ->> 'threadId', value ->> 'status', value ->> 'type',
             value ->> 'createdAt', value ->> 'errorCode', value ->> 'lead', value ->> 'org',
             value ->> 'terminal', value ->> 'at', value ->> 'src', ?2, ?2, ?3
         FROM json_each(?1) WHERE true ORDER BY key
         ON CONFLICT (id, account_id) DO UPDATE SET
             thread_id = COALESCE(excluded.thread_id, thread_id), status = excluded.status,
             type = COALESCE(excluded.type, type), created_at = COALESCE(excluded.created_at,
                 created_at),
             error_code = excluded.error_code, lead_id = COALESCE(excluded.lead_id, lead_id),
             organization_id = COALESCE(excluded.organization_id, organization_id),
             terminal = excluded.terminal, status_at = excluded.status_at,
             source = excluded.source, updated_at = excluded.updated_at
         WHERE (excluded.terminal, excluded.status_at, excluded.status,
             COALESCE(excluded.error_code, ''))
             > (terminal, status_at, status, COALESCE(error_code, ''))",
            &args![&codec::json_param(&rows)?, Timestamp(now), account],
        )
        .await?;
    Ok(done.rows_affected)
}

/// Writes leads as multi-row `{verb} leads ... {conflict}` statements; returns the rows
/// written.
async fn write_leads(
    conn: &mut impl Exec,
    account: &AccountId,
    rows: &[&(&Lead, DateTime<Utc>)],
    verb: &str,
    conflict: &str,
    now: Timestamp,
) -> Result<u64, crate::store::Error> {
    let mut written = 0;
    for chunk in rows.chunks(LEADS_PER_STATEMENT) {
        let mut sql = format!(
            "{verb} leads (id, organization_id, phone_number, first_name, last_name,
                 notes, follow_up, email, postal_code, phone_number_type, active_group_ids,
                 inactive_group_ids, tag_ids, custom_fields, created_at, observed_at,
                 content_hash, updated_at, account_id) VALUES "
        );
        // Encoded first, so that a lead that cannot be encoded is an error, not a row.
        let columns = chunk
            .iter()
            .map(|(lead, _)| LeadJson::of(lead))
            .collect::<Result<Vec<_>, _>>()?;
        let row = format!("({})", ["?"; 19].join(", "));
        let mut values: Vec<Arg<'_>> = Vec::with_capacity(chunk.len() * 19);
        for (i, ((lead, observed_at), json)) in chunk.iter().zip(&columns).enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&row);
            values.extend(args![
                &lead.id,
                &lead.organization_id,
                &lead.phone_number,
                &lead.first_name,
                &lead.last_name,
                &lead.notes,
                &lead.follow_up,
                &lead.email,
                &lead.postal_code,
                &lead.phone_number_type,
                json.active_group_ids.as_str(),
                json.inactive_group_ids.as_str(),
                json.tag_ids.as_str(),
                json.custom_fields.as_str(),
                &lead.created_at,
                Timestamp(*observed_at),
                json.hash,
                now,
                account,
            ]);
        }
        sql.push_str(conflict);
        written += conn.run(&sql, &values).await?.rows_affected;
    }
    Ok(written)
}
