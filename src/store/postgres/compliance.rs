//! The compliance report's reads on PostgreSQL (the statements: [`crate::store::compliance`]).

crate::store::compliance::statements!(sqlx::PgPool, messages_of_leads);

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
