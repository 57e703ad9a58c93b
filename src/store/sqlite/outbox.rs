//! The outbox on SQLite, as the worker and `replay` use it.

use crate::model::Timestamp;
use crate::store::exec::{self, Exec, args};

use crate::model::StoredDelivery;

/// The first `limit` pending rows, in id order, inside the caller's write transaction (its
/// write lock keeps them its own; the transaction settles them).
pub(crate) async fn claim_pending(
    conn: &mut impl Exec,
    limit: i64,
    _now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<StoredDelivery>, crate::store::Error> {
    // One row for the whole batch (bodies in hex: any bytes survive), as a row each would
    // cost a hand-over between SQLite's thread and this task.
    let mut rows: Vec<(i64, String, String, Timestamp, String)> = exec::json(
        conn,
        "SELECT json_group_array(json_array(id, account_id, dedup_key, received_at, hex(body)))
         FROM (SELECT id, account_id, dedup_key, received_at, body FROM outbox
               WHERE state = 'pending' ORDER BY id LIMIT ?)",
        &args![limit],
    )
    .await?;
    rows.sort_unstable_by_key(|(id, ..)| *id);
    rows.into_iter()
        .map(|(id, account_id, dedup_key, received_at, body)| {
            let body = hex::decode(&body).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
            Ok(StoredDelivery {
                id,
                account_id,
                dedup_key,
                received_at: received_at.at(),
                body,
            })
        })
        .collect()
}

/// The states of the outbox rows whose ids are bound as `$1`
/// ([`OutboxCounts`](crate::store::OutboxCounts)).
pub(crate) const STATES: &str = "SELECT COALESCE(SUM(state = 'pending'), 0) AS pending,
                COALESCE(SUM(state = 'applied'), 0) AS applied,
                COALESCE(SUM(state = 'quarantined'), 0) AS quarantined
         FROM outbox WHERE id IN (SELECT value FROM json_each(?))";
