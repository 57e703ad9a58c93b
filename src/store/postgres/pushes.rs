//! The push queue on PostgreSQL. Only the leader pushes; while leadership changes hands
//! two pushers may overlap for a moment, and the row lock keeps them off the same push.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use crate::model::DuePush;
use crate::store::PushStore;

impl PushStore for PgPool {
    async fn take_due_pushes(
        &self,
        account: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<DuePush>, crate::store::Error> {
        sqlx::query(crate::store::pushes::SUPERSEDE_STALE)
            .bind(crate::model::Timestamp(now))
            .bind(account)
            .execute(self)
            .await?;
        Ok(sqlx::query_as(
            "UPDATE pushes SET attempts = attempts + 1, last_attempt_at = $1,
                first_attempt_at = COALESCE(first_attempt_at, $1)
         WHERE seq = (SELECT p.seq FROM pushes AS p
                      WHERE p.state = 'pending' AND p.next_attempt_at <= $1
                        AND p.account_id = $2
                        AND NOT EXISTS (SELECT 1 FROM pushes AS o WHERE o.state = 'pending'
                            AND o.organization_id = p.organization_id
                            AND o.phone_number = p.phone_number AND o.account_id = p.account_id
                            AND o.seq < p.seq)
                      ORDER BY p.seq LIMIT 1 FOR UPDATE SKIP LOCKED)
         RETURNING seq, organization_id, phone_number, opted_out, tag_id, lead_id,
                   attempts::BIGINT AS attempts",
        )
        .bind(now)
        .bind(account)
        .fetch_optional(self)
        .await?)
    }

    crate::store::pushes::shared!();
}
