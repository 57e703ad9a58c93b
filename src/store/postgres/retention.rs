//! Pruning stored deliveries and finished messages on PostgreSQL (plain deletes: autovacuum
//! reuses the space).

crate::store::retention::statements! {
    sqlx::PgPool,
    applied: "DELETE FROM outbox WHERE state = 'applied' AND id = ANY($1)",
    |ids| ids,
    count_finished: "SELECT COUNT(*) FROM messages WHERE terminal AND status_at < $1",
    delete_finished: "DELETE FROM messages WHERE terminal AND status_at < $1 AND (id, account_id) IN
         (SELECT id, account_id FROM messages WHERE terminal AND status_at < $1
          LIMIT $2 FOR UPDATE SKIP LOCKED)",

    async fn free_pages(&self) -> Result<i64, crate::store::Error> {
        Ok(0)
    }

    async fn vacuum_step(&self, _pages: i64) -> Result<i64, crate::store::Error> {
        Ok(0)
    }
}
