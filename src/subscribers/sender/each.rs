//! A system of record's batch, an entry at a time: each entry's steps in order, each
//! answered step kept before the next is sent and before the cursor moves past the entry,
//! so that no answered action is sent again after a restart or a change of leader (an
//! action whose answer was lost in a crash is sent again: at least once). An unmatched or
//! refused entry is kept with its reason and passed; it never holds the rest back.

use std::collections::HashMap;

use super::*;
use crate::metrics::DestinationOutcome;
use crate::model::{EntryProgress, OutcomeKind};
use crate::subscribers::answer::Answer;
use crate::subscribers::record::{Record, Step, Stop};

impl Sender {
    /// Looks up what `record` needs if it is not yet; a [`Posted`] when it cannot be.
    pub(super) async fn prepared(&self, record: &Record) -> Option<Posted> {
        if record.ready() {
            return None;
        }
        let stop = record.prepare(&self.http).await.err()?;
        Some(match stop {
            Stop::Retry { error, retry_after } => Posted::failed(error, retry_after),
            stop => Posted::Stopped(stop.to_string()),
        })
    }

    /// Writes `items` into `record`, then records how the batch ended as a post's.
    pub(super) async fn write_each(
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
        let kept: HashMap<i64, EntryProgress> = self
            .pool
            .entry_progress(name, first, last)
            .await?
            .into_iter()
            .map(|p| (p.seq, p))
            .collect();
        for entry in items {
            let kept = kept.get(&entry.seq);
            if kept.is_none_or(|k| k.outcome.is_none()) {
                let done = kept.map_or(0, |k| k.actions_done);
                if let Some(failed) = self.write_one(record, entry, done).await? {
                    let finished = Utc::now();
                    let span = (first, progress.cursor, progress.cursor);
                    return self
                        .record(progress, state, failed, span, finished, at_once)
                        .await;
                }
            }
            progress.advance(entry.seq, None);
        }
        let finished = Utc::now();
        self.record(
            progress,
            state,
            Posted::Accepted,
            (first, last, scanned),
            finished,
            at_once,
        )
        .await
    }

    /// Writes one entry whose steps in `done` were answered already: `None` once it has
    /// its outcome, else why the destination cannot go on now.
    async fn write_one(
        &self,
        record: &Record,
        entry: &LedgerEntry,
        mut done: i64,
    ) -> Result<Option<Posted>, crate::store::Error> {
        let name = self.subscriber.name.as_str();
        let lead = match (&entry.lead_id, record.needs_lead()) {
            (Some(id), true) => self.pool.lead(id, &entry.account_id).await?,
            _ => None,
        };
        let steps = match record.steps(entry, lead.as_ref()) {
            Ok(steps) => steps,
            Err(reason) => {
                self.metrics
                    .destination_request(name, DestinationOutcome::Unmatched);
                tracing::info!(destination = name, seq = entry.seq, %reason, "entry unmatched");
                let outcome = Some((OutcomeKind::Unmatched, Some(reason.as_str())));
                self.outcomes
                    .record_progress(name, entry.seq, done, outcome, Timestamp(Utc::now()))
                    .await?;
                return Ok(None);
            }
        };
        let pending: Vec<&Step> = steps.iter().filter(|s| done & s.bit == 0).collect();
        let mut refused = None;
        for (i, step) in pending.iter().enumerate() {
            self.pace().await;
            let answer = record.send(&self.http, step).await;
            self.metrics.destination_request(name, metric(&answer));
            match answer {
                Answer::Success => {
                    done |= step.bit;
                    if i + 1 < pending.len() {
                        self.outcomes
                            .record_progress(name, entry.seq, done, None, Timestamp(Utc::now()))
                            .await?;
                    }
                }
                Answer::Refused(error) => {
                    tracing::warn!(destination = name, seq = entry.seq, action = step.action, %error, "entry refused");
                    refused = Some(error);
                    break;
                }
                Answer::Credentials(error) => {
                    return Ok(Some(Posted::Stopped(format!("credentials: {error}"))));
                }
                Answer::Retry { error, retry_after } => {
                    let error = format!("{}: {error}", step.action);
                    return Ok(Some(Posted::failed(error, retry_after)));
                }
            }
        }
        let outcome = match &refused {
            Some(error) => (OutcomeKind::Refused, Some(error.as_str())),
            None => (OutcomeKind::Sent, None),
        };
        self.outcomes
            .record_progress(name, entry.seq, done, Some(outcome), Timestamp(Utc::now()))
            .await?;
        Ok(None)
    }
}

fn metric(answer: &Answer) -> DestinationOutcome {
    match answer {
        Answer::Success => DestinationOutcome::Sent,
        Answer::Refused(_) => DestinationOutcome::Refused,
        Answer::Credentials(_) => DestinationOutcome::Credentials,
        Answer::Retry { .. } => DestinationOutcome::Failed,
    }
}
