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
use crate::systems::{Record, Stop};

impl Sender {
    /// Writes `items` into the warehouse `record`, then records how the batch ended as a
    /// post's.
    pub(super) async fn write_rows(
        &self,
        record: &Record,
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
                self.metrics
                    .destination_request(name, DestinationOutcome::Credentials);
                return Ok(Posted::Stopped(stop.to_string()));
            }
        };
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
