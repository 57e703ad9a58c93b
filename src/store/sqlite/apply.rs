//! The apply path's statements on SQLite. The caller's transaction holds the write lock
//! (`BEGIN IMMEDIATE`): nobody else writes until it commits. Multi-row statements with bound
//! values, or one JSON array read with `json_each`, because each statement costs a
//! hand-over between SQLite's thread and the calling task.
//!
//! One file over 400 lines on purpose: a batch's statements in the order the apply path
//! runs them in one transaction under the write lock.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use crate::store::codec;
use crate::store::exec::{self, Exec, args};

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
    conn: &mut impl Exec,
    applied: &[i64],
    quarantined: &[(i64, String)],
    now: DateTime<Utc>,
) -> Result<(), crate::store::Error> {
    for (id, reason) in quarantined {
        conn.run(
            "UPDATE outbox SET state = 'quarantined', attempts = attempts + 1, last_error = ?,
                 applied_at = NULL
             WHERE id = ?",
            &args![reason, *id],
        )
        .await?;
    }
    if !applied.is_empty() {
        conn.run(
            "UPDATE outbox SET state = 'applied', applied_at = ?
             WHERE id IN (SELECT value FROM json_each(?))",
            &args![Timestamp(now), &codec::json_param(applied)?],
        )
        .await?;
    }
    Ok(())
}

pub(crate) async fn sent_after_opt_out(
    conn: &mut impl Exec,
    account: &AccountId,
    messages: &[NewMessage<'_>],
) -> Result<i64, crate::store::Error> {
    let sql = store::sent_after_opt_out(
        "(SELECT value ->> 'id' AS id, value ->> 'lead_id' AS lead,
                 value ->> 'created' AS created, value ->> 'after' AS after
          FROM json_each(?1)) AS k",
        "?2",
    );
    Ok(conn
        .int(&sql, &args![&codec::json_param(messages)?, account])
        .await?
        .unwrap_or(0))
}

pub(crate) async fn suppressions(
    conn: &mut impl Exec,
    account: &AccountId,
    phones: &[&str],
) -> Result<Vec<(String, i64, Timestamp)>, crate::store::Error> {
    exec::json(
        conn,
        "SELECT json_group_array(json_array(s.phone_number, s.seq, s.since))
         FROM json_each(?1) AS k
         JOIN suppressions AS s ON s.phone_number = k.value AND s.account_id = ?2",
        &args![&codec::json_param(phones)?, account],
    )
    .await
}

pub(crate) async fn lock_numbers(
    _conn: &mut impl Exec,
    _phones: &[&str],
) -> Result<(), crate::store::Error> {
    // The transaction's write lock covers the whole database already.
    Ok(())
}

pub(crate) async fn locate_leads(
    conn: &mut impl Exec,
    account: &AccountId,
    lead_ids: &[&str],
) -> Result<Vec<(String, String, String)>, crate::store::Error> {
    exec::json(
        conn,
        "SELECT json_group_array(json_array(id, organization_id, phone_number)) FROM (
             SELECT l.id, l.organization_id, l.phone_number FROM json_each(?1) AS k
             JOIN leads AS l ON l.id = k.value AND l.account_id = ?2
             UNION ALL
             SELECT s.lead_id, s.organization_id, s.phone_number FROM json_each(?1) AS k
             JOIN consent_state AS s ON s.lead_id = k.value AND s.account_id = ?2)",
        &args![&codec::json_param(lead_ids)?, account],
    )
    .await
}

pub(crate) async fn holders_of(
    conn: &mut impl Exec,
    account: &AccountId,
    phones: &[&str],
) -> Result<Vec<(String, String, Option<String>)>, crate::store::Error> {
    exec::json(
        conn,
        "SELECT json_group_array(json_array(s.phone_number, s.organization_id, s.lead_id))
         FROM (SELECT DISTINCT value FROM json_each(?1)) AS p
         JOIN consent_state AS s ON s.phone_number = p.value AND s.account_id = ?2",
        &args![&codec::json_param(phones)?, account],
    )
    .await
}

pub(crate) async fn pushed_changes(
    conn: &mut impl Exec,
    account: &AccountId,
    keys: &[(&str, &str)],
) -> Result<Vec<PushedChange>, crate::store::Error> {
    let sql = store::pushed_changes(
        "(SELECT DISTINCT value ->> 0 AS o, value ->> 1 AS p FROM json_each(?1)) AS k
         JOIN pushes AS p ON p.organization_id = k.o AND p.phone_number = k.p AND p.account_id =
             ?2",
        "",
    );
    type Row = (
        i64,
        String,
        String,
        bool,
        Timestamp,
        Timestamp,
        Timestamp,
        Option<Timestamp>,
    );
    let mut rows: Vec<Row> = exec::json(
        conn,
        &format!(
            "SELECT json_group_array(json_array(seq, organization_id, phone_number,
                 json(iif(opted_out, 'true', 'false')), occurred_at, first_attempt_at,
                 last_attempt_at, contradicted_at))
             FROM ({sql})"
        ),
        &args![&codec::json_param(keys)?, account],
    )
    .await?;
    rows.sort_unstable_by_key(|row| row.0);
    Ok(rows
        .into_iter()
        .map(
            |(seq, organization_id, phone_number, opted_out, at, first, last, contra)| {
                PushedChange {
                    seq,
                    organization_id,
                    phone_number,
                    opted_out,
                    occurred_at: at.0,
                    first_attempt_at: first.0,
                    last_attempt_at: last.0,
                    contradicted_at: contra.map(|t| t.0),
                }
            },
        )
        .collect())
}

pub(crate) async fn unsent_opt_outs_of(
    conn: &mut impl Exec,
    account: &AccountId,
    keys: &[(&str, &str)],
) -> Result<Vec<(String, String)>, crate::store::Error> {
    exec::json(
        conn,
        "SELECT json_group_array(json_array(p.organization_id, p.phone_number))
         FROM (SELECT DISTINCT value ->> 0 AS o, value ->> 1 AS p FROM json_each(?1)) AS k
         JOIN pushes AS p ON p.organization_id = k.o AND p.phone_number = k.p AND p.account_id = ?2
         WHERE p.state = 'pending' AND p.opted_out",
        &args![&codec::json_param(keys)?, account],
    )
    .await
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
    conn: &mut impl Exec,
    account: &AccountId,
    keys: &[(&str, &str)],
) -> Result<Vec<store::StateRow>, crate::store::Error> {
    exec::json(
        conn,
        concat!(
            state_rows!(),
            " FROM json_each(?1) AS k
             JOIN consent_state AS s ON s.organization_id = k.value ->> 0
                 AND s.phone_number = k.value ->> 1 AND s.account_id = ?2"
        ),
        &args![&codec::json_param(keys)?, account],
    )
    .await
}

pub(crate) async fn states_of_numbers(
    conn: &mut impl Exec,
    account: &AccountId,
    phones: &[&str],
) -> Result<Vec<store::StateRow>, crate::store::Error> {
    exec::json(
        conn,
        concat!(
            state_rows!(),
            " FROM (SELECT DISTINCT value FROM json_each(?1)) AS p
             JOIN consent_state AS s ON s.phone_number = p.value AND s.account_id = ?2"
        ),
        &args![&codec::json_param(phones)?, account],
    )
    .await
}

pub(crate) async fn append_ledger(
    conn: &mut impl Exec,
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
    let (recorded, last): Read = exec::json(
        conn,
        &format!(
            "SELECT json_array(
             json((SELECT json_group_array(k.key)
              FROM json_each(?1) AS k
              JOIN ledger AS l ON l.event_ref = k.value ->> 0
                              AND l.organization_id = k.value ->> 1
                              AND l.phone_number = k.value ->> 2
                              AND l.account_id = ?2)),
             {CHAIN_HEAD})"
        ),
        &args![&codec::json_param(&keys)?, account],
    )
    .await?;
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
    insert_chained(conn, account, &rows, recorded_at).await?;
    Ok(seqs)
}

/// Inserts the chained entries `rows`, a padded statement per chunk; an insert that took
/// fewer rows than given is [`store::Error::LedgerShort`].
async fn insert_chained(
    conn: &mut impl Exec,
    account: &AccountId,
    rows: &[store::Chained<'_, '_>],
    recorded_at: Timestamp,
) -> Result<(), crate::store::Error> {
    for chunk in rows.chunks(super::PADDED_ROWS) {
        // OR IGNORE, though nothing can conflict (the caller checked, under the write lock):
        // a statement that cannot abort needs no statement journal, which would
        // otherwise copy every index page it touches.
        let (sql, values) = super::padded_values(
            "INSERT OR IGNORE INTO ledger (seq, organization_id, lead_id, phone_number,
                 opted_out, occurred_at, recorded_at, source, event_ref, superseded, tag_id,
                 reason, hash, evidence, account_id)",
            15,
            chunk,
            |row, c| {
                let (e, o) = (c.entry, c.entry.observation);
                row.extend(args![
                    c.seq,
                    &o.organization_id,
                    e.lead_id,
                    &o.phone_number,
                    o.opted_out,
                    Timestamp(o.occurred_at),
                    recorded_at,
                    o.source.as_str(),
                    &o.event_ref,
                    e.superseded,
                    &o.tag_id,
                    &o.reason,
                    c.hash.as_str(),
                    &c.evidence,
                    account,
                ]);
            },
            "",
        );
        let done = conn.run(&sql, &values).await?;
        if done.rows_affected != chunk.len() as u64 {
            return Err(store::Error::LedgerShort {
                took: done.rows_affected,
                of: chunk.len(),
            });
        }
    }
    Ok(())
}

pub(crate) async fn write_states(
    conn: &mut impl Exec,
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
            let (sql, values) = super::padded_values(
                &format!(
                    "{insert_sql} consent_state (organization_id, phone_number, lead_id,
                         opted_out, changed_at, source, seq, account_id, rank_at)"
                ),
                9,
                chunk,
                |row, w| {
                    row.extend(args![
                        w.organization_id,
                        w.phone_number,
                        w.lead_id,
                        w.rank.opted_out,
                        Timestamp(w.changed_at),
                        w.source.as_str(),
                        w.seq,
                        account,
                        Timestamp(w.rank.changed_at),
                    ]);
                },
                conflict,
            );
            conn.run(&sql, &values).await?;
        }
    }
    Ok(())
}

pub(crate) async fn suppress(
    conn: &mut impl Exec,
    account: &AccountId,
    opt_outs: &[Suppressing<'_>],
) -> Result<(), crate::store::Error> {
    for chunk in opt_outs.chunks(super::PADDED_ROWS) {
        let (sql, values) = super::padded_values(
            "INSERT INTO suppressions (phone_number, seq, since, account_id)",
            4,
            chunk,
            |row, s| row.extend(args![s.phone_number, s.seq, Timestamp(s.since), account]),
            " ON CONFLICT (phone_number, account_id) DO NOTHING",
        );
        conn.run(&sql, &values).await?;
    }
    Ok(())
}

pub(crate) async fn lift_suppressions(
    conn: &mut impl Exec,
    account: &AccountId,
    opt_ins: &[(&str, DateTime<Utc>)],
) -> Result<(), crate::store::Error> {
    let rows: Vec<(&str, Timestamp)> = opt_ins.iter().map(|(p, at)| (*p, Timestamp(*at))).collect();
    conn.run(
        "DELETE FROM suppressions WHERE rowid IN (
             SELECT s.rowid FROM json_each(?1) AS k
             JOIN suppressions AS s ON s.phone_number = k.value ->> 0 AND s.account_id = ?2
             WHERE s.since < k.value ->> 1)",
        &args![&codec::json_param(&rows)?, account],
    )
    .await?;
    Ok(())
}
