//! A bounded sample of the deliveries refused by signature verification, for
//! `webhooks diagnose`. The ingest port faces the internet, so what an unverified request
//! leaves behind is fixed in size whatever it sends and however often: the last
//! [`KEPT`] refusals in memory, a body only when it is at most [`BODY_KEPT`] bytes, handed
//! to the outbox writer at most twice per [`PERSIST_EVERY`] (the first refusal after a
//! quiet period at once, so that `webhooks diagnose` sees a misconfigured sender's first
//! delivery; the rest of the period's sample at its end), never one write per request, and
//! one log line per period instead of one per request.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::model::RejectedDelivery;
use crate::outbox::{OutboxWriter, REJECTED_KEPT};

/// Refused deliveries kept, in memory and in the database (where the outbox writer keeps
/// the newest).
pub const KEPT: usize = REJECTED_KEPT;
/// Largest body kept with a refused delivery; a larger one is kept as its length only.
/// Webhook bodies are a few KiB; the bound holds the sample under 1.3 MiB.
pub const BODY_KEPT: usize = 64 * 1024;
/// Largest set of headers kept with a refused delivery, as JSON.
pub const HEADERS_KEPT: usize = 16 * 1024;
/// How often the sample goes to the database, and refusals are logged.
pub const PERSIST_EVERY: Duration = Duration::from_secs(5);

/// The sample, shared by the ingest handlers and the task that keeps it.
pub struct Rejections {
    inner: Mutex<Sample>,
    writer: OutboxWriter,
}

#[derive(Debug, Default)]
struct Sample {
    recent: VecDeque<RejectedDelivery>,
    /// When the sample last went to the writer.
    kept_at: Option<Instant>,
    /// Refusals since the sample was last taken (kept or not).
    refused: u64,
    last_reason: Option<String>,
}

/// What [`Rejections::take`] hands over: the refusals to keep, and how many there were.
#[derive(Debug, Default)]
pub struct Taken {
    pub kept: Vec<RejectedDelivery>,
    pub refused: u64,
    pub last_reason: Option<String>,
}

impl Rejections {
    pub fn new(writer: OutboxWriter) -> Self {
        Self {
            inner: Mutex::default(),
            writer,
        }
    }

    /// Notes a refused delivery: constant time, never waits on anything but a short lock.
    /// The first after a quiet period goes to the writer at once (queued before the answer
    /// to its request).
    pub fn record(&self, rejected: RejectedDelivery) {
        self.record_keeping(rejected, BODY_KEPT);
    }

    /// [`Rejections::record`], keeping a body only up to `body_kept` bytes (at most
    /// [`BODY_KEPT`]).
    pub fn record_keeping(&self, mut rejected: RejectedDelivery, body_kept: usize) {
        if rejected.body.len() > body_kept.min(BODY_KEPT) {
            rejected.reason = format!(
                "{} (its body of {} bytes was not kept)",
                rejected.reason,
                rejected.body.len()
            );
            rejected.body = Bytes::new();
        }
        if rejected.headers.len() > HEADERS_KEPT {
            rejected.reason = format!(
                "{} (its {} bytes of headers were not kept)",
                rejected.reason,
                rejected.headers.len()
            );
            rejected.headers = "[]".into();
        }
        let mut sample = self.lock();
        sample.refused += 1;
        sample.last_reason = Some(rejected.reason.clone());
        sample.recent.push_back(rejected);
        while sample.recent.len() > KEPT {
            sample.recent.pop_front();
        }
        let quiet = sample
            .kept_at
            .is_none_or(|at| at.elapsed() >= PERSIST_EVERY);
        if quiet {
            sample.kept_at = Some(Instant::now());
            let kept: Vec<_> = sample.recent.drain(..).collect();
            drop(sample);
            self.writer.keep_rejected(kept);
        }
    }

    /// The refusals noted since the last call.
    pub fn take(&self) -> Taken {
        let mut sample = self.lock();
        Taken {
            kept: sample.recent.drain(..).collect(),
            refused: std::mem::take(&mut sample.refused),
            last_reason: sample.last_reason.take(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sample> {
        // A panic while holding it leaves a sample that is still a sample.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every [`PERSIST_EVERY`], until `stop` (and once more then): hands what is left of the
    /// sample to the writer and logs how many deliveries were refused.
    pub async fn keep(&self, stop: CancellationToken) {
        loop {
            let stopping = tokio::select! {
                () = tokio::time::sleep(PERSIST_EVERY) => false,
                () = stop.cancelled() => true,
            };
            let taken = self.take();
            if taken.refused > 0 {
                tracing::warn!(
                    refused = taken.refused,
                    last_reason = taken.last_reason.as_deref().unwrap_or_default(),
                    "deliveries refused by signature verification in the last period (`outreach-sync webhooks diagnose` reads a sample)"
                );
            }
            if !taken.kept.is_empty() {
                self.lock().kept_at = Some(Instant::now());
                self.writer.keep_rejected(taken.kept);
            }
            if stopping {
                return;
            }
        }
    }
}
