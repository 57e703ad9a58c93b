//! Push queue statements with one text for both backends (`$N` parameters, times bound as
//! [`Timestamp`](crate::model::Timestamp)); taking the next due push, which locks rows on
//! PostgreSQL, is in each backend's `pushes`.

/// Run before taking the next due push: a pending change whose pair has since been set the
/// other way (a later act of the person's announced by webhook or found by a pass) is no
/// longer the person's will, and is superseded rather than sent over it.
pub(crate) const SUPERSEDE_STALE: &str = "UPDATE pushes SET state = 'superseded', finished_at = $1
     WHERE state = 'pending' AND account_id = $2
       AND EXISTS (SELECT 1 FROM consent_state AS s
                   WHERE s.organization_id = pushes.organization_id
                     AND s.phone_number = pushes.phone_number
                     AND s.account_id = pushes.account_id AND s.opted_out <> pushes.opted_out)";

/// The shared methods of `PushStore`, expanded inside each backend's `impl` block.
macro_rules! shared {
    () => {
        async fn push_sent(
            &self,
            seq: i64,
            lead_id: &str,
            at: chrono::DateTime<chrono::Utc>,
        ) -> Result<(), crate::store::Error> {
            sqlx::query(
                "UPDATE pushes SET state = 'sent', lead_id = $2, finished_at = $3, last_error = NULL
                 WHERE seq = $1 AND state = 'pending'",
            )
            .bind(seq)
            .bind(lead_id)
            .bind(crate::model::Timestamp(at))
            .execute(self)
            .await?;
            Ok(())
        }

        async fn push_failed(
            &self,
            seq: i64,
            error: &str,
            at: chrono::DateTime<chrono::Utc>,
        ) -> Result<(), crate::store::Error> {
            sqlx::query(
                "UPDATE pushes SET state = 'failed', last_error = $2, finished_at = $3
                 WHERE seq = $1 AND state = 'pending'",
            )
            .bind(seq)
            .bind(error)
            .bind(crate::model::Timestamp(at))
            .execute(self)
            .await?;
            Ok(())
        }

        async fn retry_push_at(
            &self,
            seq: i64,
            error: &str,
            next: chrono::DateTime<chrono::Utc>,
        ) -> Result<(), crate::store::Error> {
            sqlx::query("UPDATE pushes SET last_error = $2, next_attempt_at = $3 WHERE seq = $1")
                .bind(seq)
                .bind(error)
                .bind(crate::model::Timestamp(next))
                .execute(self)
                .await?;
            Ok(())
        }

        async fn next_push_due(
            &self,
            account: &str,
        ) -> Result<Option<chrono::DateTime<chrono::Utc>>, crate::store::Error> {
            let next: Option<crate::model::Timestamp> = sqlx::query_scalar(
                "SELECT MIN(next_attempt_at) FROM pushes WHERE state = 'pending' AND account_id = $1",
            )
            .bind(account)
            .fetch_one(self)
            .await?;
            Ok(next.map(crate::model::Timestamp::at))
        }
    };
}

pub(crate) use shared;
