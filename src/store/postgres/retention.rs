//! Pruning stored deliveries and finished messages on PostgreSQL (plain deletes: autovacuum
//! reuses the space).

/// Deletes the applied rows of the ids bound as `$1`.
pub(crate) const DELETE_APPLIED: &str =
    "DELETE FROM outbox WHERE state = 'applied' AND id = ANY($1)";

/// Deletes up to `$2` finished messages dating from before `$1`, leaving those another
/// replica's pruning holds.
pub(crate) const DELETE_FINISHED: &str =
    "DELETE FROM messages WHERE terminal AND status_at < $1 AND (id, account_id) IN
         (SELECT id, account_id FROM messages WHERE terminal AND status_at < $1
          LIMIT $2 FOR UPDATE SKIP LOCKED)";

/// PostgreSQL reuses freed space and gives none back: no page is free.
pub(crate) async fn free_pages(_pool: &sqlx::PgPool) -> Result<i64, crate::store::Error> {
    Ok(0)
}

/// Nothing to give back (see [`free_pages`]).
pub(crate) async fn vacuum_step(
    _pool: &sqlx::PgPool,
    _pages: i64,
) -> Result<i64, crate::store::Error> {
    Ok(0)
}
