//! The push queue: local changes on their way to the service, one text for both backends
//! (`$N` parameters, times bound as [`Timestamp`](crate::model::Timestamp)); taking the next
//! due push locks its row on PostgreSQL (`SKIP_LOCKED`).

/// Run before taking the next due push: a pending change whose pair has since been set the
/// other way (a later act of the person's announced by webhook or found by a pass) is no
/// longer the person's will, and is superseded rather than sent over it.
pub(crate) const SUPERSEDE_STALE: &str = "UPDATE pushes SET state = 'superseded', finished_at = $1
     WHERE state = 'pending' AND account_id = $2
       AND EXISTS (SELECT 1 FROM consent_state AS s
                   WHERE s.organization_id = pushes.organization_id
                     AND s.phone_number = pushes.phone_number
                     AND s.account_id = pushes.account_id AND s.opted_out <> pushes.opted_out)";

use super::Error;
use super::backend::on_backend;
use super::{Pool, PushStore};
use crate::model::AccountId;
use chrono::{DateTime, Utc};

impl PushStore for Pool {
    async fn push_sent(&self, seq: i64, lead_id: &str, at: DateTime<Utc>) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query(
                "UPDATE pushes SET state = 'sent', lead_id = $2, finished_at = $3, last_error = NULL
                 WHERE seq = $1 AND state = 'pending'",
            )
            .bind(seq)
            .bind(lead_id)
            .bind(crate::model::Timestamp(at))
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn push_failed(&self, seq: i64, error: &str, at: DateTime<Utc>) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query(
                "UPDATE pushes SET state = 'failed', last_error = $2, finished_at = $3
                 WHERE seq = $1 AND state = 'pending'",
            )
            .bind(seq)
            .bind(error)
            .bind(crate::model::Timestamp(at))
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn retry_push_at(&self, seq: i64, error: &str, next: DateTime<Utc>) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query("UPDATE pushes SET last_error = $2, next_attempt_at = $3 WHERE seq = $1")
                .bind(seq)
                .bind(error)
                .bind(crate::model::Timestamp(next))
                .execute(pool)
                .await?;
            Ok(())
        })
    }

    async fn next_push_due(&self, account: &AccountId) -> Result<Option<DateTime<Utc>>, Error> {
        on_backend!(self, |pool| {
            let next: Option<crate::model::Timestamp> = sqlx::query_scalar(
                "SELECT MIN(next_attempt_at) FROM pushes WHERE state = 'pending' AND account_id =
                     $1",
            )
            .bind(account)
            .fetch_one(pool)
            .await?;
            Ok(next.map(crate::model::Timestamp::at))
        })
    }

    async fn take_due_pushes(
        &self,
        account: &AccountId,
        now: DateTime<Utc>,
    ) -> Result<Option<crate::model::DuePush>, Error> {
        on_backend!(self, |pool, dialect| {
            sqlx::query(SUPERSEDE_STALE)
                .bind(crate::model::Timestamp(now))
                .bind(account)
                .execute(pool)
                .await?;
            // Only the leader pushes; while leadership changes hands two pushers may
            // overlap for a moment, and PostgreSQL's row lock keeps them off the same push.
            Ok(sqlx::query_as(&format!(
                "UPDATE pushes SET attempts = attempts + 1, last_attempt_at = $1,
                first_attempt_at = COALESCE(first_attempt_at, $1)
         WHERE seq = (SELECT p.seq FROM pushes AS p
                      WHERE p.state = 'pending' AND p.next_attempt_at <= $1
                        AND p.account_id = $2
                        AND NOT EXISTS (SELECT 1 FROM pushes AS o WHERE o.state = 'pending'
                            AND o.organization_id = p.organization_id
                            AND o.phone_number = p.phone_number AND o.account_id = p.account_id
                            AND o.seq < p.seq)
                      ORDER BY p.seq LIMIT 1{skip_locked})
         RETURNING seq, organization_id, phone_number, opted_out, tag_id, lead_id, {attempts}",
                skip_locked = dialect::SKIP_LOCKED,
                attempts = dialect::ATTEMPTS,
            ))
            .bind(crate::model::Timestamp(now))
            .bind(account)
            .fetch_optional(pool)
            .await?)
        })
    }
}
