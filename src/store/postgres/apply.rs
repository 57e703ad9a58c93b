//! The apply path's statements on PostgreSQL, where several replicas apply at once.
//!
//! Two guarantees make that safe:
//! - Writers of the same number take its advisory lock first ([`ApplyTx::lock_numbers`]),
//!   in one order, for the rest of their transaction. So the states, holders and pushes
//!   they read stay as read until they commit, and last-writer-wins decides over the truth.
//! - Ledger seqs come from the `ledger_head` row, whose lock the appender holds until it
//!   commits (see the migration). So seqs are gapless and become visible in order: a
//!   follower of the change feed never skips a lower seq that commits late.
//!
//! One file over 400 lines on purpose: a batch's statements in the order the apply path
//! runs them in one transaction, the locks the first ones take held by the last.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use crate::model::AccountId;
use crate::model::PushedChange;
use crate::model::Timestamp;
use crate::store::{self, NewEntry, NewMessage, StateWrite, Suppressing};

/// One column of `rows`, for an array parameter.
pub(super) fn column<'a, T, U>(rows: &'a [T], f: impl FnMut(&'a T) -> U) -> Vec<U> {
    rows.iter().map(f).collect()
}

/// The first key of the advisory locks on numbers (the second is the number's hash): the
/// two-key space, apart from the one-key space of the migrator's lock.
const NUMBER_LOCKS: i32 = 0x6f73_6e00;

pub(crate) async fn settle_outbox(
    conn: &mut PgConnection,
    // Claimed rows are marked applied by the claim itself (`outbox::claim_pending`).
    _applied: &[i64],
    quarantined: &[(i64, String)],
    _now: DateTime<Utc>,
) -> Result<(), crate::store::Error> {
    if !quarantined.is_empty() {
        let (ids, reasons): (Vec<i64>, Vec<&str>) =
            quarantined.iter().map(|(id, r)| (*id, r.as_str())).unzip();
        sqlx::query(
            "UPDATE outbox SET state = 'quarantined', attempts = attempts + 1, last_error =
                 k.reason,
                 applied_at = NULL
             FROM unnest($1::int8[], $2::text[]) AS k (id, reason) WHERE outbox.id = k.id",
        )
        .bind(ids)
        .bind(reasons)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

pub(crate) async fn sent_after_opt_out(
    conn: &mut PgConnection,
    account: &AccountId,
    messages: &[NewMessage<'_>],
) -> Result<i64, crate::store::Error> {
    let sql = store::sent_after_opt_out(
        "unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[])
         AS k (id, lead, created, after)",
        "$5",
    );
    Ok(sqlx::query_scalar(&sql)
        .bind(column(messages, |m| m.id))
        .bind(column(messages, |m| m.lead_id))
        .bind(column(messages, |m| m.created.at()))
        .bind(column(messages, |m| m.after.at()))
        .bind(account)
        .fetch_one(&mut *conn)
        .await?)
}

pub(crate) async fn suppressions(
    conn: &mut PgConnection,
    account: &AccountId,
    phones: &[&str],
) -> Result<Vec<(String, i64, Timestamp)>, crate::store::Error> {
    Ok(sqlx::query_as(
        "SELECT phone_number, seq, since FROM suppressions
         WHERE phone_number = ANY($1) AND account_id = $2",
    )
    .bind(phones)
    .bind(account)
    .fetch_all(&mut *conn)
    .await?)
}

pub(crate) async fn lock_numbers(
    conn: &mut PgConnection,
    phones: &[&str],
) -> Result<(), crate::store::Error> {
    // Sorted, so two transactions locking overlapping sets cannot deadlock: volatile
    // functions of the select list run after the ORDER BY.
    sqlx::query(
        "SELECT pg_advisory_xact_lock($1, h)
         FROM (SELECT DISTINCT hashtext(p) AS h FROM unnest($2::text[]) AS p) AS k
         ORDER BY h",
    )
    .bind(NUMBER_LOCKS)
    .bind(phones)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub(crate) async fn locate_leads(
    conn: &mut PgConnection,
    account: &AccountId,
    lead_ids: &[&str],
) -> Result<Vec<(String, String, String)>, crate::store::Error> {
    Ok(sqlx::query_as(
        "SELECT id, organization_id, phone_number FROM leads WHERE id = ANY($1) AND account_id = $2
         UNION ALL
         SELECT lead_id, organization_id, phone_number FROM consent_state
         WHERE lead_id = ANY($1) AND account_id = $2",
    )
    .bind(lead_ids)
    .bind(account)
    .fetch_all(&mut *conn)
    .await?)
}

pub(crate) async fn holders_of(
    conn: &mut PgConnection,
    account: &AccountId,
    phones: &[&str],
) -> Result<Vec<(String, String, Option<String>)>, crate::store::Error> {
    Ok(sqlx::query_as(
        "SELECT phone_number, organization_id, lead_id FROM consent_state
         WHERE phone_number = ANY($1) AND account_id = $2",
    )
    .bind(phones)
    .bind(account)
    .fetch_all(&mut *conn)
    .await?)
}

pub(crate) async fn pushed_changes(
    conn: &mut PgConnection,
    account: &AccountId,
    keys: &[(&str, &str)],
) -> Result<Vec<PushedChange>, crate::store::Error> {
    let (orgs, phones): (Vec<&str>, Vec<&str>) = keys.iter().copied().unzip();
    let sql = store::pushed_changes(
        "(SELECT DISTINCT org, phone FROM unnest($1::text[], $2::text[]) AS k (org, phone)) AS k
         JOIN pushes AS p ON p.organization_id = k.org AND p.phone_number = k.phone
                         AND p.account_id = $3",
        // Both times are set once a push is attempted; here they decode as times, never NULL.
        "
           AND p.first_attempt_at IS NOT NULL AND p.last_attempt_at IS NOT NULL",
    );
    Ok(sqlx::query_as(&sql)
        .bind(orgs)
        .bind(phones)
        .bind(account)
        .fetch_all(&mut *conn)
        .await?)
}

pub(crate) async fn unsent_opt_outs_of(
    conn: &mut PgConnection,
    account: &AccountId,
    keys: &[(&str, &str)],
) -> Result<Vec<(String, String)>, crate::store::Error> {
    let (orgs, phones): (Vec<&str>, Vec<&str>) = keys.iter().copied().unzip();
    Ok(sqlx::query_as(
        "SELECT DISTINCT p.organization_id, p.phone_number
         FROM unnest($1::text[], $2::text[]) AS k (org, phone)
         JOIN pushes AS p ON p.organization_id = k.org AND p.phone_number = k.phone
                         AND p.account_id = $3
         WHERE p.state = 'pending' AND p.opted_out",
    )
    .bind(orgs)
    .bind(phones)
    .bind(account)
    .fetch_all(&mut *conn)
    .await?)
}

pub(crate) async fn consent_states(
    conn: &mut PgConnection,
    account: &AccountId,
    keys: &[(&str, &str)],
) -> Result<Vec<store::StateRow>, crate::store::Error> {
    let (orgs, phones): (Vec<&str>, Vec<&str>) = keys.iter().copied().unzip();
    Ok(sqlx::query_as(
        "SELECT s.organization_id, s.phone_number, COALESCE(s.rank_at, s.changed_at) AS changed_at,
                s.opted_out, s.lead_id, s.seq, s.source
         FROM unnest($1::text[], $2::text[]) AS k (org, phone)
         JOIN consent_state AS s ON s.phone_number = k.phone AND s.organization_id = k.org
                                AND s.account_id = $3",
    )
    .bind(orgs)
    .bind(phones)
    .bind(account)
    .fetch_all(&mut *conn)
    .await?)
}

pub(crate) async fn states_of_numbers(
    conn: &mut PgConnection,
    account: &AccountId,
    phones: &[&str],
) -> Result<Vec<store::StateRow>, crate::store::Error> {
    // A join, not `= ANY($1)`: planned without the table's statistics, a kept statement
    // could test every row against the whole list (see `store::statistics`).
    Ok(sqlx::query_as(
        "SELECT s.organization_id, s.phone_number, COALESCE(s.rank_at, s.changed_at) AS changed_at,
                s.opted_out, s.lead_id, s.seq, s.source
         FROM unnest($1::text[]) AS k (phone)
         JOIN consent_state AS s ON s.phone_number = k.phone AND s.account_id = $2",
    )
    .bind(phones)
    .bind(account)
    .fetch_all(&mut *conn)
    .await?)
}

pub(crate) async fn append_ledger(
    conn: &mut PgConnection,
    account: &AccountId,
    entries: &[NewEntry<'_>],
    recorded_at: DateTime<Utc>,
) -> Result<Vec<Option<i64>>, crate::store::Error> {
    // Which are recorded already: the numbers are locked, so no other transaction can
    // record them before this one commits.
    let recorded = recorded_already(conn, account, entries).await?;
    let new = store::unrecorded(entries, &recorded);
    let mut seqs = vec![None; entries.len()];
    if new.is_empty() {
        return Ok(seqs);
    }
    // Taken last: the head stays locked from here to the commit. It keeps the last
    // entry's hash too, so the chain goes on in seq order at no extra round trip.
    let (last, head_hash): (i64, String) =
        sqlx::query_as("UPDATE ledger_head SET seq = seq + $1 RETURNING seq, hash")
            .bind(new.len() as i64)
            .fetch_one(&mut *conn)
            .await?;
    let head_seq = last - new.len() as i64;
    let rows = store::chain_after(
        account,
        entries,
        &new,
        head_seq,
        head_hash,
        Timestamp(recorded_at),
    )?;
    for (row, &i) in rows.iter().zip(&new) {
        seqs[i] = Some(row.seq);
    }
    let Some(last_hash) = rows.last().map(|row| row.hash.as_str()) else {
        return Ok(seqs);
    };
    sqlx::query(
        "WITH head AS (UPDATE ledger_head SET hash = $13)
         INSERT INTO ledger (seq, organization_id, lead_id, phone_number, opted_out,
             occurred_at, recorded_at, source, event_ref, superseded, tag_id, reason, hash,
             evidence, account_id)
         SELECT $1 + k.i - 1, k.o, k.l, k.p, k.out, k.at, $2, k.src, k.r, k.sup, k.tag, k.why,
                k.hash, k.evidence::jsonb, $16
         FROM unnest($3::text[], $4::text[], $5::text[], $6::bool[], $7::timestamptz[],
                     $8::text[], $9::text[], $10::bool[], $11::text[], $12::text[],
                     $14::text[], $15::text[])
              WITH ORDINALITY AS k (o, l, p, out, at, src, r, sup, tag, why, hash, evidence, i)",
    )
    .bind(head_seq + 1)
    .bind(crate::model::to_millis(recorded_at))
    .bind(column(&rows, |r| {
        r.entry.observation.organization_id.as_str()
    }))
    .bind(column(&rows, |r| r.entry.lead_id))
    .bind(column(&rows, |r| r.entry.observation.phone_number.as_str()))
    .bind(column(&rows, |r| r.entry.observation.opted_out))
    .bind(column(&rows, |r| {
        crate::model::to_millis(r.entry.observation.occurred_at)
    }))
    .bind(column(&rows, |r| r.entry.observation.source.as_str()))
    .bind(column(&rows, |r| r.entry.observation.event_ref.as_str()))
    .bind(column(&rows, |r| r.entry.superseded))
    .bind(column(&rows, |r| r.entry.observation.tag_id.as_deref()))
    .bind(column(&rows, |r| r.entry.observation.reason.as_deref()))
    .bind(last_hash)
    .bind(column(&rows, |r| r.hash.as_str()))
    .bind(column(&rows, |r| r.evidence.as_deref()))
    .bind(account)
    .execute(&mut *conn)
    .await?;
    // The insert notifies every replica's listener at commit (`store/listen.rs`),
    // by the trigger `ledger_notify`.
    Ok(seqs)
}

pub(crate) async fn write_states(
    conn: &mut PgConnection,
    account: &AccountId,
    states: &[StateWrite<'_>],
) -> Result<(), crate::store::Error> {
    sqlx::query(
        "INSERT INTO consent_state (organization_id, phone_number, lead_id, opted_out,
             changed_at, source, seq,
                                    rank_at, account_id)
         SELECT *, $9 FROM unnest($1::text[], $2::text[], $3::text[], $4::bool[], $5::timestamptz[],
                                  $6::text[], $7::int8[], $8::timestamptz[])
         ON CONFLICT (phone_number, organization_id, account_id) DO UPDATE SET
             lead_id = COALESCE(excluded.lead_id, consent_state.lead_id),
             opted_out = excluded.opted_out, changed_at = excluded.changed_at,
             source = excluded.source, seq = excluded.seq, rank_at = excluded.rank_at
         WHERE (excluded.rank_at, excluded.opted_out)
             > (COALESCE(consent_state.rank_at, consent_state.changed_at),
                 consent_state.opted_out)",
    )
    .bind(states.iter().map(|w| w.organization_id).collect::<Vec<_>>())
    .bind(states.iter().map(|w| w.phone_number).collect::<Vec<_>>())
    .bind(states.iter().map(|w| w.lead_id).collect::<Vec<_>>())
    .bind(states.iter().map(|w| w.rank.opted_out).collect::<Vec<_>>())
    .bind(states.iter().map(|w| w.changed_at).collect::<Vec<_>>())
    .bind(states.iter().map(|w| w.source.as_str()).collect::<Vec<_>>())
    .bind(states.iter().map(|w| w.seq).collect::<Vec<_>>())
    .bind(states.iter().map(|w| w.rank.changed_at).collect::<Vec<_>>())
    .bind(account)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub(crate) async fn suppress(
    conn: &mut PgConnection,
    account: &AccountId,
    opt_outs: &[Suppressing<'_>],
) -> Result<(), crate::store::Error> {
    sqlx::query(
        "INSERT INTO suppressions (phone_number, seq, since, account_id)
         SELECT *, $4 FROM unnest($1::text[], $2::int8[], $3::timestamptz[])
         ON CONFLICT (phone_number, account_id) DO NOTHING",
    )
    .bind(column(opt_outs, |s| s.phone_number))
    .bind(column(opt_outs, |s| s.seq))
    .bind(column(opt_outs, |s| s.since))
    .bind(account)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub(crate) async fn lift_suppressions(
    conn: &mut PgConnection,
    account: &AccountId,
    opt_ins: &[(&str, DateTime<Utc>)],
) -> Result<(), crate::store::Error> {
    sqlx::query(
        "DELETE FROM suppressions AS s USING unnest($1::text[], $2::timestamptz[]) AS k (phone, at)
         WHERE s.phone_number = k.phone AND s.since < k.at AND s.account_id = $3",
    )
    .bind(column(opt_ins, |(p, _)| *p))
    .bind(column(opt_ins, |(_, at)| *at))
    .bind(account)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The indices of `entries` whose event the ledger has already recorded for their
/// (organization, number).
async fn recorded_already(
    conn: &mut PgConnection,
    account: &AccountId,
    entries: &[NewEntry<'_>],
) -> Result<HashSet<usize>, crate::store::Error> {
    let refs = column(entries, |e| e.observation.event_ref.as_str());
    let orgs = column(entries, |e| e.observation.organization_id.as_str());
    let phones = column(entries, |e| e.observation.phone_number.as_str());
    let recorded: Vec<i64> = sqlx::query_scalar(
        "SELECT k.i FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS k (r, o,
             p, i)
         JOIN ledger AS l ON l.event_ref = k.r AND l.organization_id = k.o AND l.phone_number = k.p
                         AND l.account_id = $4",
    )
    .bind(&refs)
    .bind(&orgs)
    .bind(&phones)
    .bind(account)
    .fetch_all(&mut *conn)
    .await?;
    Ok(recorded
        .into_iter()
        .filter_map(|i| usize::try_from(i - 1).ok())
        .collect())
}
