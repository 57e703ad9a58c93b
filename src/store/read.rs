//! Read statements with one text for both backends (`$N` parameters, `CAST(... AS TEXT)`
//! where PostgreSQL needs a parameter's type): a number's history, its entries for the
//! evidence bundle, the change feed and the kept rejected deliveries. What differs is in
//! each backend's `read`, side by side: `COLLATE` follows every text column a listing is
//! ordered by (PostgreSQL sorts bytewise as SQLite does with `COLLATE "C"`), `LEAD_JSON`
//! selects a lead as the v3 resource and `MESSAGE` a message, `LOOKUP` reads the states of
//! many numbers in their order; `status`'s counts, the minute of a delivery, and the
//! stored deliveries as records.

use std::sync::OnceLock;

use super::Error;
use super::backend::on_backend;
use super::{EvidenceStore, ExportStore, Pool, ReadStore};
use crate::model::AccountId;
use chrono::{DateTime, Utc};

/// What a lead is selected from: the mirror's leads `l` with their consent state `s`.
const LEADS: &str = "
        FROM leads AS l LEFT JOIN consent_state AS s
        ON s.organization_id = l.organization_id AND s.phone_number = l.phone_number
       AND s.account_id = l.account_id";

impl ReadStore for Pool {
    async fn current(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<crate::model::ConsentRecord>, Error> {
        on_backend!(self, |pool, dialect| {
            Ok(sqlx::query_as(&format!(
                "SELECT organization_id, lead_id, phone_number, opted_out, changed_at, source,
                     account_id
                 FROM consent_current
                 WHERE phone_number = $1 AND (CAST($2 AS TEXT) IS NULL OR organization_id = $2)
                 ORDER BY account_id{collate}, organization_id{collate}",
                collate = dialect::read::COLLATE
            ))
            .bind(phone)
            .bind(organization)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn lookup(
        &self,
        phones: &[&str],
        organization: Option<&str>,
    ) -> Result<Vec<crate::model::ConsentRecord>, Error> {
        on_backend!(self, |pool, dialect| {
            Ok(sqlx::query_as(dialect::read::LOOKUP)
                .bind(dialect::list(phones)?)
                .bind(organization)
                .fetch_all(pool)
                .await?)
        })
    }

    async fn suppression(
        &self,
        phone: &str,
        account: Option<&str>,
    ) -> Result<Option<crate::model::Suppression>, Error> {
        on_backend!(self, |pool| {
            let row: Option<(i64, crate::model::Timestamp)> = sqlx::query_as(
                "SELECT seq, since FROM suppressions
                 WHERE phone_number = $1 AND (CAST($2 AS TEXT) IS NULL OR account_id = $2)
                 ORDER BY since LIMIT 1",
            )
            .bind(phone)
            .bind(account)
            .fetch_optional(pool)
            .await?;
            Ok(row.map(|(seq, since)| crate::model::Suppression { seq, since }))
        })
    }

    async fn history(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<crate::model::LedgerEntry>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(concat!(
                "SELECT ",
                crate::store::columns::ledger_columns!(),
                " FROM ledger
                 WHERE phone_number = $1 AND (CAST($2 AS TEXT) IS NULL OR organization_id = $2)
                 ORDER BY seq"
            ))
            .bind(phone)
            .bind(organization)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn changes(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::LedgerEntry>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(concat!(
                "SELECT ",
                crate::store::columns::ledger_columns!(),
                " FROM ledger WHERE seq > $1 ORDER BY seq LIMIT $2"
            ))
            .bind(after)
            .bind(limit)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn backlog(&self) -> Result<crate::model::Backlog, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT (SELECT COUNT(*) FROM outbox WHERE state = 'pending') AS pending,
                        (SELECT MIN(received_at) FROM outbox WHERE state = 'pending')
                            AS oldest_pending_at,
                        (SELECT COUNT(*) FROM outbox WHERE state = 'quarantined') AS quarantined,
                        (SELECT COUNT(*) FROM pushes WHERE state = 'pending') AS pushes_pending",
            )
            .fetch_one(pool)
            .await?)
        })
    }

    async fn rejected(&self) -> Result<Vec<crate::model::KeptRejection>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT id, received_at, reason, headers, body, account_id FROM rejected_deliveries
                 ORDER BY id DESC",
            )
            .fetch_all(pool)
            .await?)
        })
    }

    async fn status(&self) -> Result<crate::model::Status, Error> {
        on_backend!(self, |pool, dialect| {
            let (backlog, quarantined, applied, oldest_pending_at): (
                i64,
                i64,
                i64,
                Option<crate::model::Timestamp>,
            ) = sqlx::query_as(dialect::read::OUTBOX_COUNTS)
                .fetch_one(pool)
                .await?;
            let (ledger_entries, leads, messages, open_messages): (i64, i64, i64, i64) =
                sqlx::query_as(&format!(
                    "SELECT (SELECT COALESCE(MAX(seq), 0) FROM ledger), (SELECT COUNT(*) FROM
                         leads),
            (SELECT COUNT(*) FROM messages), (SELECT COUNT(*) FROM messages WHERE {})",
                    dialect::NOT_TERMINAL
                ))
                .fetch_one(pool)
                .await?;
            let last_error = sqlx::query_as(
                "SELECT updated_at AS at, value AS message FROM daemon_state WHERE key =
                     'last_error'",
            )
            .fetch_optional(pool)
            .await?;
            let reconciliation = sqlx::query_as(&format!(
                "SELECT organization_id, finished_at, leads_scanned, repaired, error
                 FROM reconcile_organizations ORDER BY organization_id{}",
                dialect::read::COLLATE
            ))
            .fetch_all(pool)
            .await?;
            let reconciliation_in_progress = sqlx::query_scalar(&format!(
                "SELECT organization_id FROM reconcile_checkpoints ORDER BY organization_id{}",
                dialect::read::COLLATE
            ))
            .fetch_all(pool)
            .await?;
            Ok(crate::model::Status {
                backlog,
                quarantined,
                applied,
                ledger_entries,
                leads,
                messages,
                open_messages,
                oldest_pending_at,
                last_error,
                reconciliation,
                reconciliation_in_progress,
                pushes: self.push_counts().await?,
                replicas: Vec::new(),
                chain_head: crate::model::chain::ChainHead::empty(),
                subscribers: Vec::new(),
                registration_check: None,
            })
        })
    }

    async fn ledger_accounts(&self) -> Result<Vec<String>, Error> {
        on_backend!(self, |pool, dialect| {
            Ok(sqlx::query_scalar(&format!(
                "SELECT DISTINCT account_id FROM ledger ORDER BY account_id{}",
                dialect::read::COLLATE
            ))
            .fetch_all(pool)
            .await?)
        })
    }

    async fn push_counts(&self) -> Result<crate::model::PushCounts, Error> {
        on_backend!(self, |pool, dialect| {
            Ok(sqlx::query_as(dialect::read::PUSH_COUNTS)
                .fetch_one(pool)
                .await?)
        })
    }

    async fn lead(
        &self,
        id: &str,
        account: &AccountId,
    ) -> Result<Option<serde_json::Value>, Error> {
        on_backend!(self, |pool, dialect| {
            let found: Option<String> = sqlx::query_scalar(&format!(
                "SELECT {}{LEADS} WHERE l.id = $1 AND l.account_id = $2",
                dialect::read::LEAD_JSON
            ))
            .bind(id)
            .bind(account)
            .fetch_optional(pool)
            .await?;
            Ok(found
                .as_deref()
                .map(crate::store::codec::json_decoded)
                .transpose()?)
        })
    }

    async fn leads(
        &self,
        phone: &str,
        organization: Option<&str>,
        account: Option<&str>,
    ) -> Result<Vec<serde_json::Value>, Error> {
        on_backend!(self, |pool, dialect| {
            let rows: Vec<String> = sqlx::query_scalar(&format!(
                "SELECT {lead_json}{LEADS} WHERE l.phone_number = $1
                   AND (CAST($2 AS TEXT) IS NULL OR l.organization_id = $2)
                   AND (CAST($3 AS TEXT) IS NULL OR l.account_id = $3)
                 ORDER BY l.account_id{collate}, l.organization_id{collate}, l.id{collate}",
                lead_json = dialect::read::LEAD_JSON,
                collate = dialect::read::COLLATE
            ))
            .bind(phone)
            .bind(organization)
            .bind(account)
            .fetch_all(pool)
            .await?;
            Ok(rows
                .iter()
                .map(|text| crate::store::codec::json_decoded(text))
                .collect::<Result<_, sqlx::Error>>()?)
        })
    }

    async fn deliveries_per_minute(
        &self,
        since: DateTime<Utc>,
    ) -> Result<Vec<(String, i64)>, Error> {
        on_backend!(self, |pool, dialect| {
            Ok(sqlx::query_as(&format!(
                "SELECT {} AS minute, COUNT(*) FROM outbox
                 WHERE id > COALESCE((SELECT id FROM outbox WHERE received_at < $1
                                      ORDER BY id DESC LIMIT 1), 0)
                   AND received_at >= $1
                 GROUP BY minute ORDER BY minute",
                dialect::read::MINUTE
            ))
            .bind(crate::model::Timestamp(since))
            .fetch_all(pool)
            .await?)
        })
    }

    async fn events(
        &self,
        quarantined_only: bool,
        limit: i64,
    ) -> Result<Vec<crate::model::StoredEvent>, Error> {
        on_backend!(self, |pool, dialect| {
            dialect::read::events(pool, quarantined_only, limit).await
        })
    }

    async fn message(
        &self,
        id: &str,
        account: &AccountId,
    ) -> Result<Option<serde_json::Value>, Error> {
        on_backend!(self, |pool, dialect| {
            let found = sqlx::query_as(&format!(
                "SELECT {}
             FROM messages WHERE id = $1 AND account_id = $2",
                dialect::read::MESSAGE
            ))
            .bind(id)
            .bind(account)
            .fetch_optional(pool)
            .await?;
            dialect::read::message_json(found)
        })
    }
}

impl ExportStore for Pool {
    fn export_consent(
        &self,
        since: i64,
    ) -> futures::stream::BoxStream<'_, Result<crate::model::ConsentRecord, Error>> {
        on_backend!(self, |pool, dialect| {
            use futures::{StreamExt as _, TryStreamExt as _};
            // Built once per backend: the stream borrows its statement.
            static SQL: OnceLock<String> = OnceLock::new();
            let sql = SQL.get_or_init(|| {
                format!(
                    "SELECT organization_id, lead_id, phone_number, opted_out, changed_at,
                         source, account_id
                     FROM consent_state WHERE seq > $1
                     ORDER BY account_id{collate}, organization_id{collate}, phone_number{collate}",
                    collate = dialect::read::COLLATE
                )
            });
            sqlx::query_as(sql)
                .bind(since)
                .fetch(pool)
                .map_err(Into::into)
                .boxed()
        })
    }

    fn export_ledger(
        &self,
        since: i64,
    ) -> futures::stream::BoxStream<'_, Result<crate::model::LedgerEntry, Error>> {
        on_backend!(self, |pool| {
            use futures::{StreamExt as _, TryStreamExt as _};
            sqlx::query_as(concat!(
                "SELECT ",
                crate::store::columns::ledger_columns!(),
                " FROM ledger WHERE seq > $1 ORDER BY seq"
            ))
            .bind(since)
            .fetch(pool)
            .map_err(Into::into)
            .boxed()
        })
    }
}

impl EvidenceStore for Pool {
    async fn evidence_entries(
        &self,
        phone: &str,
        organization: Option<&str>,
    ) -> Result<Vec<crate::model::StoredEntry>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(concat!(
                "SELECT ",
                crate::store::columns::ledger_columns!(),
                ", tag_id, reason, hash, CAST(evidence AS TEXT) AS evidence,
                        (SELECT b.hash FROM ledger AS b WHERE b.seq < ledger.seq
                         ORDER BY b.seq DESC LIMIT 1) AS prev_hash
                     FROM ledger
                     WHERE phone_number = $1 AND (CAST($2 AS TEXT) IS NULL OR organization_id = $2)
                     ORDER BY seq"
            ))
            .bind(phone)
            .bind(organization)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn evidence_deliveries(
        &self,
        dedup_keys: &[&str],
    ) -> Result<Vec<crate::model::KeptDelivery>, Error> {
        on_backend!(self, |pool, dialect| {
            Ok(sqlx::query_as(dialect::evidence::DELIVERIES)
                .bind(dialect::list(dedup_keys)?)
                .fetch_all(pool)
                .await?)
        })
    }
}
