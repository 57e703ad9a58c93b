//! Ingest's statements, on a [`Tx`] or a [`Connection`]: trimming the refused deliveries
//! kept and the write probe, one text for both backends (`$N` parameters, times bound as
//! [`Timestamp`](crate::model::Timestamp)). What differs is in each backend's `ingest`: how
//! a transaction of its own begins (`BEGIN`), the group commit's INSERT (never given an
//! empty batch) and how refused deliveries are inserted (never given none).

use std::collections::HashMap;

use super::OutboxKey;
use super::backend::{Lend, on_backend};
use super::exec::{Exec as _, args};
use crate::model::{Delivery, RejectedDelivery};

/// Ingest's statements: the group commit's one INSERT per batch, refused deliveries, and
/// the write probe.
pub trait IngestStore: Send {
    /// Inserts `fresh` (distinct (account, key) pairs) with one multi-row INSERT, inside the
    /// caller's transaction or alone in autocommit. Returns each key's row and whether this
    /// statement added it. `last_id` is the largest outbox id before the statement, carried
    /// by the one writer that adds rows (SQLite works out the new ids from it;
    /// PostgreSQL's statement returns them and leaves it alone).
    fn insert_deliveries(
        &mut self,
        fresh: &[&Delivery],
        last_id: &mut Option<i64>,
        applied_at: Option<crate::model::Timestamp>,
    ) -> impl Future<Output = Result<HashMap<OutboxKey, (i64, bool)>, crate::store::Error>> + Send;

    /// Records refused deliveries (keeping the last `kept`) and, with `probe`, writes the
    /// readiness probe's row, in one transaction.
    fn record_others(
        &mut self,
        rejected: &[&RejectedDelivery],
        kept: i64,
        probe: bool,
    ) -> impl Future<Output = Result<(), crate::store::Error>> + Send;
}

/// Ingest writes on a write transaction ([`Tx`](super::Tx)) or on a connection of its own
/// ([`Connection`](super::Connection)) alike.
impl<T: Lend + Send + ?Sized> IngestStore for T {
    async fn insert_deliveries(
        &mut self,
        fresh: &[&Delivery],
        last_id: &mut Option<i64>,
        applied_at: Option<crate::model::Timestamp>,
    ) -> Result<HashMap<OutboxKey, (i64, bool)>, crate::store::Error> {
        if fresh.is_empty() {
            return Ok(HashMap::new());
        }
        on_backend!(self, |conn, dialect| {
            dialect::ingest::insert_deliveries(conn, fresh, last_id, applied_at).await
        })
    }

    async fn record_others(
        &mut self,
        rejected: &[&RejectedDelivery],
        kept: i64,
        probe: bool,
    ) -> Result<(), crate::store::Error> {
        on_backend!(self, |conn, dialect| {
            conn.run(dialect::ingest::BEGIN, &[]).await?;
            let written = async {
                if !rejected.is_empty() {
                    dialect::ingest::insert_rejected(&mut *conn, rejected).await?;
                    conn.run(
                        "DELETE FROM rejected_deliveries
                             WHERE id <= (SELECT MAX(id) FROM rejected_deliveries) - $1",
                        &args![kept],
                    )
                    .await?;
                }
                if probe {
                    conn.run(
                        "INSERT INTO daemon_state (key, value, updated_at) VALUES ('ready_probe',
                             'ok', $1)
                             ON CONFLICT (key) DO UPDATE SET updated_at = $1",
                        &args![crate::model::Timestamp(chrono::Utc::now())],
                    )
                    .await?;
                }
                Ok::<_, crate::store::Error>(())
            }
            .await;
            match written {
                Ok(()) => conn.run("COMMIT", &[]).await.map(drop),
                Err(error) => {
                    // A rollback that fails too leaves the transaction to the connection's
                    // close, which the writer does after any failure.
                    let _ = conn.run("ROLLBACK", &[]).await;
                    Err(error)
                }
            }
        })
    }
}
