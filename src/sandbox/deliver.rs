//! Webhook delivery: at least once, from background tasks, signed with
//! `crate::signature::sign`, with injected drops, duplicates, reordering and delays.
//! Each target has its own worker, so a failing target delays only its own events.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rand::RngExt as _;
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use serde::Serialize;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::config::DeliveryFaults;
use crate::signature::{Key, SignatureFormat, sign};

/// Longest wait between two attempts of one delivery.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long the dispatcher gathers events before shuffling them, when reordering.
const REORDER_WINDOW: Duration = Duration::from_millis(25);

/// One event for one registration.
#[derive(Debug, Clone)]
pub struct Job {
    pub event_id: String,
    pub event_type: &'static str,
    pub registration_id: String,
    pub target_url: String,
    pub secret: Option<String>,
    pub body: Bytes,
}

/// What became of one attempt (or of an event dropped on purpose).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryRecord {
    pub event_id: String,
    pub event_type: &'static str,
    pub registration_id: String,
    pub target_url: String,
    pub attempt: u32,
    /// The target's HTTP status, if it answered.
    pub status: Option<u16>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Delivered,
    /// A non-2xx or no answer; another attempt follows unless attempts ran out.
    Failed,
    /// The last attempt failed too.
    GaveUp,
    /// Dropped by fault injection.
    Dropped,
}

/// Handle of the delivery machinery.
#[derive(Clone)]
pub struct Deliverer {
    tx: mpsc::UnboundedSender<Job>,
    pending: watch::Sender<usize>,
    log: Arc<Mutex<Vec<DeliveryRecord>>>,
    faults: Arc<Mutex<DeliveryFaults>>,
}

struct Worker {
    http: reqwest::Client,
    format: SignatureFormat,
    attempts: u32,
    backoff: Duration,
    pending: watch::Sender<usize>,
    log: Arc<Mutex<Vec<DeliveryRecord>>>,
    faults: Arc<Mutex<DeliveryFaults>>,
    rng: Mutex<StdRng>,
    cancel: CancellationToken,
}

impl Deliverer {
    /// Starts the dispatcher; it stops with `cancel`.
    pub fn start(
        format: SignatureFormat,
        faults: DeliveryFaults,
        attempts: u32,
        backoff: Duration,
        seed: u64,
        cancel: CancellationToken,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let (pending, _) = watch::channel(0usize);
        let log = Arc::new(Mutex::new(Vec::new()));
        let faults = Arc::new(Mutex::new(faults));
        let worker = Arc::new(Worker {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap_or_default(),
            format,
            attempts: attempts.max(1),
            backoff,
            pending: pending.clone(),
            log: log.clone(),
            faults: faults.clone(),
            // Its own stream, so delivery faults do not shift the world's generator.
            rng: Mutex::new(StdRng::seed_from_u64(seed ^ 0x5EED_DE11)),
            cancel,
        });
        tokio::spawn(dispatch(worker, rx));
        Self {
            tx,
            pending,
            log,
            faults,
        }
    }

    pub fn enqueue(&self, job: Job) {
        self.pending.send_modify(|n| *n += 1);
        if self.tx.send(job).is_err() {
            self.pending.send_modify(|n| *n = n.saturating_sub(1));
        }
    }

    pub fn records(&self) -> Vec<DeliveryRecord> {
        lock(&self.log).clone()
    }

    pub fn faults(&self) -> DeliveryFaults {
        lock(&self.faults).clone()
    }

    pub fn set_faults(&self, faults: DeliveryFaults) {
        *lock(&self.faults) = faults;
    }

    /// Events not yet delivered, dropped or given up on.
    pub fn pending(&self) -> usize {
        *self.pending.borrow()
    }

    /// Waits until nothing is pending; `false` if `timeout` passed first.
    pub async fn settle(&self, timeout: Duration) -> bool {
        let mut rx = self.pending.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

async fn dispatch(worker: Arc<Worker>, mut rx: mpsc::UnboundedReceiver<Job>) {
    let mut targets: HashMap<String, mpsc::UnboundedSender<Job>> = HashMap::new();
    loop {
        let first = tokio::select! {
            _ = worker.cancel.cancelled() => return,
            job = rx.recv() => match job { Some(job) => job, None => return },
        };
        let faults = lock(&worker.faults).clone();
        let mut batch = vec![first];
        if faults.reorder {
            tokio::time::sleep(REORDER_WINDOW).await;
            while let Ok(job) = rx.try_recv() {
                batch.push(job);
            }
        }
        let mut out = Vec::with_capacity(batch.len());
        {
            let mut rng = lock(&worker.rng);
            for job in batch {
                if rng.random_bool(faults.drop_rate.clamp(0.0, 1.0)) {
                    worker.record(&job, 0, None, Outcome::Dropped);
                    worker.done();
                    continue;
                }
                if rng.random_bool(faults.duplicate_rate.clamp(0.0, 1.0)) {
                    worker.pending.send_modify(|n| *n += 1);
                    out.push(job.clone());
                }
                out.push(job);
            }
            if faults.reorder {
                out.shuffle(&mut *rng);
            }
        }
        for job in out {
            let queue = targets.entry(job.target_url.clone()).or_insert_with(|| {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(target_worker(worker.clone(), rx));
                tx
            });
            if let Err(returned) = queue.send(job) {
                worker.record(&returned.0, 0, None, Outcome::GaveUp);
                worker.done();
            }
        }
    }
}

async fn target_worker(worker: Arc<Worker>, mut rx: mpsc::UnboundedReceiver<Job>) {
    loop {
        let job = tokio::select! {
            _ = worker.cancel.cancelled() => return,
            job = rx.recv() => match job { Some(job) => job, None => return },
        };
        let delay = {
            let max = lock(&worker.faults).max_delay_ms;
            let ms = if max == 0 {
                0
            } else {
                lock(&worker.rng).random_range(0..=max)
            };
            Duration::from_millis(ms)
        };
        tokio::select! {
            _ = worker.cancel.cancelled() => return,
            _ = worker.deliver(&job, delay) => {}
        }
        worker.done();
    }
}

impl Worker {
    fn done(&self) {
        self.pending.send_modify(|n| *n = n.saturating_sub(1));
    }

    fn record(&self, job: &Job, attempt: u32, status: Option<u16>, outcome: Outcome) {
        lock(&self.log).push(DeliveryRecord {
            event_id: job.event_id.clone(),
            event_type: job.event_type,
            registration_id: job.registration_id.clone(),
            target_url: job.target_url.clone(),
            attempt,
            status,
            outcome,
        });
    }

    async fn deliver(&self, job: &Job, delay: Duration) {
        tokio::time::sleep(delay).await;
        let mut wait = self.backoff;
        for attempt in 1..=self.attempts {
            let status = send(&self.http, &self.format, job).await;
            let ok = status.is_some_and(|s| (200..300).contains(&s));
            let outcome = match (ok, attempt == self.attempts) {
                (true, _) => Outcome::Delivered,
                (false, false) => Outcome::Failed,
                (false, true) => Outcome::GaveUp,
            };
            self.record(job, attempt, status, outcome);
            if outcome != Outcome::Failed {
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MAX_BACKOFF);
        }
    }
}

/// One signed POST. `None` when the target did not answer.
pub async fn send(http: &reqwest::Client, format: &SignatureFormat, job: &Job) -> Option<u16> {
    post(http, format, job).await.map(|r| r.status().as_u16())
}

/// One signed POST, returning the whole response (mock_event reads its headers).
pub async fn post(
    http: &reqwest::Client,
    format: &SignatureFormat,
    job: &Job,
) -> Option<reqwest::Response> {
    let mut request = http
        .post(&job.target_url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(job.body.clone());
    let key = job
        .secret
        .as_deref()
        .and_then(|secret| Key::for_scheme(format.scheme, secret));
    if let Some(key) = key {
        let now = chrono::Utc::now().timestamp();
        for (name, value) in sign(format, &key, &job.body, now, Some(&job.event_id)) {
            request = request.header(name, value);
        }
    }
    request.send().await.ok()
}
