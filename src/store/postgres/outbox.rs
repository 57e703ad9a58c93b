//! The outbox on PostgreSQL, shared by the workers of every replica.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use crate::model::StoredDelivery;

/// Claims the first `limit` pending rows no other worker holds, in id order, and marks them
/// applied at `now` in the same statement (the caller's transaction settles the rows it
/// must quarantine instead, and a rollback leaves them all pending): one pass over the rows
/// instead of a lock now and an update later. Workers of all replicas take disjoint batches
/// at once, nobody waiting on anybody.
pub(crate) async fn claim_pending(
    conn: &mut PgConnection,
    limit: i64,
    now: DateTime<Utc>,
) -> Result<Vec<StoredDelivery>, crate::store::Error> {
    let mut rows: Vec<StoredDelivery> = sqlx::query_as(
        "UPDATE outbox SET state = 'applied', applied_at = $2
         WHERE id IN (SELECT id FROM outbox WHERE state = 'pending' ORDER BY id LIMIT $1
                      FOR UPDATE SKIP LOCKED)
         RETURNING id, account_id, dedup_key, received_at, body",
    )
    .bind(limit)
    .bind(now)
    .fetch_all(conn)
    .await?;
    rows.sort_unstable_by_key(|row| row.id);
    Ok(rows)
}

/// The states of the outbox rows whose ids are bound as `$1`
/// ([`OutboxCounts`](crate::store::OutboxCounts)).
pub(crate) const STATES: &str = "SELECT COUNT(*) FILTER (WHERE state = 'pending') AS pending,
                COUNT(*) FILTER (WHERE state = 'applied') AS applied,
                COUNT(*) FILTER (WHERE state = 'quarantined') AS quarantined
         FROM outbox WHERE id = ANY($1)";
