//! Ingest's statements on SQLite: the group commit's one INSERT per batch, refused
//! deliveries, and the write probe.

use std::collections::HashMap;

use crate::model::{Delivery, OutboxState, RejectedDelivery, Timestamp};
use crate::store::OutboxKey;
use crate::store::codec;
use crate::store::exec::{self, Exec, args};

/// How a transaction of its own begins.
pub(crate) const BEGIN: &str = "BEGIN IMMEDIATE";

/// Inserts `fresh` (distinct keys) with one multi-row INSERT, inside the caller's
/// transaction or alone in autocommit, where one statement is one transaction (one
/// hand-over to the database thread instead of the four of an explicit one). Returns each
/// key's row and whether this statement added it.
///
/// The ids of new rows follow from the statement's outcome ([`Done::consecutive_rowids`](crate::store::exec::Done::consecutive_rowids)).
/// When some keys were already present, the keys are looked up in one row, and those above
/// `last_id` (the largest id before the statement, read once and then carried by the
/// caller: its writer is the only one to add rows) are the new ones.
pub(crate) async fn insert_deliveries(
    conn: &mut impl Exec,
    fresh: &[&Delivery],
    last_id: &mut Option<i64>,
    applied_at: Option<Timestamp>,
) -> Result<HashMap<OutboxKey, (i64, bool)>, crate::store::Error> {
    let mut ids = HashMap::with_capacity(fresh.len());
    let before = match *last_id {
        Some(id) => id,
        None => conn
            .int("SELECT COALESCE(MAX(id), 0) FROM outbox", &[])
            .await?
            .unwrap_or(0),
    };
    let state = applied_at.map_or(OutboxState::Pending, |_| OutboxState::Applied);
    // Padded statements of at most PADDED_ROWS rows, each kept prepared (`padded_values`):
    // the ids of a statement that inserted every row are known from it, the others' keys
    // are looked up below.
    let mut conflicted: Vec<&Delivery> = Vec::new();
    let mut last = before;
    for chunk in fresh.chunks(super::PADDED_ROWS) {
        let (sql, values) = super::padded_values(
            "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index,
                 verified_header, state, applied_at, account_id)",
            9,
            chunk,
            |row, d| {
                row.extend(args![
                    &d.dedup_key,
                    Timestamp(d.received_at),
                    d.body.as_ref(),
                    &d.headers,
                    i64::try_from(d.secret_index).unwrap_or(i64::MAX),
                    d.verified_header.and_then(|i| i64::try_from(i).ok()),
                    state.as_str(),
                    applied_at,
                    d.account.as_str(),
                ]);
            },
            " ON CONFLICT (dedup_key, account_id) DO NOTHING",
        );
        let done = conn.run(&sql, &values).await?;
        if done.rows_affected > 0 {
            last = done.last_insert_rowid;
        }
        match done.consecutive_rowids(chunk.len()) {
            Some(range) => ids.extend(
                range
                    .zip(chunk)
                    .map(|(id, d)| ((d.account.clone(), d.dedup_key.clone()), (id, true))),
            ),
            None => conflicted.extend(chunk.iter().copied()),
        }
    }
    *last_id = Some(last);
    if conflicted.is_empty() {
        return Ok(ids);
    }
    let fresh = conflicted;
    let keys: Vec<(&str, &str)> = fresh
        .iter()
        .map(|d| (d.account.as_str(), d.dedup_key.as_str()))
        .collect();
    let rows: Vec<(i64, String, String)> = exec::json(
        conn,
        "SELECT json_group_array(json_array(o.id, o.account_id, o.dedup_key))
         FROM json_each(?) AS k
         JOIN outbox AS o ON o.dedup_key = k.value ->> 1 AND o.account_id = k.value ->> 0",
        &args![&codec::json_param(&keys)?],
    )
    .await?;
    ids.extend(
        rows.into_iter()
            .map(|(id, account, key)| ((account, key), (id, id > before))),
    );
    Ok(ids)
}

/// Inserts refused deliveries, a statement each (they are few: a sample).
pub(crate) async fn insert_rejected(
    conn: &mut impl Exec,
    rejected: &[&RejectedDelivery],
) -> Result<(), crate::store::Error> {
    for r in rejected {
        conn.run(
            "INSERT INTO rejected_deliveries (received_at, reason, headers, body, account_id)
             VALUES ($1, $2, $3, $4, $5)",
            &args![
                Timestamp(r.received_at),
                &r.reason,
                &r.headers,
                r.body.as_ref(),
                r.account.as_str(),
            ],
        )
        .await?;
    }
    Ok(())
}
