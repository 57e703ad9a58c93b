//! Webhook delivery: at least once, from background tasks, signed as [`Signing`] says,
//! with injected drops, duplicates, reordering and delays.
//! Each target has its own worker, so a failing target delays only its own events.
//!
//! What became of each delivery is kept in [`log`].

mod log;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rand::Rng as _;
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::config::DeliveryFaults;
use super::signing::Signing;
pub use log::{DELIVERY_RECORDS_KEPT, DeliveryCounts, DeliveryRecord, Outcome};
use log::{Log, record};

/// Longest wait between two attempts of one delivery.
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long the dispatcher gathers events before shuffling them, when reordering.
const REORDER_WINDOW: Duration = Duration::from_millis(25);
/// Copies of one target in flight at once when reordering (see [`target_worker`]).
const IN_FLIGHT_PER_TARGET: usize = 32;

/// One event for one registration. No `Debug`: it carries the signing secret.
#[derive(Clone)]
pub(crate) struct Job {
    pub event_id: String,
    pub event_type: &'static str,
    pub registration_id: String,
    pub target_url: String,
    pub secret: Option<String>,
    pub body: Bytes,
}

/// One copy of a job on its way to the target; copies of a duplicated job share the fate.
struct JobCopy {
    job: Job,
    fate: Arc<Mutex<Fate>>,
}

/// What the copies of one job came to so far.
struct Fate {
    copies_left: u8,
    delivered: bool,
}

/// Handle of the delivery machinery.
#[derive(Clone)]
pub(crate) struct Deliverer {
    tx: mpsc::UnboundedSender<Job>,
    pending: watch::Sender<usize>,
    log: Arc<Mutex<Log>>,
    faults: Arc<Mutex<DeliveryFaults>>,
}

struct Worker {
    http: reqwest::Client,
    signing: Signing,
    attempts: u32,
    backoff: Duration,
    pending: watch::Sender<usize>,
    log: Arc<Mutex<Log>>,
    faults: Arc<Mutex<DeliveryFaults>>,
    rng: Mutex<StdRng>,
    cancel: CancellationToken,
}

impl Deliverer {
    /// Starts the dispatcher; it stops with `cancel`.
    pub(crate) fn start(
        signing: Signing,
        faults: DeliveryFaults,
        attempts: u32,
        backoff: Duration,
        seed: u64,
        cancel: CancellationToken,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let (pending, _) = watch::channel(0usize);
        let log = Arc::new(Mutex::new(Log::default()));
        let faults = Arc::new(Mutex::new(faults));
        let worker = Arc::new(Worker {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap_or_default(),
            signing,
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

    pub(crate) fn enqueue(&self, job: Job) {
        self.pending.send_modify(|n| *n += 1);
        lock(&self.log).counts.events += 1;
        if self.tx.send(job).is_err() {
            // The sandbox is stopping: this event will never be sent.
            lock(&self.log).counts.gave_up += 1;
            self.pending.send_modify(|n| *n = n.saturating_sub(1));
        }
    }

    /// The most recent delivery records, oldest first (at most [`DELIVERY_RECORDS_KEPT`]).
    pub(crate) fn records(&self) -> Vec<DeliveryRecord> {
        lock(&self.log).records.iter().cloned().collect()
    }

    /// Totals since the start.
    pub(crate) fn counts(&self) -> DeliveryCounts {
        let counts = lock(&self.log).counts;
        DeliveryCounts {
            waiting: counts
                .events
                .saturating_sub(counts.dropped + counts.delivered + counts.gave_up),
            ..counts
        }
    }

    pub(crate) fn faults(&self) -> DeliveryFaults {
        lock(&self.faults).clone()
    }

    pub(crate) fn set_faults(&self, faults: DeliveryFaults) {
        *lock(&self.faults) = faults;
    }

    /// Events not yet delivered, dropped or given up on.
    pub(crate) fn pending(&self) -> usize {
        *self.pending.borrow()
    }

    /// Waits until nothing is pending; `false` if `timeout` passed first.
    pub(crate) async fn settle(&self, timeout: Duration) -> bool {
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
    let mut targets: HashMap<String, mpsc::UnboundedSender<JobCopy>> = HashMap::new();
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
                if rng.gen_bool(faults.drop_rate.clamp(0.0, 1.0)) {
                    let mut log = lock(&worker.log);
                    log.counts.dropped += 1;
                    log.push(record(&job, 0, None, Outcome::Dropped));
                    drop(log);
                    worker.done();
                    continue;
                }
                let twice = rng.gen_bool(faults.duplicate_rate.clamp(0.0, 1.0));
                let fate = Arc::new(Mutex::new(Fate {
                    copies_left: if twice { 2 } else { 1 },
                    delivered: false,
                }));
                if twice {
                    lock(&worker.log).counts.duplicated += 1;
                    worker.pending.send_modify(|n| *n += 1);
                    out.push(JobCopy {
                        job: job.clone(),
                        fate: fate.clone(),
                    });
                }
                out.push(JobCopy { job, fate });
            }
            if faults.reorder {
                out.shuffle(&mut *rng);
            }
        }
        for copy in out {
            let queue = targets
                .entry(copy.job.target_url.clone())
                .or_insert_with(|| {
                    let (tx, rx) = mpsc::unbounded_channel();
                    tokio::spawn(target_worker(worker.clone(), rx));
                    tx
                });
            if let Err(returned) = queue.send(copy) {
                worker.finish(&returned.0, 0, None, Outcome::GaveUp);
                worker.done();
            }
        }
    }
}

/// Sends one target's copies. In order, one at a time, unless reordering is on: then up to
/// [`IN_FLIGHT_PER_TARGET`] go out side by side, each after its own delay, so the delays
/// overlap instead of adding up (one at a time, a 200 ms delay caps a target at about ten
/// events a second, and the queue grows without end under the demo's activity).
async fn target_worker(worker: Arc<Worker>, mut rx: mpsc::UnboundedReceiver<JobCopy>) {
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT_PER_TARGET));
    loop {
        let copy = tokio::select! {
            _ = worker.cancel.cancelled() => return,
            copy = rx.recv() => match copy { Some(copy) => copy, None => return },
        };
        let faults = lock(&worker.faults).clone();
        let delay = match faults.max_delay_ms {
            0 => Duration::ZERO,
            max => Duration::from_millis(lock(&worker.rng).gen_range(0..=max)),
        };
        if !faults.reorder {
            tokio::select! {
                _ = worker.cancel.cancelled() => return,
                _ = worker.deliver(&copy, delay) => {}
            }
            worker.done();
            continue;
        }
        let permit = tokio::select! {
            _ = worker.cancel.cancelled() => return,
            permit = in_flight.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        let worker = worker.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = worker.cancel.cancelled() => return,
                _ = worker.deliver(&copy, delay) => {}
            }
            worker.done();
            drop(permit);
        });
    }
}

impl Worker {
    fn done(&self) {
        self.pending.send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Records one attempt of a copy (attempt 0: none was made) and counts what it means
    /// for the copy and for its event.
    fn finish(&self, copy: &JobCopy, attempt: u32, status: Option<u16>, outcome: Outcome) {
        let mut log = lock(&self.log);
        log.push(record(&copy.job, attempt, status, outcome));
        if attempt > 0 {
            log.counts.attempts += 1;
            if outcome != Outcome::Delivered {
                log.counts.failed_attempts += 1;
            }
        }
        if outcome == Outcome::Failed {
            return;
        }
        let mut fate = lock(&copy.fate);
        fate.copies_left = fate.copies_left.saturating_sub(1);
        if outcome == Outcome::Delivered && !fate.delivered {
            fate.delivered = true;
            log.counts.delivered += 1;
        } else if outcome == Outcome::GaveUp && fate.copies_left == 0 && !fate.delivered {
            log.counts.gave_up += 1;
        }
    }

    async fn deliver(&self, copy: &JobCopy, delay: Duration) {
        tokio::time::sleep(delay).await;
        let mut wait = self.backoff;
        for attempt in 1..=self.attempts {
            let status = send(&self.http, &self.signing, &copy.job).await;
            let ok = status.is_some_and(|s| (200..300).contains(&s));
            let outcome = match (ok, attempt == self.attempts) {
                (true, _) => Outcome::Delivered,
                (false, false) => Outcome::Failed,
                (false, true) => Outcome::GaveUp,
            };
            self.finish(copy, attempt, status, outcome);
            if outcome != Outcome::Failed {
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MAX_BACKOFF);
        }
    }
}

/// One signed POST. `None` when the target did not answer.
pub(crate) async fn send(http: &reqwest::Client, signing: &Signing, job: &Job) -> Option<u16> {
    post(http, signing, job).await.map(|r| r.status().as_u16())
}

/// One signed POST, returning the whole response (mock_event reads its headers).
pub(crate) async fn post(
    http: &reqwest::Client,
    signing: &Signing,
    job: &Job,
) -> Option<reqwest::Response> {
    let mut request = http
        .post(&job.target_url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(job.body.clone());
    let now = chrono::Utc::now().timestamp();
    let headers = job
        .secret
        .as_deref()
        .and_then(|secret| signing.headers(secret, &job.event_id, now, &job.body));
    for (name, value) in headers.into_iter().flatten() {
        request = request.header(name, value);
    }
    request.send().await.ok()
}
