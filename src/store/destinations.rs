//! Destinations' outcomes per entry: one text for both backends (`$N` parameters, times
//! bound as `Timestamp`). Their cursor and state are their rows in `subscribers`
//! ([`crate::store::subscribers`]).

use super::Error;
use super::backend::on_backend;
use super::{DestinationStore, Pool};
use crate::model::warehouse::RowExtras;
use crate::model::{
    Ending, EntryOutcome, EntryProgress, OutcomeCounts, OutcomeKind, OutcomeRecord, Timestamp, Told,
};

impl DestinationStore for Pool {
    async fn entry_progress(
        &self,
        name: &str,
        first_seq: i64,
        last_seq: i64,
    ) -> Result<Vec<EntryProgress>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT seq, actions_done, outcome, actions_unknown FROM destination_outcomes
                     WHERE destination = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
            )
            .bind(name)
            .bind(first_seq)
            .bind(last_seq)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn record_progress(
        &self,
        name: &str,
        seq: i64,
        (actions_done, actions_unknown): (i64, i64),
        at: Timestamp,
    ) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query(
                "INSERT INTO destination_outcomes
                         (destination, seq, actions_done, actions_unknown, at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (destination, seq) DO UPDATE SET
                         actions_done = destination_outcomes.actions_done | excluded.actions_done,
                         actions_unknown =
                             destination_outcomes.actions_unknown | excluded.actions_unknown,
                         at = excluded.at",
            )
            .bind(name)
            .bind(seq)
            .bind(actions_done)
            .bind(actions_unknown)
            .bind(at)
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn record_ending(
        &self,
        name: &str,
        seq: i64,
        actions_done: i64,
        ending: Ending<'_>,
        at: Timestamp,
    ) -> Result<(), Error> {
        on_backend!(self, |pool| {
            let mut tx = pool.begin().await?;
            sqlx::query(
                "INSERT INTO destination_outcomes
                         (destination, seq, actions_done, outcome, reason, at, follows)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)
                     ON CONFLICT (destination, seq) DO UPDATE SET
                         actions_done = destination_outcomes.actions_done | excluded.actions_done,
                         outcome = excluded.outcome,
                         reason = excluded.reason,
                         at = excluded.at,
                         follows = excluded.follows",
            )
            .bind(name)
            .bind(seq)
            .bind(actions_done)
            .bind(ending.outcome)
            .bind(ending.reason)
            .bind(at)
            .bind(ending.follows)
            .execute(&mut *tx)
            .await?;
            if let Some((person, opted_out, confirmed)) = ending.told {
                sqlx::query(
                    "INSERT INTO destination_told
                             (destination, person, opted_out, seq, at, confirmed)
                         VALUES ($1, $2, $3, $4, $5, $6)
                         ON CONFLICT (destination, person) DO UPDATE SET
                             opted_out = excluded.opted_out, seq = excluded.seq,
                             at = excluded.at, confirmed = excluded.confirmed",
                )
                .bind(name)
                .bind(person)
                .bind(opted_out)
                .bind(seq)
                .bind(at)
                .bind(confirmed)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    async fn told(&self, name: &str, person: &str) -> Result<Option<Told>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT opted_out, seq, at, confirmed FROM destination_told
                     WHERE destination = $1 AND person = $2",
            )
            .bind(name)
            .bind(person)
            .fetch_optional(pool)
            .await?)
        })
    }

    async fn changes_of_number_between(
        &self,
        phone: &str,
        opted_out: bool,
        (after_seq, before_seq): (i64, i64),
    ) -> Result<Vec<(String, String)>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT account_id, organization_id FROM ledger
                     WHERE phone_number = $1 AND seq > $3 AND seq < $4
                       AND opted_out = $2 AND NOT superseded
                     ORDER BY seq",
            )
            .bind(phone)
            .bind(opted_out)
            .bind(after_seq)
            .bind(before_seq)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn entries_with(&self, seq: i64) -> Result<Vec<(i64, String, bool)>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT s.seq, s.organization_id, s.superseded FROM ledger AS a
                     JOIN ledger AS s ON s.event_ref = a.event_ref
                                     AND s.account_id = a.account_id
                                     AND s.phone_number = a.phone_number
                                     AND s.organization_id <> a.organization_id
                     WHERE a.seq = $1 ORDER BY s.seq",
            )
            .bind(seq)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn outcome_counts(&self, name: &str) -> Result<OutcomeCounts, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT
                         COALESCE(SUM(CASE WHEN outcome = 'sent' THEN 1 ELSE 0 END), 0) AS sent,
                         COALESCE(SUM(CASE WHEN outcome = 'unmatched' THEN 1 ELSE 0 END), 0)
                             AS unmatched,
                         COALESCE(SUM(CASE WHEN outcome = 'refused' THEN 1 ELSE 0 END), 0)
                             AS refused,
                         COALESCE(SUM(CASE WHEN outcome = 'already' THEN 1 ELSE 0 END), 0)
                             AS already,
                         COALESCE(SUM(CASE WHEN outcome = 'through_leads' THEN 1 ELSE 0 END), 0)
                             AS through_leads,
                         COALESCE(SUM(CASE WHEN outcome = 'unconfirmed' THEN 1 ELSE 0 END), 0)
                             AS unconfirmed
                     FROM destination_outcomes WHERE destination = $1",
            )
            .bind(name)
            .fetch_one(pool)
            .await?)
        })
    }

    async fn outcomes(
        &self,
        name: &str,
        state: Option<OutcomeKind>,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<OutcomeRecord>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT o.seq, l.phone_number, l.organization_id, l.lead_id, o.outcome,
                            o.reason, o.at, l.account_id, o.follows
                     FROM destination_outcomes o JOIN ledger l ON l.seq = o.seq
                     WHERE o.destination = $1 AND o.outcome IS NOT NULL
                       AND ($2 IS NULL OR o.outcome = $2) AND o.seq > $3
                     ORDER BY o.seq LIMIT $4",
            )
            .bind(name)
            .bind(state)
            .bind(after_seq)
            .bind(limit)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn outcomes_of_entries(
        &self,
        first_seq: i64,
        last_seq: i64,
    ) -> Result<Vec<EntryOutcome>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT destination, seq, outcome, reason, at, follows FROM destination_outcomes
                     WHERE seq >= $1 AND seq <= $2 AND outcome IS NOT NULL
                     ORDER BY seq, destination",
            )
            .bind(first_seq)
            .bind(last_seq)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn row_extras(&self, first_seq: i64, last_seq: i64) -> Result<Vec<RowExtras>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT seq, hash, CAST(evidence AS TEXT) AS evidence FROM ledger
                     WHERE seq >= $1 AND seq <= $2 ORDER BY seq",
            )
            .bind(first_seq)
            .bind(last_seq)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn record_rows(
        &self,
        name: &str,
        sent: &[i64],
        refused: &[(i64, String)],
        at: Timestamp,
    ) -> Result<(), Error> {
        /// Rows per statement: 5 values each, within SQLite's 32,766 and PostgreSQL's
        /// 65,535 bound values.
        const ROWS: usize = 1_000;
        let rows: Vec<(i64, OutcomeKind, Option<&str>)> = sent
            .iter()
            .map(|seq| (*seq, OutcomeKind::Sent, None))
            .chain(
                refused
                    .iter()
                    .map(|(seq, reason)| (*seq, OutcomeKind::Refused, Some(reason.as_str()))),
            )
            .collect();
        on_backend!(self, |pool| {
            let mut tx = pool.begin().await?;
            for chunk in rows.chunks(ROWS) {
                let mut insert = sqlx::QueryBuilder::new(
                    "INSERT INTO destination_outcomes (destination, seq, outcome, reason, at) ",
                );
                insert.push_values(chunk, |mut row, (seq, outcome, reason)| {
                    row.push_bind(name)
                        .push_bind(*seq)
                        .push_bind(*outcome)
                        .push_bind(*reason)
                        .push_bind(at);
                });
                insert.push(
                    " ON CONFLICT (destination, seq) DO UPDATE SET outcome = excluded.outcome,
                         reason = excluded.reason, at = excluded.at",
                );
                insert.build().execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    async fn forget_unsent(&self, name: &str, from_seq: i64, sent_too: bool) -> Result<u64, Error> {
        on_backend!(self, |pool| {
            let forgotten = sqlx::query(
                "UPDATE destination_outcomes SET outcome = NULL, reason = NULL
                     WHERE destination = $1 AND seq >= $2
                       AND ($3 OR outcome IN ('unmatched', 'refused', 'unconfirmed'))",
            )
            .bind(name)
            .bind(from_seq)
            .bind(sent_too)
            .execute(pool)
            .await?;
            Ok(forgotten.rows_affected())
        })
    }

    async fn sent_after(&self, name: &str, seq: i64) -> Result<bool, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM destination_outcomes
                     WHERE destination = $1 AND seq > $2 AND outcome = 'sent')",
            )
            .bind(name)
            .bind(seq)
            .fetch_one(pool)
            .await?)
        })
    }

    async fn refill(&self, name: &str, from_seq: i64, reason: &str) -> Result<(), Error> {
        on_backend!(self, |pool| {
            let mut tx = pool.begin().await?;
            sqlx::query(
                "UPDATE subscribers SET refill_reason = $3,
                     refill_until = CASE WHEN refill_until > cursor THEN refill_until
                                         ELSE cursor END,
                     cursor = $2 - 1, generation = generation + 1, disabled = FALSE,
                     failures = 0, next_attempt_ms = NULL, last_error = NULL
                 WHERE name = $1",
            )
            .bind(name)
            .bind(from_seq)
            .bind(reason)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE destination_outcomes SET outcome = NULL, reason = NULL
                     WHERE destination = $1 AND seq >= $2",
            )
            .bind(name)
            .bind(from_seq)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    async fn enable_subscriber(&self, name: &str) -> Result<bool, Error> {
        on_backend!(self, |pool| {
            let enabled = sqlx::query(
                "UPDATE subscribers SET disabled = FALSE, failures = 0,
                         next_attempt_ms = NULL, last_error = NULL
                     WHERE name = $1 AND disabled",
            )
            .bind(name)
            .execute(pool)
            .await?;
            Ok(enabled.rows_affected() == 1)
        })
    }
}
