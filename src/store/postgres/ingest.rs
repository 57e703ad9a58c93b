//! Ingest's statements on PostgreSQL: the group commit's one INSERT per batch, refused
//! deliveries, and the write probe. Replicas insert at once: the unique dedup key makes a
//! delivery sent to two of them one row (the second waits for the first's commit and
//! finds it).

use std::collections::HashMap;

use sqlx::PgConnection;

use crate::model::{Delivery, OutboxState, RejectedDelivery, Timestamp};
use crate::store::OutboxKey;

/// How a transaction of its own begins.
pub(crate) const BEGIN: &str = "BEGIN";

/// Inserts `fresh` (distinct keys) with one INSERT in autocommit; returns each key's row and
/// whether this statement added it.
pub(crate) async fn insert_deliveries(
    conn: &mut PgConnection,
    fresh: &[&Delivery],
    _last_id: &mut Option<i64>,
    applied_at: Option<Timestamp>,
) -> Result<HashMap<OutboxKey, (i64, bool)>, crate::store::Error> {
    let mut ids = HashMap::with_capacity(fresh.len());
    let keys: Vec<&str> = fresh.iter().map(|d| d.dedup_key.as_str()).collect();
    let accounts: Vec<&str> = fresh.iter().map(|d| d.account.as_str()).collect();
    let added: Vec<(i64, String, String)> = sqlx::query_as(
        "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index, verified_header,
                             state, applied_at, account_id)
         SELECT k, t, b, h::jsonb, i, v, $7, $8, a
         FROM unnest($1::text[], $2::timestamptz[], $3::bytea[], $4::text[], $5::int4[],
                     $6::int4[], $9::text[])
              AS d (k, t, b, h, i, v, a)
         ON CONFLICT (dedup_key, account_id) DO NOTHING
         RETURNING id, account_id, dedup_key",
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
    .bind(applied_at.map_or(OutboxState::Pending, |_| OutboxState::Applied))
    .bind(applied_at)
    .bind(&accounts)
    .fetch_all(&mut *conn)
    .await?;
    ids.extend(
        added
            .into_iter()
            .map(|(id, account, key)| ((account, key), (id, true))),
    );
    if ids.len() < fresh.len() {
        let present: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT o.id, o.account_id, o.dedup_key
             FROM unnest($1::text[], $2::text[]) AS k (key, account)
             JOIN outbox AS o ON o.dedup_key = k.key AND o.account_id = k.account",
        )
        .bind(&keys)
        .bind(&accounts)
        .fetch_all(&mut *conn)
        .await?;
        for (id, account, key) in present {
            ids.entry((account, key)).or_insert((id, false));
        }
    }
    Ok(ids)
}

/// Inserts refused deliveries, in one statement.
pub(crate) async fn insert_rejected(
    conn: &mut PgConnection,
    rejected: &[&RejectedDelivery],
) -> Result<(), crate::store::Error> {
    sqlx::query(
        "INSERT INTO rejected_deliveries (received_at, reason, headers, body, account_id)
         SELECT t, why, h::jsonb, b, a
         FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::bytea[], $5::text[])
              AS r (t, why, h, b, a)",
    )
    .bind(rejected.iter().map(|r| r.received_at).collect::<Vec<_>>())
    .bind(
        rejected
            .iter()
            .map(|r| r.reason.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(
        rejected
            .iter()
            .map(|r| r.headers.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(rejected.iter().map(|r| r.body.as_ref()).collect::<Vec<_>>())
    .bind(
        rejected
            .iter()
            .map(|r| r.account.as_str())
            .collect::<Vec<_>>(),
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}
