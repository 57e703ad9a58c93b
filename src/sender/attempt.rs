//! One subscriber's or destination's sender: read the entries after its cursor, post them
//! as one signed Standard Webhooks message (or write them into a system of record an entry
//! at a time: `attempt/each.rs`), move the cursor after a 2xx, back off after anything else.
//!
//! One file over 400 lines on purpose: the attempt, the cursor it keeps and the backoff it
//! schedules are one state machine (the request itself is in `systems/webhook.rs`).

use crate::store::{DestinationStore as _, SubscriberStore};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use tokio_util::sync::CancellationToken;

mod each;
mod progress;
mod rows;

pub use self::progress::Progress;

use super::try_now::{Request, Running};
use super::{Subscriber, Wire};
use crate::metrics::Metrics;
use crate::model::backoff::Backoff;
use crate::model::{AckSpan, LedgerEntry, Timestamp};
use crate::signal::{FALLBACK_POLL, Follower};
use crate::store::Pool;
use crate::store::ReadStore as _;
use crate::systems::Record;
use crate::systems::webhook::Posted;

/// First wait after a failed attempt, doubled per failure up to the subscriber's
/// `max_backoff_secs`.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Longest `Retry-After` honoured: a subscriber asking for more is tried after an hour.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(3_600);
/// Longest time a moved cursor stays unwritten while entries flow (see [`Progress`]).
const KEEP_EVERY: Duration = Duration::from_secs(1);
/// Pause after the database itself failed.
const DATABASE_PAUSE: Duration = Duration::from_secs(1);
/// Entries scanned per read when the subscriber's filters pass some over.
const FILTERED_PAGE: i64 = 1_000;

/// The first and last seq of `items`, `None` when there are none.
fn seq_span(items: &[LedgerEntry]) -> Option<(i64, i64)> {
    Some((items.first()?.seq, items.last()?.seq))
}

/// The wait before attempt `failures + 1`: exponential from [`FIRST_BACKOFF`] to `most`,
/// with up to a fifth taken off at random so that senders restarted together do not retry
/// together ([`Backoff::wait`]).
pub fn backoff(failures: u32, most: Duration) -> Duration {
    Backoff {
        first: FIRST_BACKOFF,
        most,
    }
    .wait(failures)
}

/// What one attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// Nothing after the cursor for this subscriber.
    Idle,
    /// Entries `first..=last` were accepted.
    Delivered { first: i64, last: i64 },
    /// Not sent, or refused; the next attempt is due after the wait.
    Failed { error: String, wait: Duration },
    /// Answered 410 Gone: disabled until a replay.
    Gone,
    /// A destination's key does not work, or its lookups miss what it needs: stopped until
    /// retried (or reloaded).
    Stopped(String),
    /// Disabled, or not due yet: nothing was sent.
    Waiting(Duration),
}

/// Sends one subscriber's entries.
pub struct Sender {
    pool: Pool,
    /// Where a destination records its answered actions and outcomes ([`Pool::unflushed`]):
    /// a flush per answered action would bound a destination's rate by the disk's.
    outcomes: Pool,
    subscriber: Arc<Subscriber>,
    http: reqwest::Client,
    /// Where each request is counted.
    metrics: Arc<Metrics>,
    /// At most its `requests_per_second`.
    limiter: Option<governor::DefaultDirectRateLimiter>,
}

impl Sender {
    pub fn new(pool: Pool, subscriber: Arc<Subscriber>, http: reqwest::Client) -> Self {
        let limiter = subscriber
            .requests_per_second
            .map(|rate| governor::RateLimiter::direct(governor::Quota::per_second(rate)));
        Self {
            outcomes: pool.unflushed(),
            pool,
            subscriber,
            http,
            metrics: Arc::default(),
            limiter,
        }
    }

    /// Waits for the rate's next request.
    async fn pace(&self) {
        if let Some(limiter) = &self.limiter {
            limiter.until_ready().await;
        }
    }

    /// Counts its requests in `metrics` (the daemon's; by default a registry of the
    /// sender's own, which no scrape shows).
    pub fn counted_in(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Sends until `stop`: at once when the ledger grows, otherwise every
    /// [`FALLBACK_POLL`]; a failure waits its backoff. Never ends on an error; keeps the
    /// cursor before it returns.
    pub async fn run(self, stop: CancellationToken) {
        self.run_listed(Running::default(), stop).await;
    }

    /// [`Sender::run`], listed in `running` while it runs: asked there, it makes its next
    /// attempt at once (see [`Running::try_now`]).
    pub async fn run_listed(self, running: Running, stop: CancellationToken) {
        let name = self.subscriber.name.as_str();
        tracing::info!(subscriber = name, wire = ?self.subscriber, "sender started");
        let mut requests = running.list(name);
        // Taken before the first read, so no commit after it goes unnoticed.
        let mut follower = Follower::new();
        let mut progress = None;
        // A request to try at once, answered after the attempt it asked for.
        let mut asked: Option<Request> = None;
        loop {
            let at_once = asked.is_some();
            let attempt = tokio::select! {
                _ = stop.cancelled() => break,
                attempt = self.attempt(&mut progress, Utc::now(), at_once) => attempt,
            };
            if let Some(reply) = asked.take() {
                let answer = match &attempt {
                    Ok(attempt) => Ok(attempt.clone()),
                    Err(error) => Err(error.to_string()),
                };
                let _ = reply.send(answer);
            }
            let wait = match attempt {
                Ok(Attempt::Delivered { .. }) => continue,
                Ok(Attempt::Idle | Attempt::Gone | Attempt::Stopped(_)) => FALLBACK_POLL,
                Ok(Attempt::Failed { wait, .. } | Attempt::Waiting(wait)) => wait,
                Err(error) => {
                    tracing::warn!(subscriber = name, %error, "cannot read or record a subscriber's state");
                    self.pool
                        .note_error(&format!("subscriber {name}: {error}"))
                        .await;
                    // Read again from the database: what was not kept is sent again.
                    progress = None;
                    DATABASE_PAUSE
                }
            };
            // The due time of a retry is kept in the state, which the next attempt reads: so
            // waking early (a new entry, a replay by another process) is harmless, and a
            // replay is noticed within a poll even during a long backoff.
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = follower.wait(wait.min(FALLBACK_POLL)) => {}
                Some(request) = requests.next() => asked = Some(request),
            }
        }
        if let Some(progress) = &mut progress
            && let Err(error) = self.keep(progress).await
        {
            tracing::warn!(subscriber = name, %error, "cannot keep the subscriber's cursor; the last entries will be sent again");
        }
    }

    /// One attempt at `now`: the next batch after the cursor, if any and if due.
    /// `progress` carries the cursor between attempts (`None`: read it from the database).
    pub async fn try_send(
        &self,
        progress: &mut Option<Progress>,
        now: DateTime<Utc>,
    ) -> Result<Attempt, crate::store::Error> {
        self.attempt(progress, now, false).await
    }

    /// [`Sender::try_send`]; `at_once`: due or not (a backoff, a `Retry-After`), and the
    /// cursor kept right after.
    async fn attempt(
        &self,
        progress: &mut Option<Progress>,
        now: DateTime<Utc>,
        at_once: bool,
    ) -> Result<Attempt, crate::store::Error> {
        let name = self.subscriber.name.as_str();
        let Some(state) = self.pool.subscriber_state(name).await? else {
            self.pool
                .ensure_subscribers(&[(name, self.subscriber.start_cursor)])
                .await?;
            return Ok(Attempt::Waiting(Duration::ZERO));
        };
        let progress = match progress {
            // A replay (here or in another process) rewound the cursor: it wins.
            Some(p) if p.generation == state.generation => {
                p.cursor = p.cursor.max(state.cursor);
                p
            }
            _ => progress.insert(Progress::kept(&state)),
        };
        if state.disabled {
            return self.disabled().await;
        }
        if let Some(due) = state
            .next_attempt_ms
            .and_then(DateTime::from_timestamp_millis)
            && due > now
            && !at_once
        {
            return Ok(Attempt::Waiting((due - now).to_std().unwrap_or_default()));
        }
        if let Wire::Record(record) = &self.subscriber.wire {
            match self.prepared(record).await? {
                each::Prepared::Ready => {}
                // The cursor went back under a new generation: read again at once.
                each::Prepared::Refilled => return Ok(Attempt::Waiting(Duration::ZERO)),
                each::Prepared::Failed(stopped) => {
                    let cursor = progress.cursor;
                    let span = (cursor, cursor, cursor);
                    return self
                        .record(progress, &state, stopped, span, Utc::now(), at_once)
                        .await;
                }
            }
        }
        let (items, scanned) = self.next_batch(progress.cursor).await?;
        if items.is_empty() {
            progress.advance(scanned, None);
            if at_once {
                self.keep(progress).await?;
            } else {
                self.keep_if_due(progress).await?;
            }
            return Ok(Attempt::Idle);
        }
        let at = (progress, &state);
        match &self.subscriber.wire {
            Wire::Webhook(webhook) => self.post_batch(webhook, &items, at, scanned, at_once).await,
            Wire::Record(record) => match record.as_ref() {
                Record::Table(table) => self.write_rows(table, &items, at, scanned, at_once).await,
                Record::Api(api) => self.write_each(api, &items, at, scanned, at_once).await,
            },
        }
    }

    /// Posts `items` to a subscriber as one signed message, then records how it ended.
    async fn post_batch(
        &self,
        webhook: &crate::systems::webhook::Webhook,
        items: &[LedgerEntry],
        (progress, state): (&mut Progress, &crate::model::SubscriberState),
        scanned: i64,
        at_once: bool,
    ) -> Result<Attempt, crate::store::Error> {
        let Some((first, last)) = seq_span(items) else {
            return Ok(Attempt::Idle);
        };
        let outcome = self.post(webhook, items, first, last).await;
        let finished = Utc::now();
        if matches!(outcome, Posted::Accepted) && items.iter().any(|e| e.opted_out) {
            progress.acks.push(AckSpan {
                first_seq: first,
                last_seq: last,
                acked_at: Timestamp(finished),
            });
            progress.kept = false;
        }
        let name = self.subscriber.name.as_str();
        self.metrics.subscriber_request(name, outcome.metric());
        self.record(
            progress,
            state,
            outcome,
            (first, last, scanned),
            finished,
            at_once,
        )
        .await
    }

    /// Posts `items` as one signed message.
    #[tracing::instrument(
        name = "subscriber_request",
        skip_all,
        fields(subscriber = %self.subscriber.name, first, last, entries = items.len())
    )]
    async fn post(
        &self,
        webhook: &crate::systems::webhook::Webhook,
        items: &[LedgerEntry],
        first: i64,
        last: i64,
    ) -> Posted {
        let id = format!("{}-{first}-{last}", self.subscriber.name);
        webhook.post(&self.http, &id, items).await
    }

    /// The wait of a disabled subscriber (410) or a stopped destination; a destination is
    /// enabled again when a reload (or a restart) may have brought the key that works.
    async fn disabled(&self) -> Result<Attempt, crate::store::Error> {
        if let Wire::Record(record) = &self.subscriber.wire {
            // Looked up again once it is enabled: what was missing may be there now.
            record.forget();
            if record.keys_replaced() {
                let name = self.subscriber.name.as_str();
                self.pool.enable_subscriber(name).await?;
                tracing::info!(
                    destination = name,
                    "destination tried again under the keys in force"
                );
                return Ok(Attempt::Waiting(Duration::ZERO));
            }
        }
        Ok(Attempt::Waiting(FALLBACK_POLL))
    }

    /// Records how a post ended: the cursor, the subscriber's state, the log line.
    async fn record(
        &self,
        progress: &mut Progress,
        state: &crate::model::SubscriberState,
        outcome: Posted,
        (first, last, scanned): (i64, i64, i64),
        finished: DateTime<Utc>,
        at_once: bool,
    ) -> Result<Attempt, crate::store::Error> {
        let name = self.subscriber.name.as_str();
        let attempt = match outcome {
            Posted::Accepted => {
                progress.advance(scanned, Some(finished.timestamp_millis()));
                if state.failures > 0 || at_once {
                    // Out of `retrying` at once, for everyone who looks.
                    self.keep(progress).await?;
                } else {
                    self.keep_if_due(progress).await?;
                }
                tracing::debug!(subscriber = name, first, last, "entries delivered");
                Attempt::Delivered { first, last }
            }
            Posted::Stopped(error) => {
                if let Wire::Record(record) = &self.subscriber.wire {
                    record.stopped();
                }
                self.keep(progress).await?;
                self.pool
                    .disable_subscriber(name, state.generation, &error)
                    .await?;
                tracing::warn!(destination = name, %error, "destination stopped until retried");
                Attempt::Stopped(error)
            }
            Posted::Gone => {
                self.keep(progress).await?;
                let error = "answered 410 Gone: disabled until a replay".to_owned();
                self.pool
                    .disable_subscriber(name, state.generation, &error)
                    .await?;
                tracing::warn!(subscriber = name, "subscriber answered 410 Gone; disabled");
                Attempt::Gone
            }
            Posted::Failed {
                error, retry_after, ..
            } => {
                self.keep(progress).await?;
                let failures = u32::try_from(state.failures + 1).unwrap_or(u32::MAX);
                // The subscriber's own word on when to come back, within the contract's bounds.
                let wait = retry_after
                    .map(|after| after.clamp(FIRST_BACKOFF, RETRY_AFTER_MAX))
                    .unwrap_or_else(|| backoff(failures, self.subscriber.max_backoff));
                let next = finished + TimeDelta::from_std(wait).unwrap_or(TimeDelta::MAX);
                self.pool
                    .subscriber_failed(name, state.generation, &error, next.timestamp_millis())
                    .await?;
                tracing::warn!(subscriber = name, failures, %error, retry_in = ?wait, "delivery to subscriber failed; will retry");
                Attempt::Failed { error, wait }
            }
        };
        Ok(attempt)
    }

    /// The subscriber's next entries after `cursor` (at most its batch), and the seq read up
    /// to: the last entry taken, or, when fewer were found, the last entry scanned.
    async fn next_batch(
        &self,
        cursor: i64,
    ) -> Result<(Vec<LedgerEntry>, i64), crate::store::Error> {
        let batch = self.subscriber.batch as usize;
        let page = if self.subscriber.takes_every_entry() {
            batch as i64
        } else {
            FILTERED_PAGE
        };
        let mut items = Vec::with_capacity(batch);
        let mut scanned = cursor;
        loop {
            let entries = self.pool.changes(scanned, page).await?;
            let full = entries.len() as i64 == page;
            for entry in entries {
                if items.len() == batch {
                    return Ok((items, scanned));
                }
                scanned = entry.seq;
                if self.subscriber.takes(&entry) {
                    items.push(entry);
                }
            }
            if !full || items.len() == batch {
                return Ok((items, scanned));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_a_second_up_to_the_subscribers_ceiling() {
        let most = Duration::from_secs(30);
        for _ in 0..100 {
            let first = backoff(1, most);
            assert_eq!(first, FIRST_BACKOFF, "never under a second");
            let fourth = backoff(4, most);
            assert!((Duration::from_millis(6_400)..=Duration::from_secs(8)).contains(&fourth));
            let late = backoff(40, most);
            assert!((Duration::from_secs(24)..=most).contains(&late), "{late:?}");
        }
        assert!(backoff(40, Duration::from_secs(3_600)) > Duration::from_secs(2_800));
    }
}
