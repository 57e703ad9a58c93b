//! Ingest's statements on PostgreSQL: the group commit's one INSERT per batch, refused
//! deliveries, and the write probe. Replicas insert at once: the unique dedup key makes a
//! delivery sent to two of them one row (the second waits for the first's commit and
//! finds it).

use std::collections::HashMap;

use chrono::Utc;
use sqlx::{Connection as _, PgConnection};

use crate::model::{Delivery, RejectedDelivery};
use crate::store::IngestStore;

impl IngestStore for PgConnection {
    /// Inserts `fresh` (distinct keys) with one INSERT in autocommit; returns each key's row and
    /// whether this statement added it.
    async fn insert_deliveries(
        &mut self,
        fresh: &[&Delivery],
        _last_id: &mut Option<i64>,
    ) -> Result<HashMap<String, (i64, bool)>, crate::store::Error> {
        let mut ids = HashMap::with_capacity(fresh.len());
        if fresh.is_empty() {
            return Ok(ids);
        }
        let keys: Vec<&str> = fresh.iter().map(|d| d.dedup_key.as_str()).collect();
        let added: Vec<(i64, String)> = sqlx::query_as(
            "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index, verified_header)
             SELECT k, t, b, h::jsonb, i, v
             FROM unnest($1::text[], $2::timestamptz[], $3::bytea[], $4::text[], $5::int4[],
                         $6::int4[])
                  AS d (k, t, b, h, i, v)
             ON CONFLICT (dedup_key) DO NOTHING
             RETURNING id, dedup_key",
        )
        .bind(&keys)
        .bind(fresh.iter().map(|d| d.received_at).collect::<Vec<_>>())
        .bind(fresh.iter().map(|d| d.body.as_ref()).collect::<Vec<_>>())
        .bind(fresh.iter().map(|d| d.headers.as_str()).collect::<Vec<_>>())
        .bind(
            fresh
                .iter()
                .map(|d| i32::try_from(d.secret_index).unwrap_or(i32::MAX))
                .collect::<Vec<_>>(),
        )
        .bind(
            fresh
                .iter()
                .map(|d| d.verified_header.and_then(|i| i32::try_from(i).ok()))
                .collect::<Vec<_>>(),
        )
        .fetch_all(&mut *self)
        .await?;
        ids.extend(added.into_iter().map(|(id, key)| (key, (id, true))));
        if ids.len() < fresh.len() {
            let present: Vec<(i64, String)> =
                sqlx::query_as("SELECT id, dedup_key FROM outbox WHERE dedup_key = ANY($1)")
                    .bind(&keys)
                    .fetch_all(&mut *self)
                    .await?;
            for (id, key) in present {
                ids.entry(key).or_insert((id, false));
            }
        }
        Ok(ids)
    }

    /// Records refused deliveries (keeping the last `kept`) and, with `probe`, writes the
    /// readiness probe's row, in one transaction.
    async fn record_others(
        &mut self,
        rejected: &[&RejectedDelivery],
        kept: i64,
        probe: bool,
    ) -> Result<(), crate::store::Error> {
        let mut tx = self.begin().await?;
        if !rejected.is_empty() {
            sqlx::query(
                "INSERT INTO rejected_deliveries (received_at, reason, headers, body)
                 SELECT t, why, h::jsonb, b
                 FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::bytea[]) AS r (t, why, h, b)",
            )
            .bind(rejected.iter().map(|r| r.received_at).collect::<Vec<_>>())
            .bind(rejected.iter().map(|r| r.reason.as_str()).collect::<Vec<_>>())
            .bind(rejected.iter().map(|r| r.headers.as_str()).collect::<Vec<_>>())
            .bind(rejected.iter().map(|r| r.body.as_ref()).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "DELETE FROM rejected_deliveries WHERE id <= (SELECT MAX(id) FROM rejected_deliveries) - $1",
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
            .bind(Utc::now())
            .execute(&mut *tx)
            .await?;
        }
        Ok(tx.commit().await?)
    }
}
