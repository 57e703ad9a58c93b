//! The compliance report's reads on PostgreSQL (the statements: [`crate::store::compliance`]).

/// The shared copies of the opt-outs whose refs are bound as `$1`, on the ledger's index by
/// event.
pub(crate) const SHARED_COPIES: &str =
    "SELECT l.event_ref, l.account_id, l.organization_id, l.recorded_at, p.state AS push_state,
                p.finished_at AS push_finished_at
         FROM ledger AS l LEFT JOIN pushes AS p ON p.seq = l.seq
         WHERE l.event_ref = ANY($1)";

/// The messages of `lead_ids`.
pub(crate) async fn messages_of_leads(
    pool: &sqlx::PgPool,
    lead_ids: &[&str],
) -> Result<Vec<crate::model::LeadMessage>, crate::store::Error> {
    Ok(sqlx::query_as(
        "SELECT account_id, lead_id, id, status, created_at FROM messages WHERE lead_id = ANY($1)",
    )
    .bind(lead_ids)
    .fetch_all(pool)
    .await?)
}
