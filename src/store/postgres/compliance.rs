//! The compliance report's reads on PostgreSQL (the statements: [`crate::store::compliance`]).

crate::store::compliance::statements!(sqlx::PgPool, messages_of_leads, shared_copies);

/// The shared copies of the opt-outs `refs` names, on the ledger's index by event.
async fn shared_copies(
    pool: &sqlx::PgPool,
    refs: &[String],
) -> Result<Vec<crate::model::SharedCopy>, crate::store::Error> {
    Ok(sqlx::query_as(
        "SELECT l.event_ref, l.account_id, l.recorded_at, p.state AS push_state,
                p.finished_at AS push_finished_at
         FROM ledger AS l LEFT JOIN pushes AS p ON p.seq = l.seq
         WHERE l.event_ref = ANY($1)",
    )
    .bind(refs)
    .fetch_all(pool)
    .await?)
}

/// The messages of `lead_ids`.
async fn messages_of_leads(
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
