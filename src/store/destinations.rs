//! Destinations' outcomes per entry: one text for both backends (`$N` parameters, times
//! bound as `Timestamp`). Their cursor and state are their rows in `subscribers`
//! ([`crate::store::subscribers`]).

/// The destination statements for the pool type `$pool`.
macro_rules! statements {
    ($pool:ty) => {
        use crate::model::{
            EntryOutcome, EntryProgress, OutcomeCounts, OutcomeKind, OutcomeRecord, Timestamp,
        };

        impl $crate::store::DestinationStore for $pool {
            async fn entry_progress(
                &self,
                name: &str,
                first_seq: i64,
                last_seq: i64,
            ) -> Result<Vec<EntryProgress>, crate::store::Error> {
                Ok(sqlx::query_as(
                    "SELECT seq, actions_done, outcome FROM destination_outcomes
                     WHERE destination = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
                )
                .bind(name)
                .bind(first_seq)
                .bind(last_seq)
                .fetch_all(self)
                .await?)
            }

            async fn record_progress(
                &self,
                name: &str,
                seq: i64,
                actions_done: i64,
                outcome: Option<(OutcomeKind, Option<&str>)>,
                at: Timestamp,
            ) -> Result<(), crate::store::Error> {
                let (outcome, reason) = outcome.unzip();
                sqlx::query(
                    "INSERT INTO destination_outcomes
                         (destination, seq, actions_done, outcome, reason, at)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (destination, seq) DO UPDATE SET
                         actions_done = destination_outcomes.actions_done | excluded.actions_done,
                         outcome = COALESCE(excluded.outcome, destination_outcomes.outcome),
                         reason = COALESCE(excluded.reason, destination_outcomes.reason),
                         at = excluded.at",
                )
                .bind(name)
                .bind(seq)
                .bind(actions_done)
                .bind(outcome)
                .bind(reason.flatten())
                .bind(at)
                .execute(self)
                .await?;
                Ok(())
            }

            async fn outcome_counts(&self, name: &str) -> Result<OutcomeCounts, crate::store::Error> {
                Ok(sqlx::query_as(
                    "SELECT
                         COALESCE(SUM(CASE WHEN outcome = 'sent' THEN 1 ELSE 0 END), 0) AS sent,
                         COALESCE(SUM(CASE WHEN outcome = 'unmatched' THEN 1 ELSE 0 END), 0)
                             AS unmatched,
                         COALESCE(SUM(CASE WHEN outcome = 'refused' THEN 1 ELSE 0 END), 0)
                             AS refused
                     FROM destination_outcomes WHERE destination = $1",
                )
                .bind(name)
                .fetch_one(self)
                .await?)
            }

            async fn outcomes(
                &self,
                name: &str,
                state: Option<OutcomeKind>,
                after_seq: i64,
                limit: i64,
            ) -> Result<Vec<OutcomeRecord>, crate::store::Error> {
                Ok(sqlx::query_as(
                    "SELECT o.seq, l.phone_number, l.organization_id, l.lead_id, o.outcome,
                            o.reason, o.at, l.account_id
                     FROM destination_outcomes o JOIN ledger l ON l.seq = o.seq
                     WHERE o.destination = $1 AND o.outcome IS NOT NULL
                       AND ($2 IS NULL OR o.outcome = $2) AND o.seq > $3
                     ORDER BY o.seq LIMIT $4",
                )
                .bind(name)
                .bind(state)
                .bind(after_seq)
                .bind(limit)
                .fetch_all(self)
                .await?)
            }

            async fn outcomes_of_entries(
                &self,
                first_seq: i64,
                last_seq: i64,
            ) -> Result<Vec<EntryOutcome>, crate::store::Error> {
                Ok(sqlx::query_as(
                    "SELECT destination, seq, outcome, reason, at FROM destination_outcomes
                     WHERE seq >= $1 AND seq <= $2 AND outcome IS NOT NULL
                     ORDER BY seq, destination",
                )
                .bind(first_seq)
                .bind(last_seq)
                .fetch_all(self)
                .await?)
            }

            async fn forget_unsent(&self, name: &str, from_seq: i64) -> Result<u64, crate::store::Error> {
                let forgotten = sqlx::query(
                    "UPDATE destination_outcomes SET outcome = NULL, reason = NULL
                     WHERE destination = $1 AND seq >= $2
                       AND outcome IN ('unmatched', 'refused')",
                )
                .bind(name)
                .bind(from_seq)
                .execute(self)
                .await?;
                Ok(forgotten.rows_affected())
            }

            async fn enable_subscriber(&self, name: &str) -> Result<bool, crate::store::Error> {
                let enabled = sqlx::query(
                    "UPDATE subscribers SET disabled = FALSE, failures = 0,
                         next_attempt_ms = NULL, last_error = NULL
                     WHERE name = $1 AND disabled",
                )
                .bind(name)
                .execute(self)
                .await?;
                Ok(enabled.rows_affected() == 1)
            }
        }
    };
}
pub(crate) use statements;
