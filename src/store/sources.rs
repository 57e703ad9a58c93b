//! Sources' state and the records they read: one text for both backends (`$N` parameters,
//! times bound as [`Timestamp`]). A source's row holds its watermark and counts; its
//! records (one row each, by what makes it one record there) are written in the
//! transaction that records what they say, so that a record read again records nothing.
#![allow(async_fn_in_trait)] // Called on the concrete `Pool` and `Tx`, whose futures are Send.

use std::collections::{HashMap, HashSet};

use super::backend::{Lend, on_backend};
use super::exec::{Exec as _, args};
use super::{Error, Pool};
use crate::model::Timestamp;

/// A source's row, as `sources` and `GET /v1/sources` show it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct SourceRow {
    pub source: String,
    pub kind: String,
    pub watermark: Option<Timestamp>,
    pub last_run_at: Option<Timestamp>,
    pub last_success_at: Option<Timestamp>,
    pub last_error: Option<String>,
    pub read: i64,
    pub opt_outs: i64,
    pub opt_ins: i64,
    pub confirmed: i64,
    pub ignored: i64,
    /// When the run in progress started.
    pub running_since: Option<Timestamp>,
}

pub use crate::model::SourceCounts;

/// Sources' rows.
pub trait SourceStore {
    /// Every source's row, by name.
    async fn sources(&self) -> Result<Vec<SourceRow>, Error>;

    /// Makes the row of source `name` (of `kind`) if there is none.
    async fn ensure_source(&self, name: &str, kind: &str) -> Result<(), Error>;

    /// A run of source `name` started at `at`.
    async fn source_started(&self, name: &str, at: Timestamp) -> Result<(), Error>;

    /// A run ended at `at`: with an error, or having read up to a watermark (kept when it is
    /// later than the one in place: a run beside another never moves it back).
    async fn source_ran(
        &self,
        name: &str,
        at: Timestamp,
        outcome: Result<Timestamp, &str>,
    ) -> Result<(), Error>;

    /// Moves the watermark of source `name` to `since` (a resync): it reads from there next.
    /// False when there is no such source's row.
    async fn resync_source(&self, name: &str, since: Timestamp) -> Result<bool, Error>;
}

const SOURCE_COLUMNS: &str = "source, kind, watermark, last_run_at, last_success_at,
     last_error, read, opt_outs, opt_ins, confirmed, ignored, running_since";

impl SourceStore for Pool {
    async fn sources(&self) -> Result<Vec<SourceRow>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(&format!(
                "SELECT {SOURCE_COLUMNS} FROM source_state ORDER BY source"
            ))
            .fetch_all(pool)
            .await?)
        })
    }

    async fn ensure_source(&self, name: &str, kind: &str) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query(
                "INSERT INTO source_state (source, kind) VALUES ($1, $2)
                     ON CONFLICT (source) DO UPDATE SET kind = excluded.kind",
            )
            .bind(name)
            .bind(kind)
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn source_started(&self, name: &str, at: Timestamp) -> Result<(), Error> {
        on_backend!(self, |pool| {
            sqlx::query("UPDATE source_state SET running_since = $2 WHERE source = $1")
                .bind(name)
                .bind(at)
                .execute(pool)
                .await?;
            Ok(())
        })
    }

    async fn source_ran(
        &self,
        name: &str,
        at: Timestamp,
        outcome: Result<Timestamp, &str>,
    ) -> Result<(), Error> {
        on_backend!(self, |pool| {
            match outcome {
                Ok(watermark) => sqlx::query(
                    "UPDATE source_state SET last_run_at = $3, last_success_at = $3,
                         last_error = NULL, running_since = NULL,
                         watermark = CASE WHEN watermark IS NULL OR watermark < $2
                                          THEN $2 ELSE watermark END
                         WHERE source = $1",
                )
                .bind(name)
                .bind(watermark)
                .bind(at),
                Err(error) => sqlx::query(
                    "UPDATE source_state SET last_run_at = $3, last_error = $2,
                         running_since = NULL
                         WHERE source = $1",
                )
                .bind(name)
                .bind(error)
                .bind(at),
            }
            .execute(pool)
            .await?;
            Ok(())
        })
    }

    async fn resync_source(&self, name: &str, since: Timestamp) -> Result<bool, Error> {
        on_backend!(self, |pool| {
            let done = sqlx::query(
                "UPDATE source_state SET watermark = $2, last_error = NULL WHERE source = $1",
            )
            .bind(name)
            .bind(since)
            .execute(pool)
            .await?;
            Ok(done.rows_affected() > 0)
        })
    }
}

/// A source's records in a write transaction.
pub trait SourceTx {
    /// Claims `keys` for source `name`: those it had not recorded, now noted as recorded
    /// at `at` (a second run claiming the same keys at once waits for this transaction,
    /// then claims none of them).
    fn claim_records(
        &mut self,
        name: &str,
        keys: &[&str],
        at: Timestamp,
    ) -> impl Future<Output = Result<HashSet<String>, Error>> + Send;

    /// When each destination of `destinations` was last at an entry of each of `phones`
    /// (sent, in flight, told already), by number and what the entry said.
    fn last_writes(
        &mut self,
        destinations: &[String],
        phones: &[&str],
    ) -> impl Future<Output = Result<HashMap<(String, bool), Timestamp>, Error>> + Send;

    /// Source `name` of `kind`, which the system posts to, was posted a record at `at`:
    /// its row made when it has none, its last run and success then.
    fn posted_at(
        &mut self,
        name: &str,
        kind: &str,
        at: Timestamp,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Adds `counts` to the row of source `name`.
    fn count_records(
        &mut self,
        name: &str,
        counts: SourceCounts,
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Keeps `replies` posted to source `name` for a person to decide (each once by its
    /// record's key).
    fn hold_replies(
        &mut self,
        name: &str,
        replies: &[crate::model::review::HeldReply<'_>],
    ) -> impl Future<Output = Result<(), Error>> + Send;

    /// Records the decision of reply `id`, when it waits: false when there is none or it
    /// was decided before.
    fn decide_reply(
        &mut self,
        id: i64,
        decision: crate::model::review::Decision,
        by_and_reason: (&str, Option<&str>),
        at: Timestamp,
    ) -> impl Future<Output = Result<bool, Error>> + Send;
}

impl<T: Lend + Send + ?Sized> SourceTx for T {
    async fn claim_records(
        &mut self,
        name: &str,
        keys: &[&str],
        at: Timestamp,
    ) -> Result<HashSet<String>, Error> {
        let mut claimed = HashSet::new();
        for chunk in keys.chunks(500) {
            let list = super::codec::json_param(chunk)?;
            let new: Vec<String> = on_backend!(self, |conn, dialect| {
                conn.texts(dialect::CLAIM_SOURCE_RECORDS, &args![name, &list, at])
                    .await
            })?;
            claimed.extend(new);
        }
        Ok(claimed)
    }

    async fn last_writes(
        &mut self,
        destinations: &[String],
        phones: &[&str],
    ) -> Result<HashMap<(String, bool), Timestamp>, Error> {
        let mut last: HashMap<(String, bool), Timestamp> = HashMap::new();
        if destinations.is_empty() || phones.is_empty() {
            return Ok(last);
        }
        let names = super::codec::json_param(destinations)?;
        for chunk in phones.chunks(500) {
            let list = super::codec::json_param(chunk)?;
            let rows: Vec<(String, bool, Timestamp)> = on_backend!(self, |conn, dialect| {
                dialect::writes_of_numbers(conn, &list, &names).await
            })?;
            for (phone, opted_out, at) in rows {
                let slot = last.entry((phone, opted_out)).or_insert(at);
                if at.0 > slot.0 {
                    *slot = at;
                }
            }
        }
        Ok(last)
    }

    async fn posted_at(&mut self, name: &str, kind: &str, at: Timestamp) -> Result<(), Error> {
        on_backend!(self, |conn| {
            conn.run(
                "INSERT INTO source_state (source, kind, last_run_at, last_success_at)
                     VALUES ($1, $2, $3, $3)
                     ON CONFLICT (source) DO UPDATE SET kind = excluded.kind,
                         last_run_at = excluded.last_run_at,
                         last_success_at = excluded.last_success_at, last_error = NULL",
                &args![name, kind, at],
            )
            .await
            .map(drop)
        })?;
        Ok(())
    }

    async fn hold_replies(
        &mut self,
        name: &str,
        replies: &[crate::model::review::HeldReply<'_>],
    ) -> Result<(), Error> {
        for reply in replies {
            let matched = super::codec::json_param(reply.matched)?;
            let stands_on = reply.stands_on.to_string();
            on_backend!(self, |conn| {
                conn.run(
                    "INSERT INTO review_replies
                         (source, record, phone_number, body, matched, stands_on, received_at)
                         VALUES ($1, $2, $3, $4, $5, $6, $7)
                         ON CONFLICT (source, record) DO NOTHING",
                    &args![
                        name,
                        reply.record,
                        reply.phone_number,
                        reply.body,
                        &matched,
                        &stands_on,
                        reply.received_at
                    ],
                )
                .await
                .map(drop)
            })?;
        }
        Ok(())
    }

    async fn decide_reply(
        &mut self,
        id: i64,
        decision: crate::model::review::Decision,
        (by, reason): (&str, Option<&str>),
        at: Timestamp,
    ) -> Result<bool, Error> {
        let done = on_backend!(self, |conn| {
            conn.run(
                "UPDATE review_replies SET decision = $2, decided_by = $3, reason = $4,
                     decided_at = $5
                     WHERE id = $1 AND decision IS NULL",
                &args![id, decision.as_str(), by, reason, at],
            )
            .await
        })?;
        Ok(done.rows_affected == 1)
    }

    async fn count_records(&mut self, name: &str, counts: SourceCounts) -> Result<(), Error> {
        on_backend!(self, |conn| {
            conn.run(
                "UPDATE source_state SET read = read + $2, opt_outs = opt_outs + $3,
                     confirmed = confirmed + $4, ignored = ignored + $5, opt_ins = opt_ins + $6
                     WHERE source = $1",
                &args![
                    name,
                    counts.read,
                    counts.opt_outs,
                    counts.confirmed,
                    counts.ignored,
                    counts.opt_ins,
                ],
            )
            .await
            .map(drop)
        })?;
        Ok(())
    }
}
