//! The compliance report's reads: one text for both backends (`$N` parameters), but the
//! messages of many leads and the shared copies of many opt-outs, which each backend reads
//! its fastest way (its `compliance`, never given an empty list).

use super::Error;
use super::backend::on_backend;
use super::{ComplianceStore, Pool};
use crate::model::{Scope, Source, Timestamp};
use chrono::{DateTime, Utc};

impl ComplianceStore for Pool {
    async fn opt_outs(
        &self,
        since: DateTime<Utc>,
        until: DateTime<Utc>,
        scope: Scope<'_>,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::OptOutRow>, Error> {
        on_backend!(self, |pool| {
            // Echoes of local changes are the service confirming those changes, not
            // opt-outs of their own.
            Ok(sqlx::query_as(
                "SELECT l.seq, l.organization_id, l.lead_id, l.phone_number, l.occurred_at,
                            l.recorded_at, l.source, l.superseded, l.account_id, l.event_ref,
                            p.state AS push_state,
                            p.finished_at AS push_finished_at,
                            (SELECT MIN(i.occurred_at) FROM ledger AS i
                             WHERE i.phone_number = l.phone_number
                               AND i.organization_id = l.organization_id
                               AND i.account_id = l.account_id
                               AND NOT i.opted_out AND i.occurred_at > l.occurred_at) AS
                                   opted_in_at,
                            (SELECT s.lead_id FROM consent_state AS s
                             WHERE s.phone_number = l.phone_number
                               AND s.organization_id = l.organization_id
                               AND s.account_id = l.account_id) AS state_lead_id
                     FROM ledger AS l LEFT JOIN pushes AS p ON p.seq = l.seq
                     WHERE l.seq > $4 AND l.opted_out AND l.occurred_at >= $1 AND l.occurred_at < $2
                       AND (CAST($3 AS TEXT) IS NULL OR l.organization_id = $3)
                       AND (CAST($6 AS TEXT) IS NULL OR l.account_id = $6)
                       AND NOT EXISTS (SELECT 1 FROM pushes AS e
                                       WHERE e.echo_ref = l.event_ref
                                         AND e.organization_id = l.organization_id
                                         AND e.phone_number = l.phone_number
                                         AND e.account_id = l.account_id)
                     ORDER BY l.seq LIMIT $5",
            )
            .bind(Timestamp(since))
            .bind(Timestamp(until))
            .bind(scope.organization)
            .bind(after)
            .bind(limit)
            .bind(scope.account)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn unsent_opt_outs(&self, limit: i64) -> Result<Vec<(i64, Timestamp)>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT l.seq, l.occurred_at FROM pushes AS p JOIN ledger AS l ON l.seq = p.seq
                     WHERE p.state IN ('pending', 'failed') AND p.opted_out
                     ORDER BY p.seq LIMIT $1",
            )
            .bind(limit)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn opt_outs_after(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<(i64, (String, String), Source, Timestamp)>, Error> {
        on_backend!(self, |pool| {
            let rows: Vec<(i64, String, String, Source, Timestamp)> = sqlx::query_as(
                "SELECT seq, account_id, organization_id, source, occurred_at FROM ledger
                         WHERE seq > $1 AND opted_out ORDER BY seq LIMIT $2",
            )
            .bind(after)
            .bind(limit)
            .fetch_all(pool)
            .await?;
            Ok(rows
                .into_iter()
                .map(|(seq, account, org, source, at)| (seq, (account, org), source, at))
                .collect())
        })
    }

    async fn messages_of_leads(
        &self,
        lead_ids: &[&str],
    ) -> Result<Vec<crate::model::LeadMessage>, Error> {
        on_backend!(self, |pool, dialect| {
            if lead_ids.is_empty() {
                return Ok(Vec::new());
            }
            dialect::compliance::messages_of_leads(pool, lead_ids).await
        })
    }

    async fn shared_copies(&self, refs: &[String]) -> Result<Vec<crate::model::SharedCopy>, Error> {
        on_backend!(self, |pool, dialect| {
            if refs.is_empty() {
                return Ok(Vec::new());
            }
            Ok(sqlx::query_as(dialect::compliance::SHARED_COPIES)
                .bind(dialect::list(refs)?)
                .fetch_all(pool)
                .await?)
        })
    }
}
