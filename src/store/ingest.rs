//! Ingest's statements with one text for both backends (`$N` parameters, times bound as
//! [`Timestamp`](crate::model::Timestamp)): trimming the refused deliveries kept and the
//! write probe. What differs is given by each backend's `ingest`: how a transaction of its
//! own begins (`$begin`), the group commit's INSERT (`$insert`, never given an empty batch)
//! and how refused deliveries are inserted (`$insert_rejected`, never given none).

/// `IngestStore` for the connection type `$conn`.
macro_rules! statements {
    ($conn:ty, begin: $begin:literal, insert: $insert:path, insert_rejected: $insert_rejected:path) => {
        impl $crate::store::IngestStore for $conn {
            async fn insert_deliveries(
                &mut self,
                fresh: &[&crate::model::Delivery],
                last_id: &mut Option<i64>,
                applied_at: Option<crate::model::Timestamp>,
            ) -> Result<std::collections::HashMap<crate::store::OutboxKey, (i64, bool)>, crate::store::Error> {
                if fresh.is_empty() {
                    return Ok(std::collections::HashMap::new());
                }
                $insert(self, fresh, last_id, applied_at).await
            }

            async fn record_others(
                &mut self,
                rejected: &[&crate::model::RejectedDelivery],
                kept: i64,
                probe: bool,
            ) -> Result<(), crate::store::Error> {
                let mut tx = sqlx::Connection::begin_with(self, $begin).await?;
                if !rejected.is_empty() {
                    $insert_rejected(&mut *tx, rejected).await?;
                    sqlx::query(
                        "DELETE FROM rejected_deliveries
                         WHERE id <= (SELECT MAX(id) FROM rejected_deliveries) - $1",
                    )
                    .bind(kept)
                    .execute(&mut *tx)
                    .await?;
                }
                if probe {
                    sqlx::query(
                        "INSERT INTO daemon_state (key, value, updated_at) VALUES ('ready_probe', 'ok', $1)
                         ON CONFLICT (key) DO UPDATE SET updated_at = $1",
                    )
                    .bind(crate::model::Timestamp(chrono::Utc::now()))
                    .execute(&mut *tx)
                    .await?;
                }
                Ok(tx.commit().await?)
            }
        }
    };
}

pub(crate) use statements;
