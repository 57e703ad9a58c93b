//! Pruning stored deliveries and finished messages on SQLite, and giving the space back
//! (incremental vacuum).

use sqlx::SqlitePool;

/// Deletes the applied rows of the ids bound as `$1`.
pub(crate) const DELETE_APPLIED: &str =
    "DELETE FROM outbox WHERE state = 'applied' AND id IN (SELECT value FROM json_each($1))";

/// Deletes up to `$2` finished messages dating from before `$1`.
pub(crate) const DELETE_FINISHED: &str = "DELETE FROM messages WHERE rowid IN
         (SELECT rowid FROM messages WHERE terminal = 1 AND status_at < $1 LIMIT $2)";

/// Pages of the file that are free.
pub(crate) async fn free_pages(pool: &SqlitePool) -> Result<i64, crate::store::Error> {
    Ok(sqlx::query_scalar("PRAGMA freelist_count")
        .fetch_one(pool)
        .await?)
}

/// Gives back up to `pages` free pages; returns how many remain free.
pub(crate) async fn vacuum_step(pool: &SqlitePool, pages: i64) -> Result<i64, crate::store::Error> {
    let mut conn = pool.acquire().await?;
    // A pragma's argument cannot be bound; `pages` is a number.
    sqlx::query(&format!("PRAGMA incremental_vacuum({pages})"))
        .execute(&mut *conn)
        .await?;
    Ok(sqlx::query_scalar("PRAGMA freelist_count")
        .fetch_one(&mut *conn)
        .await?)
}

/// Switches the file to incremental auto-vacuum if it is not yet: that takes one VACUUM
/// (a rewrite of the file: instant on a new one, long on a large one). Returns whether it
/// rewrote. Not a connection option: setting the pragma writes the file's header, which
/// would make every connection of every command queue for the write lock.
pub async fn ensure_incremental_vacuum(pool: &SqlitePool) -> Result<bool, crate::store::Error> {
    /// `PRAGMA auto_vacuum`'s value for INCREMENTAL.
    const INCREMENTAL: i64 = 2;
    let mut conn = pool.acquire().await?;
    let mode: i64 = sqlx::query_scalar("PRAGMA auto_vacuum")
        .fetch_one(&mut *conn)
        .await?;
    if mode == INCREMENTAL {
        return Ok(false);
    }
    sqlx::query("PRAGMA auto_vacuum = INCREMENTAL")
        .execute(&mut *conn)
        .await?;
    sqlx::query("VACUUM").execute(&mut *conn).await?;
    Ok(true)
}

/// Switches a SQLite file to incremental auto-vacuum once (see
/// [`ensure_incremental_vacuum`]); logs when that takes a rewrite.
pub async fn prepare(pool: &SqlitePool) -> Result<(), crate::store::Error> {
    if ensure_incremental_vacuum(pool).await? {
        tracing::info!(
            "the database file now gives pruned space back (incremental auto-vacuum; rewritten once)"
        );
    }
    Ok(())
}
