//! The push queue on SQLite: local changes on their way to the service.

use crate::model::Timestamp;
use crate::store::PushStore;
use crate::store::codec;
use chrono::{DateTime, Utc};
use sqlx::SqlitePool;

use crate::model::DuePush;

impl PushStore for SqlitePool {
    async fn take_due_pushes(&self, now: DateTime<Utc>) -> Result<Option<DuePush>, sqlx::Error> {
        sqlx::query_as(
            "UPDATE pushes SET attempts = attempts + 1, last_attempt_at = ?1,
                first_attempt_at = COALESCE(first_attempt_at, ?1)
         WHERE seq = (SELECT p.seq FROM pushes AS p
                      WHERE p.state = 'pending' AND p.next_attempt_at <= ?1
                        AND NOT EXISTS (SELECT 1 FROM pushes AS o WHERE o.state = 'pending'
                            AND o.organization_id = p.organization_id
                            AND o.phone_number = p.phone_number AND o.seq < p.seq)
                      ORDER BY p.seq LIMIT 1)
         RETURNING seq, organization_id, phone_number, opted_out, tag_id, lead_id, attempts",
        )
        .bind(codec::timestamp(now))
        .fetch_optional(self)
        .await
    }

    async fn push_sent(
        &self,
        seq: i64,
        lead_id: &str,
        at: DateTime<Utc>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE pushes SET state = 'sent', lead_id = ?2, finished_at = ?3, last_error = NULL
         WHERE seq = ?1 AND state = 'pending'",
        )
        .bind(seq)
        .bind(lead_id)
        .bind(codec::timestamp(at))
        .execute(self)
        .await?;
        Ok(())
    }

    async fn push_failed(
        &self,
        seq: i64,
        error: &str,
        at: DateTime<Utc>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE pushes SET state = 'failed', last_error = ?2, finished_at = ?3
         WHERE seq = ?1 AND state = 'pending'",
        )
        .bind(seq)
        .bind(error)
        .bind(codec::timestamp(at))
        .execute(self)
        .await?;
        Ok(())
    }

    async fn retry_push_at(
        &self,
        seq: i64,
        error: &str,
        next: DateTime<Utc>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query("UPDATE pushes SET last_error = ?2, next_attempt_at = ?3 WHERE seq = ?1")
            .bind(seq)
            .bind(error)
            .bind(codec::timestamp(next))
            .execute(self)
            .await?;
        Ok(())
    }

    async fn next_push_due(&self) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        let next: Option<Timestamp> =
            sqlx::query_scalar("SELECT MIN(next_attempt_at) FROM pushes WHERE state = 'pending'")
                .fetch_one(self)
                .await?;
        Ok(next.map(Timestamp::at))
    }
}
