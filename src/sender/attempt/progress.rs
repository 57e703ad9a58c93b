//! A sender's cursor between attempts, and how it is kept: at most every [`KEEP_EVERY`]
//! while entries flow, by a task beside the sender, and at once before a failure is
//! recorded and when the sender stops.

use super::*;

/// A sender's cursor between attempts. While entries flow it is written to the database
/// at most every [`KEEP_EVERY`], by a task beside the sender, and at once before a failure
/// is recorded and when the sender stops: a write in the sending path would queue behind
/// the ledger's own writers (on SQLite, for the one write lock) and hold delivery up. A
/// crash loses at most that much progress, which is sent again: at least once, never
/// skipped.
#[derive(Debug)]
pub struct Progress {
    pub(super) generation: i64,
    pub(super) cursor: i64,
    /// When the last delivery since the cursor was kept was accepted.
    pub(super) delivered_ms: Option<i64>,
    /// Accepted requests that carried opt-outs, not yet kept: written with the cursor,
    /// for the compliance report (when this subscriber had each opt-out).
    pub(super) acks: Vec<AckSpan>,
    /// How many of `acks` the write in progress carries; dropped once it succeeded.
    pub(super) acks_writing: usize,
    pub(super) kept: bool,
    pub(super) kept_at: Instant,
    /// The write in progress beside the sender.
    pub(super) writing: Option<tokio::task::JoinHandle<Result<(), crate::store::Error>>>,
}

impl Progress {
    pub(super) fn kept(state: &crate::model::SubscriberState) -> Self {
        Self {
            generation: state.generation,
            cursor: state.cursor,
            delivered_ms: None,
            acks: Vec::new(),
            acks_writing: 0,
            kept: true,
            kept_at: Instant::now(),
            writing: None,
        }
    }

    pub(super) fn advance(&mut self, cursor: i64, delivered_ms: Option<i64>) {
        if cursor > self.cursor {
            self.cursor = cursor;
            self.kept = false;
        }
        if delivered_ms.is_some() {
            self.delivered_ms = delivered_ms;
        }
    }
}

impl Sender {
    /// Starts writing the cursor beside the sender if it moved, the last write began
    /// [`KEEP_EVERY`] ago and has ended.
    pub(super) async fn keep_if_due(
        &self,
        progress: &mut Progress,
    ) -> Result<(), crate::store::Error> {
        if progress.kept
            || progress.kept_at.elapsed() < KEEP_EVERY
            || progress.writing.as_ref().is_some_and(|w| !w.is_finished())
        {
            return Ok(());
        }
        self.written(progress).await?;
        let pool = self.pool.clone();
        let (name, generation, cursor, delivered_ms, acks) = (
            self.subscriber.name.clone(),
            progress.generation,
            progress.cursor,
            progress.delivered_ms,
            progress.acks.clone(),
        );
        progress.acks_writing = acks.len();
        progress.writing = Some(tokio::spawn(async move {
            pool.subscriber_delivered(&name, generation, cursor, delivered_ms, &acks)
                .await
        }));
        progress.kept = true;
        progress.kept_at = Instant::now();
        Ok(())
    }

    /// Waits for the write beside the sender, if any; a failed one is to be written again.
    pub(super) async fn written(&self, progress: &mut Progress) -> Result<(), crate::store::Error> {
        let Some(writing) = progress.writing.take() else {
            return Ok(());
        };
        let acks = std::mem::take(&mut progress.acks_writing);
        match writing.await {
            Ok(Ok(())) => {
                progress.acks.drain(..acks.min(progress.acks.len()));
                Ok(())
            }
            Ok(Err(error)) => {
                progress.kept = false;
                Err(error)
            }
            Err(error) => {
                progress.kept = false;
                tracing::error!(subscriber = %self.subscriber.name, %error, "writing the cursor ended abnormally");
                Ok(())
            }
        }
    }

    /// Writes the cursor (and the last success) now if it moved since it was last kept.
    pub(super) async fn keep(&self, progress: &mut Progress) -> Result<(), crate::store::Error> {
        self.written(progress).await?;
        if progress.kept {
            return Ok(());
        }
        self.pool
            .subscriber_delivered(
                &self.subscriber.name,
                progress.generation,
                progress.cursor,
                progress.delivered_ms,
                &progress.acks,
            )
            .await?;
        progress.acks.clear();
        progress.kept = true;
        progress.kept_at = Instant::now();
        Ok(())
    }
}
