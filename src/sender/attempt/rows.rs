//! A warehouse's batch: one request of rows, each row a ledger entry with its hash and
//! actor, each answered `sent` or `refused`; their outcomes kept in one transaction before
//! the cursor moves past them, and a row with an outcome never sent again (the cursor is
//! kept lazily: after a restart, only the batch in flight is sent twice). A batch that
//! fails is sent whole again after the backoff: the warehouse keeps a row once (PostgreSQL
//! by its key; BigQuery by `insertId`, and its `_once` view for a retry it did not catch).
//! A replay forgets the outcomes and sends every row again.

use std::collections::HashMap;

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
        let name = self.subscriber.name.as_str();
        let (first, last) = match (items.first(), items.last()) {
            (Some(first), Some(last)) => (first.seq, last.seq),
            _ => return Ok(Attempt::Idle),
        };
        let done: std::collections::HashSet<i64> = self
            .pool
            .entry_progress(name, first, last)
            .await?
            .into_iter()
            .filter(|p| p.outcome.is_some())
            .map(|p| p.seq)
            .collect();
        let items: Vec<&LedgerEntry> = items.iter().filter(|e| !done.contains(&e.seq)).collect();
        if items.is_empty() {
            let finished = Utc::now();
            let span = (first, last, scanned);
            return self
                .record(progress, state, Posted::Accepted, span, finished, at_once)
                .await;
        }
        let extras: HashMap<i64, _> = self
            .pool
            .row_extras(first, last)
            .await?
            .into_iter()
            .map(|e| (e.seq, e))
            .collect();
        let rows: Vec<Row> = items
            .iter()
            .map(|entry| Row::of(entry, extras.get(&entry.seq)))
            .collect();
        self.pace().await;
        let written = record.write_rows(&self.http, &rows).await;
        let finished = Utc::now();
        let outcome = match written {
            Ok(refused) => {
                let refused: Vec<(i64, String)> = refused
                    .into_iter()
                    .filter_map(|(i, reason)| Some((rows.get(i)?.seq, reason)))
                    .collect();
                for (seq, reason) in &refused {
                    tracing::warn!(destination = name, seq, %reason, "row refused");
                }
                let sent: Vec<i64> = rows
                    .iter()
                    .map(|row| row.seq)
                    .filter(|seq| !refused.iter().any(|(r, _)| r == seq))
                    .collect();
                self.outcomes
                    .record_rows(name, &sent, &refused, Timestamp(finished))
                    .await?;
                self.metrics
                    .destination_rows(name, DestinationOutcome::Sent, sent.len() as u64);
                self.metrics.destination_rows(
                    name,
                    DestinationOutcome::Refused,
                    refused.len() as u64,
                );
                Posted::Accepted
            }
            Err(Stop::Retry { error, retry_after }) => {
                self.metrics
                    .destination_request(name, DestinationOutcome::Failed);
                Posted::failed(error, retry_after)
            }
            Err(stop) => {
                self.metrics
                    .destination_request(name, DestinationOutcome::Credentials);
                Posted::Stopped(stop.to_string())
            }
        };
        let span = match outcome {
            Posted::Accepted => (first, last, scanned),
            _ => (first, progress.cursor, progress.cursor),
        };
        self.record(progress, state, outcome, span, finished, at_once)
            .await
    }
}
