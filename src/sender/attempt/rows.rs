//! A warehouse's batch: one request of rows, each row a ledger entry with its hash and
//! actor, each answered `sent` or `refused`; their outcomes kept in one transaction before
//! the cursor moves past them, and a row with an outcome never sent again (the cursor is
//! kept lazily: after a restart, only the batch in flight is sent twice). A batch that
//! fails is sent whole again after the backoff: the warehouse keeps a row once (PostgreSQL
//! by its key; BigQuery by `insertId`, and its `_once` view for a retry it did not catch).
//! A replay forgets the outcomes and sends every row again.

use std::collections::{HashMap, HashSet};

use super::*;
use crate::metrics::DestinationOutcome;
use crate::model::warehouse::Row;
use crate::systems::{Stop, TableRecord};

impl Sender {
    /// Fills the warehouse again from its first entry when its `table` holds less than was
    /// sent to it (renamed, dropped with its schema, truncated: made again or found empty
    /// by its check), so that the table a data team queries holds every entry, not the
    /// ones after the loss.
    pub(super) async fn refilled_if_behind(
        &self,
        table: crate::systems::Table,
    ) -> Result<super::each::Prepared, crate::store::Error> {
        use crate::systems::Table;
        let name = self.subscriber.name.as_str();
        let (after, found) = match table {
            Table::Made => (0, "was missing and is made again".to_owned()),
            Table::Empty => (0, "holds no row".to_owned()),
            Table::Holding(Some(last)) => (last, format!("holds rows through seq {last} only")),
            Table::Holding(None) => return Ok(super::each::Prepared::Ready),
        };
        if !self.pool.sent_after(name, after).await? {
            return Ok(super::each::Prepared::Ready);
        }
        let from = self.subscriber.start_cursor + 1;
        let reason = format!(
            "refilling: the table {found}, behind what was sent to it; every entry is written again from seq {from}"
        );
        tracing::warn!(destination = name, %reason, "warehouse table behind: filled again");
        self.pool.refill(name, from, &reason).await?;
        self.metrics.destination_refilled(name);
        crate::signal::ledger_grew();
        Ok(super::each::Prepared::Refilled)
    }

    /// Writes `items` into the warehouse `record`, then records how the batch ended as a
    /// post's.
    pub(super) async fn write_rows(
        &self,
        record: &TableRecord,
        items: &[LedgerEntry],
        (progress, state): (&mut Progress, &crate::model::SubscriberState),
        scanned: i64,
        at_once: bool,
    ) -> Result<Attempt, crate::store::Error> {
        let Some((first, last)) = seq_span(items) else {
            return Ok(Attempt::Idle);
        };
        let rows = self.rows_unsent(items, (first, last)).await?;
        let mut finished = Utc::now();
        let outcome = if rows.is_empty() {
            Posted::Accepted
        } else {
            self.pace().await;
            let written = record.write_rows(&self.http, &rows).await;
            finished = Utc::now();
            self.kept(&rows, written, finished).await?
        };
        let span = match outcome {
            Posted::Accepted => (first, last, scanned),
            _ => (first, progress.cursor, progress.cursor),
        };
        self.record(progress, state, outcome, span, finished, at_once)
            .await
    }

    /// The rows of `items` (spanning `first..=last`) that have no outcome yet, each with
    /// its hash and actor.
    async fn rows_unsent(
        &self,
        items: &[LedgerEntry],
        (first, last): (i64, i64),
    ) -> Result<Vec<Row>, crate::store::Error> {
        let name = self.subscriber.name.as_str();
        let done: HashSet<i64> = self
            .pool
            .entry_progress(name, first, last)
            .await?
            .into_iter()
            .filter(|p| p.outcome.is_some())
            .map(|p| p.seq)
            .collect();
        if items.iter().all(|e| done.contains(&e.seq)) {
            return Ok(Vec::new());
        }
        let extras: HashMap<i64, _> = self
            .pool
            .row_extras(first, last)
            .await?
            .into_iter()
            .map(|e| (e.seq, e))
            .collect();
        Ok(items
            .iter()
            .filter(|e| !done.contains(&e.seq))
            .map(|entry| Row::of(entry, extras.get(&entry.seq)))
            .collect())
    }

    /// Keeps how the warehouse answered `rows` (each row sent or refused, in one
    /// transaction), counts it, and says how the batch ended.
    async fn kept(
        &self,
        rows: &[Row],
        written: Result<Vec<crate::systems::Refusal>, Stop>,
        finished: chrono::DateTime<Utc>,
    ) -> Result<Posted, crate::store::Error> {
        let name = self.subscriber.name.as_str();
        let refused = match written {
            Ok(refused) => refused,
            Err(Stop::Retry { error, retry_after }) => {
                self.metrics
                    .destination_request(name, DestinationOutcome::Failed);
                return Ok(Posted::failed(error, retry_after));
            }
            Err(stop) => {
                let outcome = match stop {
                    Stop::Credentials(_) => DestinationOutcome::Credentials,
                    _ => DestinationOutcome::Lookup,
                };
                self.metrics.destination_request(name, outcome);
                return Ok(Posted::Stopped(stop.to_string()));
            }
        };
        if let Some(stopped) = every_row_refused(rows, &refused) {
            // One cause refusing every row is the table's, not the rows': it stops as a
            // table of other columns does at start, and nothing is kept as refused, so every
            // row is written once the table is mended (and the destination retried).
            self.metrics
                .destination_request(name, DestinationOutcome::Lookup);
            return Ok(Posted::Stopped(stopped));
        }
        let refused: Vec<(i64, String)> = refused
            .into_iter()
            .filter_map(|(i, reason)| Some((rows.get(i)?.seq, reason)))
            .collect();
        for (seq, reason) in &refused {
            tracing::warn!(destination = name, seq, %reason, "row refused");
        }
        let refused_seqs: HashSet<i64> = refused.iter().map(|(seq, _)| *seq).collect();
        let sent: Vec<i64> = rows
            .iter()
            .map(|row| row.seq)
            .filter(|seq| !refused_seqs.contains(seq))
            .collect();
        self.outcomes
            .record_rows(name, &sent, &refused, Timestamp(finished))
            .await?;
        let counts = [
            (DestinationOutcome::Sent, sent.len()),
            (DestinationOutcome::Refused, refused.len()),
        ];
        for (outcome, rows) in counts {
            self.metrics.destination_rows(name, outcome, rows as u64);
        }
        Ok(Posted::Accepted)
    }
}

/// Why a batch is the table's refusal, not its rows': every row of a batch of more than one
/// refused for the same cause (the words before the first `:`, a PostgreSQL SQLSTATE or a
/// BigQuery reason).
fn every_row_refused(rows: &[Row], refused: &[crate::systems::Refusal]) -> Option<String> {
    if rows.len() < 2 || refused.len() < rows.len() {
        return None;
    }
    let cause = |reason: &str| {
        reason
            .split(':')
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let first = &refused.first()?.1;
    refused
        .iter()
        .all(|(_, reason)| cause(reason) == cause(first))
        .then(|| {
            format!(
                "lookup: the table refused every row of a batch of {} for one cause, its own rather than the rows' (a NOT NULL column, a constraint or a column type changed under it?): {first}",
                rows.len()
            )
        })
}
