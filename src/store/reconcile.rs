//! The reconciler's bookkeeping with one text for both backends (`$N` parameters, times
//! bound as [`Timestamp`](crate::model::Timestamp)): checkpoints of interrupted scans and
//! the last pass of each organization, and every pass's summary (which PostgreSQL keeps as
//! `jsonb`, its times as `timestamptz`: the casts of its parameters are each backend's
//! `reconcile`).

use super::Error;
use super::backend::{Lend, on_backend};
use super::exec::{Exec as _, args};
use super::{PageCheckpoint, PassStore, Pool};
use crate::model::AccountId;
use chrono::{DateTime, Utc};

impl PassStore for Pool {
    async fn checkpoint(
        &self,
        account: &AccountId,
        pass_id: &str,
        organization: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<String>, Error> {
        on_backend!(self, |pool| {
            let cursor: Option<Option<String>> = sqlx::query_scalar(
                "INSERT INTO reconcile_checkpoints (organization_id, pass_id, cursor, started_at,
                 updated_at,
                                                account_id)
             VALUES ($1, $2, NULL, $3, $3, $4)
             ON CONFLICT (organization_id, account_id) DO UPDATE SET updated_at = $3
             RETURNING cursor",
            )
            .bind(organization)
            .bind(pass_id)
            .bind(crate::model::Timestamp(now))
            .bind(account)
            .fetch_optional(pool)
            .await?;
            Ok(cursor.flatten())
        })
    }

    async fn restart_checkpoint(
        &self,
        account: &AccountId,
        organization: &str,
    ) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query(
                "UPDATE reconcile_checkpoints SET cursor = NULL, leads_scanned = 0, repaired = 0
             WHERE organization_id = $1 AND account_id = $2",
            )
            .bind(organization)
            .bind(account)
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn end_with_error<E: std::fmt::Display + Send>(
        &self,
        account: &AccountId,
        pass_id: &str,
        organization: &str,
        now: DateTime<Utc>,
        describe: impl FnOnce(i64) -> E + Send,
    ) -> Result<E, Error> {
        on_backend!(self, |pool| {
            let mut tx = pool.begin().await?;
            let (scanned, repaired): (i64, i64) = sqlx::query_as(
                "SELECT leads_scanned, repaired FROM reconcile_checkpoints
                 WHERE organization_id = $1 AND account_id = $2",
            )
            .bind(organization)
            .bind(account)
            .fetch_optional(&mut *tx)
            .await?
            .unwrap_or_default();
            let error = describe(scanned);
            sqlx::query(
                "INSERT INTO reconcile_organizations (organization_id, pass_id, finished_at,
                 leads_scanned, repaired, error,
                                                  account_id)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (organization_id, account_id) DO UPDATE SET pass_id = excluded.pass_id,
                 finished_at = excluded.finished_at, leads_scanned = excluded.leads_scanned,
                 repaired = excluded.repaired, error = excluded.error",
            )
            .bind(organization)
            .bind(pass_id)
            .bind(crate::model::Timestamp(now))
            .bind(scanned)
            .bind(repaired)
            .bind(error.to_string())
            .bind(account)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "DELETE FROM reconcile_checkpoints WHERE organization_id = $1 AND account_id = $2",
            )
            .bind(organization)
            .bind(account)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(error)
        })
    }

    async fn open_messages(
        &self,
        account: &AccountId,
        stale_before: DateTime<Utc>,
        receipt_since: DateTime<Utc>,
    ) -> Result<Vec<String>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_scalar(
                "SELECT id FROM messages
             WHERE first_seen_at <= $1
               AND (NOT terminal OR (status = 'sent' AND status_at >= $2))
               AND account_id = $3
             ORDER BY first_seen_at",
            )
            .bind(crate::model::Timestamp(stale_before))
            .bind(crate::model::Timestamp(receipt_since))
            .bind(account)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn organization_failed(
        &self,
        account: &AccountId,
        pass_id: &str,
        organization: &str,
        now: DateTime<Utc>,
        error: &str,
    ) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query(
                "INSERT INTO reconcile_organizations (organization_id, pass_id, finished_at,
                 leads_scanned, repaired, error,
                                                  account_id)
             VALUES ($1, $2, $3, 0, 0, $4, $5)
             ON CONFLICT (organization_id, account_id) DO UPDATE SET error = $4",
            )
            .bind(organization)
            .bind(pass_id)
            .bind(crate::model::Timestamp(now))
            .bind(error)
            .bind(account)
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn record_pass(&self, pass: crate::store::PassRecord<'_>) -> Result<(), Error> {
        on_backend!(self, |pool, dialect| {
            sqlx::query(&format!(
                "INSERT INTO reconcile_passes (id, started_at, finished_at, summary, account_id)
         VALUES ($1, $2{time}, $3{time}, $4{json}, $5)",
                time = dialect::reconcile::AS_TIME,
                json = dialect::reconcile::AS_JSON,
            ))
            .bind(pass.id)
            .bind(pass.started_at)
            .bind(pass.finished_at)
            .bind(pass.summary)
            .bind(pass.account)
            .execute(pool)
            .await?;
            Ok(())
        })
    }
}

/// In the page's transaction: moves the checkpoint to the next page, or, after the last
/// page, records the organization's finished scan and drops its checkpoint
/// ([`crate::store::ApplyTx::page_written`]).
pub(crate) async fn page_written<T: Lend + ?Sized>(
    tx: &mut T,
    page: PageCheckpoint<'_>,
) -> Result<(), Error> {
    on_backend!(tx, |conn| {
        let now = crate::model::Timestamp(page.now);
        match page.next {
            Some(cursor) => {
                conn.run(
                    "UPDATE reconcile_checkpoints SET cursor = $1, leads_scanned = leads_scanned
                         + $2,
                         repaired = repaired + $3, updated_at = $4
                     WHERE organization_id = $5 AND account_id = $6",
                    &args![
                        cursor,
                        page.scanned,
                        page.repaired,
                        now,
                        page.organization,
                        page.account,
                    ],
                )
                .await?;
            }
            None => {
                conn.run(
                    "INSERT INTO reconcile_organizations (organization_id, pass_id, finished_at,
                         leads_scanned, repaired, error,
                                                          account_id)
                     SELECT organization_id, $2, $3, leads_scanned + $4, repaired + $5, NULL,
                         account_id
                     FROM reconcile_checkpoints WHERE organization_id = $1 AND account_id = $6
                     ON CONFLICT (organization_id, account_id) DO UPDATE SET pass_id =
                         excluded.pass_id,
                         finished_at = excluded.finished_at, leads_scanned = excluded.leads_scanned,
                         repaired = excluded.repaired, error = NULL",
                    &args![
                        page.organization,
                        page.pass_id,
                        now,
                        page.scanned,
                        page.repaired,
                        page.account,
                    ],
                )
                .await?;
                conn.run(
                    "DELETE FROM reconcile_checkpoints WHERE organization_id = $1 AND
                     account_id = $2",
                    &args![page.organization, page.account],
                )
                .await?;
            }
        }
        Ok(())
    })
}
