//! The apply path's statements on SQLite. The caller's transaction holds the write lock
//! (`BEGIN IMMEDIATE`): nobody else writes until it commits. Multi-row statements with bound
//! values, or one JSON array read with `json_each`, because each statement costs a
//! hand-over between SQLite's thread and the calling task.
//!
//! One file over 400 lines on purpose: a batch's statements in the order the apply path
//! runs them in one transaction under the write lock.

use crate::store::codec;
use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sqlx::SqliteConnection;

use crate::model::AccountId;
use crate::model::PushedChange;
use crate::model::Timestamp;
use crate::model::chain::ChainHead;
use crate::store::{self, NewEntry, NewMessage, StateWrite, Suppressing};

/// The chain's last entry, which the next one follows, as `json_array(seq, hash)` in a
/// statement's result (NULL for an empty ledger).
const CHAIN_HEAD: &str =
    "json((SELECT json_array(seq, hash) FROM ledger ORDER BY seq DESC LIMIT 1))";

/// [`CHAIN_HEAD`] as read.
fn chain_head(last: Option<(i64, Option<String>)>) -> Result<ChainHead, crate::store::Error> {
    match last {
        None => Ok(ChainHead::empty()),
        Some((seq, Some(hash))) => Ok(ChainHead { seq, hash }),
        Some((seq, None)) => Err(store::Error::ChainNotComputed { seq }),
    }
}

pub(crate) async fn settle_outbox(
    conn: &mut SqliteConnection,
    applied: &[i64],
    quarantined: &[(i64, String)],
    now: DateTime<Utc>,
) -> Result<(), crate::store::Error> {
    for (id, reason) in quarantined {
        sqlx::query(
            "UPDATE outbox SET state = 'quarantined', attempts = attempts + 1, last_error = ?,
                 applied_at = NULL
             WHERE id = ?",
        )
        .bind(reason)
        .bind(id)
        .execute(&mut *conn)
        .await?;
    }
    if !applied.is_empty() {
        sqlx::query(
            "UPDATE outbox SET state = 'applied', applied_at = ?
             WHERE id IN (SELECT value FROM json_each(?))",
        )
        .bind(Timestamp(now))
        .bind(codec::json_param(applied)?)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

pub(crate) async fn sent_after_opt_out(
    conn: &mut SqliteConnection,
    account: &AccountId,
    messages: &[NewMessage<'_>],
) -> Result<i64, crate::store::Error> {
    let sql = store::sent_after_opt_out(
        "(SELECT value ->> 'id' AS id, value ->> 'lead_id' AS lead,
                 value ->> 'created' AS created, value ->> 'after' AS after
          FROM json_each(?1)) AS k",
        "?2",
    );
    Ok(sqlx::query_scalar(&sql)
        .bind(codec::json_param(messages)?)
        .bind(account)
        .fetch_one(&mut *conn)
        .await?)
}

pub(crate) async fn suppressions(
    conn: &mut SqliteConnection,
    account: &AccountId,
    phones: &[&str],
) -> Result<Vec<(String, i64, Timestamp)>, crate::store::Error> {
    Ok(codec::json_rows_in(
        conn,
        "SELECT json_group_array(json_array(s.phone_number, s.seq, s.since))
         FROM json_each(?1) AS k
         JOIN suppressions AS s ON s.phone_number = k.value AND s.account_id = ?2",
        codec::json_param(phones)?,
        account,
    )
    .await?)
}

pub(crate) async fn lock_numbers(
    _conn: &mut SqliteConnection,
    _phones: &[&str],
) -> Result<(), crate::store::Error> {
    // The transaction's write lock covers the whole database already.
    Ok(())
}

pub(crate) async fn locate_leads(
    conn: &mut SqliteConnection,
    account: &AccountId,
    lead_ids: &[&str],
) -> Result<Vec<(String, String, String)>, crate::store::Error> {
    Ok(sqlx::query_as(
        "SELECT l.id, l.organization_id, l.phone_number FROM json_each(?1) AS k
         JOIN leads AS l ON l.id = k.value AND l.account_id = ?2
         UNION ALL
         SELECT s.lead_id, s.organization_id, s.phone_number FROM json_each(?1) AS k
         JOIN consent_state AS s ON s.lead_id = k.value AND s.account_id = ?2",
    )
    .bind(codec::json_param(lead_ids)?)
    .bind(account)
    .fetch_all(&mut *conn)
    .await?)
}

pub(crate) async fn holders_of(
    conn: &mut SqliteConnection,
    account: &AccountId,
    phones: &[&str],
) -> Result<Vec<(String, String, Option<String>)>, crate::store::Error> {
    Ok(sqlx::query_as(
        "SELECT s.phone_number, s.organization_id, s.lead_id
         FROM (SELECT DISTINCT value FROM json_each(?1)) AS p
         JOIN consent_state AS s ON s.phone_number = p.value AND s.account_id = ?2",
    )
    .bind(codec::json_param(phones)?)
    .bind(account)
    .fetch_all(&mut *conn)
    .await?)
}

pub(crate) async fn pushed_changes(
    conn: &mut SqliteConnection,
    account: &AccountId,
    keys: &[(&str, &str)],
) -> Result<Vec<PushedChange>, crate::store::Error> {
    let sql = store::pushed_changes(
        "(SELECT DISTINCT value ->> 0 AS o, value ->> 1 AS p FROM json_each(?1)) AS k
         JOIN pushes AS p ON p.organization_id = k.o AND p.phone_number = k.p AND p.account_id =
             ?2",
        "",
    );
    Ok(sqlx::query_as(&sql)
        .bind(codec::json_param(keys)?)
        .bind(account)
        .fetch_all(&mut *conn)
        .await?)
}

pub(crate) async fn unsent_opt_outs_of(
    conn: &mut SqliteConnection,
    account: &AccountId,
    keys: &[(&str, &str)],
) -> Result<Vec<(String, String)>, crate::store::Error> {
    Ok(codec::json_rows_in(
        conn,
        "SELECT json_group_array(json_array(p.organization_id, p.phone_number))
         FROM (SELECT DISTINCT value ->> 0 AS o, value ->> 1 AS p FROM json_each(?1)) AS k
         JOIN pushes AS p ON p.organization_id = k.o AND p.phone_number = k.p AND p.account_id = ?2
         WHERE p.state = 'pending' AND p.opted_out",
        codec::json_param(keys)?,
        account,
    )
    .await?)
}

/// The states `s` selected, as one JSON array of [`store::StateRow`]s (a macro, so that
/// the statements stay `&'static str`).
macro_rules! state_rows {
    () => {
        "SELECT json_group_array(json_array(s.organization_id, s.phone_number,
             COALESCE(s.rank_at, s.changed_at), json(iif(s.opted_out, 'true', 'false')),
             s.lead_id, s.seq, s.source))"
    };
}

pub(crate) async fn consent_states(
    conn: &mut SqliteConnection,
    account: &AccountId,
    keys: &[(&str, &str)],
) -> Result<Vec<store::StateRow>, crate::store::Error> {
    Ok(codec::json_rows_in(
        conn,
        concat!(
            state_rows!(),
            " FROM json_each(?1) AS k
             JOIN consent_state AS s ON s.organization_id = k.value ->> 0
                 AND s.phone_number = k.value ->> 1 AND s.account_id = ?2"
        ),
        codec::json_param(keys)?,
        account,
    )
    .await?)
}

pub(crate) async fn states_of_numbers(
    conn: &mut SqliteConnection,
    account: &AccountId,
    phones: &[&str],
) -> Result<Vec<store::StateRow>, crate::store::Error> {
    Ok(codec::json_rows_in(
        conn,
        concat!(
            state_rows!(),
            " FROM (SELECT DISTINCT value FROM json_each(?1)) AS p
             JOIN consent_state AS s ON s.phone_number = p.value AND s.account_id = ?2"
        ),
        codec::json_param(phones)?,
        account,
    )
    .await?)
}

pub(crate) async fn append_ledger(
    conn: &mut SqliteConnection,
    account: &AccountId,
    entries: &[NewEntry<'_>],
    recorded_at: DateTime<Utc>,
) -> Result<Vec<Option<i64>>, crate::store::Error> {
    let mut seqs: Vec<Option<i64>> = vec![None; entries.len()];
    // The write lock is held: the last entry stays the last, and nothing else records
    // these events, until the commit. So the new entries' seqs and their chain are known
    // before the insert (each hash needs its seq and the hash before it). Which entries
    // are recorded already and the chain's last entry are read in one statement.
    let keys: Vec<(&str, &str, &str)> = entries.iter().map(store::entry_key).collect();
    type Read = (Vec<usize>, Option<(i64, Option<String>)>);
    let text: String = sqlx::query_scalar(&format!(
        "SELECT json_array(
             json((SELECT json_group_array(k.key)
              FROM json_each(?1) AS k
              JOIN ledger AS l ON l.event_ref = k.value ->> 0
                              AND l.organization_id = k.value ->> 1
                              AND l.phone_number = k.value ->> 2
                              AND l.account_id = ?2)),
             {CHAIN_HEAD})"
    ))
    .bind(codec::json_param(&keys)?)
    .bind(account)
    .fetch_one(&mut *conn)
    .await?;
    let (recorded, last): Read = codec::json_decoded(&text)?;
    let recorded: HashSet<usize> = recorded.into_iter().collect();
    let new = store::unrecorded(entries, &recorded);
    if new.is_empty() {
        return Ok(seqs);
    }
    let head = chain_head(last)?;
    let recorded_at = Timestamp(recorded_at);
    let rows = store::chain_after(account, entries, &new, head.seq, head.hash, recorded_at)?;
    for (row, &i) in rows.iter().zip(&new) {
        seqs[i] = Some(row.seq);
    }
    for chunk in rows.chunks(super::PADDED_ROWS) {
        // OR IGNORE, though nothing can conflict (checked above, under the write lock):
        // a statement that cannot abort needs no statement journal, which would
        // otherwise copy every index page it touches.
        let done = super::padded_values(
            "INSERT OR IGNORE INTO ledger (seq, organization_id, lead_id, phone_number,
                 opted_out, occurred_at, recorded_at, source, event_ref, superseded, tag_id,
                 reason, hash, evidence, account_id)",
            15,
            chunk,
            |mut row, c| {
                let (e, o) = (c.entry, c.entry.observation);
                row.push_bind(c.seq)
                    .push_bind(&o.organization_id)
                    .push_bind(e.lead_id)
                    .push_bind(&o.phone_number)
                    .push_bind(o.opted_out)
                    .push_bind(Timestamp(o.occurred_at))
                    .push_bind(recorded_at)
                    .push_bind(o.source.as_str())
                    .push_bind(&o.event_ref)
                    .push_bind(e.superseded)
                    .push_bind(&o.tag_id)
                    .push_bind(&o.reason)
                    .push_bind(&c.hash)
                    .push_bind(&c.evidence)
                    .push_bind(account);
            },
            "",
        )
        .build()
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() != chunk.len() as u64 {
            return Err(store::Error::LedgerShort {
                took: done.rows_affected(),
                of: chunk.len(),
            });
        }
    }
    Ok(seqs)
}

pub(crate) async fn write_states(
    conn: &mut SqliteConnection,
    account: &AccountId,
    states: &[StateWrite<'_>],
) -> Result<(), crate::store::Error> {
    // Pairs with no stored state are plain inserts, which cannot abort and so need no
    // statement journal (see the ledger); the others are updated where still older.
    let (known, fresh): (Vec<&StateWrite>, Vec<&StateWrite>) =
        states.iter().partition(|w| w.stored);
    for (rows, insert_sql, conflict) in [
        (fresh, "INSERT OR IGNORE INTO", ""),
        (
            known,
            "INSERT INTO",
            " ON CONFLICT (phone_number, organization_id, account_id) DO UPDATE SET
                lead_id = COALESCE(excluded.lead_id, lead_id), opted_out = excluded.opted_out,
                changed_at = excluded.changed_at, source = excluded.source, seq = excluded.seq,
                rank_at = excluded.rank_at
             WHERE (excluded.rank_at, excluded.opted_out)
                 > (COALESCE(rank_at, changed_at), opted_out)",
        ),
    ] {
        for chunk in rows.chunks(super::PADDED_ROWS) {
            super::padded_values(
                &format!(
                    "{insert_sql} consent_state (organization_id, phone_number, lead_id,
                         opted_out, changed_at, source, seq, account_id, rank_at)"
                ),
                9,
                chunk,
                |mut row, w| {
                    row.push_bind(w.organization_id)
                        .push_bind(w.phone_number)
                        .push_bind(w.lead_id)
                        .push_bind(w.rank.opted_out)
                        .push_bind(Timestamp(w.changed_at))
                        .push_bind(w.source.as_str())
                        .push_bind(w.seq)
                        .push_bind(account)
                        .push_bind(Timestamp(w.rank.changed_at));
                },
                conflict,
            )
            .build()
            .execute(&mut *conn)
            .await?;
        }
    }
    Ok(())
}

pub(crate) async fn suppress(
    conn: &mut SqliteConnection,
    account: &AccountId,
    opt_outs: &[Suppressing<'_>],
) -> Result<(), crate::store::Error> {
    for chunk in opt_outs.chunks(super::PADDED_ROWS) {
        super::padded_values(
            "INSERT INTO suppressions (phone_number, seq, since, account_id)",
            4,
            chunk,
            |mut row, s| {
                row.push_bind(s.phone_number)
                    .push_bind(s.seq)
                    .push_bind(Timestamp(s.since))
                    .push_bind(account);
            },
            " ON CONFLICT (phone_number, account_id) DO NOTHING",
        )
        .build()
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

pub(crate) async fn lift_suppressions(
    conn: &mut SqliteConnection,
    account: &AccountId,
    opt_ins: &[(&str, DateTime<Utc>)],
) -> Result<(), crate::store::Error> {
    let rows: Vec<(&str, Timestamp)> = opt_ins.iter().map(|(p, at)| (*p, Timestamp(*at))).collect();
    sqlx::query(
        "DELETE FROM suppressions WHERE rowid IN (
             SELECT s.rowid FROM json_each(?1) AS k
             JOIN suppressions AS s ON s.phone_number = k.value ->> 0 AND s.account_id = ?2
             WHERE s.since < k.value ->> 1)",
    )
    .bind(codec::json_param(&rows)?)
    .bind(account)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
