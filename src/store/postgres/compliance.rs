//! The compliance report's reads on PostgreSQL (the statements: [`crate::store::compliance`]).

crate::store::compliance::statements!(
    sqlx::PgPool,
    async fn messages_of_leads(
        &self,
        lead_ids: &[&str],
    ) -> Result<Vec<crate::model::LeadMessage>, crate::store::Error> {
        if lead_ids.is_empty() {
            return Ok(Vec::new());
        }
        Ok(sqlx::query_as(
            "SELECT lead_id, id, status, created_at FROM messages WHERE lead_id = ANY($1)",
        )
        .bind(lead_ids)
        .fetch_all(self)
        .await?)
    }
);
