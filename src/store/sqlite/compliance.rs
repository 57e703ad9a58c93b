//! The compliance report's reads on SQLite (the statements: [`crate::store::compliance`]).

use crate::model::LeadMessage;

/// The shared copies of the opt-outs whose refs are bound as `$1`, on the ledger's index by
/// event.
pub(crate) const SHARED_COPIES: &str =
    "SELECT l.event_ref, l.account_id, l.organization_id, l.recorded_at, p.state AS push_state,
                p.finished_at AS push_finished_at
         FROM (SELECT DISTINCT value FROM json_each($1)) AS k
         JOIN ledger AS l ON l.event_ref = k.value
         LEFT JOIN pushes AS p ON p.seq = l.seq";

/// The messages of `lead_ids`, as one JSON array: half a million rows one at a time cost
/// most of a report.
pub(crate) async fn messages_of_leads(
    pool: &sqlx::SqlitePool,
    lead_ids: &[&str],
) -> Result<Vec<LeadMessage>, crate::store::Error> {
    let mut conn = pool.acquire().await?;
    let rows: Vec<(String, String, String, String, Option<String>)> = crate::store::exec::json(
        &mut *conn,
        "SELECT json_group_array(json_array(m.account_id, m.lead_id, m.id, m.status, m.created_at))
         FROM json_each(?) AS k JOIN messages AS m ON m.lead_id = k.value",
        &crate::store::exec::args![&crate::store::codec::json_param(lead_ids)?],
    )
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(account_id, lead_id, id, status, created_at)| LeadMessage {
                account_id,
                lead_id,
                id,
                status,
                created_at,
            },
        )
        .collect())
}
