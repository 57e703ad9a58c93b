//! Sources: opt-outs given where the daemon cannot hear them (a phone banker's "Do Not
//! Text" in VAN, a supporter unsubscribing in Action Network), read back every
//! `every_secs` by the leader and recorded in the ledger, from where they reach the service
//! and every other tool.
//!
//! A run reads a window, from the source's watermark to now, through its system's reader
//! ([`crate::systems::source::Source`]), which hands records on as it reads them; they are
//! recorded as they come ([`record::Recorder`]). The watermark moves only once the reader
//! finished and every record it handed on is recorded: a run that stops part-way (an
//! error, a crash, kill -9) is read again from the same watermark, and its records, claimed
//! once, record nothing twice.

mod view;
pub use crate::apply::sourced as record;
pub use view::{STALE_AFTER_RUNS, SourceState, SourceView, views};

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::apply::sourced::Recorder;
use crate::metrics::Metrics;
use crate::model::trust::{self, Trust};
use crate::model::{AccountId, Timestamp};
use crate::settings::{DestinationSettings, Live, SourceSettings};
use crate::store::{Growth, Pool, SourceCounts, SourceStore as _};
use crate::systems::source::{ReadError, ReadRecord, SourceApi, Window};
use crate::systems::{Stop, source::Source};

/// Batches of records in flight between a reader and its recorder.
const IN_FLIGHT: usize = 4;
/// The first wait after a run that may pass by itself (no answer, a 5xx); doubled after
/// each, up to the source's interval.
const FIRST_BACKOFF: Duration = Duration::from_secs(5);
/// A connection's page cache and checkpoint, as an import's (SQLite).
const CACHE_KIB: u32 = 4096;
const CHECKPOINT_PAGES: u32 = 10_000;
/// How long a request's answer may take to start and each read of it to come.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One configured source, ready to run.
pub struct Reader {
    settings: SourceSettings,
    system: Box<dyn Source>,
    recorder: Recorder,
    limiter: governor::DefaultDirectRateLimiter,
    http: reqwest::Client,
    metrics: Option<Arc<Metrics>>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("name", &self.settings.name)
            .field("kind", &self.recorder.kind)
            .finish_non_exhaustive()
    }
}

/// What one run read and recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunReport {
    pub counts: SourceCounts,
    /// Where the next run reads from.
    pub watermark: Option<DateTime<Utc>>,
}

/// Why a run ended before its end, with what it recorded by then.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct RunError {
    pub error: String,
    /// It may pass by itself (no answer, a 5xx): tried again sooner.
    pub passing: bool,
    pub recorded: SourceCounts,
}

/// Why a source cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReaderError {
    /// Its system posts to the daemon: there is nothing to read.
    #[error(
        "source {0:?} is not read: its system posts each reply to /sources/{0} on the ingest listener"
    )]
    Posted(String),
    #[error("cannot build its HTTP client: {0}")]
    Http(#[from] reqwest::Error),
}

impl Reader {
    /// Source `settings`, of the accounts `served`.
    pub fn new(settings: &SourceSettings, served: &[AccountId]) -> Result<Self, ReaderError> {
        let system = crate::systems::source_of(settings)
            .ok_or_else(|| ReaderError::Posted(settings.name.clone()))?;
        let rate = std::num::NonZeroU32::new(settings.requests_per_second)
            .unwrap_or(std::num::NonZeroU32::MIN);
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(Duration::from_secs(settings.timeout_secs))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("outreach-sync/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            system,
            recorder: Recorder::of(settings, served),
            settings: settings.clone(),
            limiter: governor::RateLimiter::direct(governor::Quota::per_second(rate)),
            http,
            metrics: None,
        })
    }

    /// Takes the writes of those of `destinations` that write the system it reads (the same
    /// kind, API and key) for what they are when read back: no news (see
    /// [`record::ECHO_WINDOW`]).
    pub fn echoing(mut self, destinations: &[DestinationSettings]) -> Self {
        self.recorder.echoes = destinations
            .iter()
            .filter(|d| self.settings.reads_what_writes(d))
            .map(|d| d.name.clone())
            .collect();
        self
    }

    /// Believes what it reads by `trust` (`[consent]`'s future tolerance and default
    /// region; the defaults until given).
    pub fn trusting(mut self, trust: Trust) -> Self {
        self.recorder.trust = trust;
        self
    }

    /// Counts its records and successes in `metrics`.
    pub fn counted_in(mut self, metrics: Arc<Metrics>) -> Self {
        metrics.source_known(
            &self.settings.name,
            self.settings.every_secs,
            Utc::now().timestamp(),
        );
        self.metrics = Some(metrics);
        self
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    /// Its requests, with the key in force.
    fn api<'a>(&'a self, key: &'a secrecy::SecretString) -> SourceApi<'a> {
        SourceApi {
            http: &self.http,
            base_url: self.settings.base_url.trim_end_matches('/'),
            key,
            timeout: Duration::from_secs(self.settings.timeout_secs),
            system: self.system.as_ref(),
            limiter: Some(&self.limiter),
        }
    }

    /// The key its reads are sent with: the API key, or the kind's own secret.
    fn key(&self) -> Result<secrecy::SecretString, ReadError> {
        let key = match self.settings.system.own().own_secret() {
            Some((_, secret)) => secret.cloned(),
            None => self.settings.api_key.clone(),
        };
        key.ok_or_else(|| ReadError::Stop(Stop::Credentials("no API key is configured".to_owned())))
    }

    /// Checks its key and what its reads need; what it found.
    pub async fn check(&self) -> Result<Vec<String>, ReadError> {
        let key = self.key()?;
        self.system.check(self.api(&key)).await
    }

    /// Runs forever (until `stop`): a run every `every_secs`, sooner after one that may
    /// pass by itself.
    pub async fn run(&self, pool: Pool, stop: CancellationToken) {
        let every = Duration::from_secs(self.settings.every_secs);
        let mut backoff = FIRST_BACKOFF;
        loop {
            // A run dropped part-way (the leader's lease lost, a reload) rolls back its
            // open transaction; its watermark stays.
            let run = tokio::select! {
                () = stop.cancelled() => return,
                run = self.run_once(&pool) => run,
            };
            let wait = match run {
                Ok(_) => {
                    backoff = FIRST_BACKOFF;
                    every
                }
                Err(error) if error.passing => {
                    let wait = backoff.min(every);
                    backoff = (backoff * 2).min(every);
                    wait
                }
                Err(_) => every,
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One run: the window from the watermark to now read and recorded, the watermark moved
    /// once all of it is; logged, counted and kept in the source's row either way.
    pub async fn run_once(&self, pool: &Pool) -> Result<RunReport, RunError> {
        let name = self.settings.name.as_str();
        let kind = self.recorder.kind.as_str();
        let failed = |error: String| RunError {
            error,
            passing: false,
            recorded: SourceCounts::default(),
        };
        pool.ensure_source(name, kind)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let now = Utc::now();
        let rows = pool.sources().await.map_err(|e| failed(e.to_string()))?;
        let from = rows
            .iter()
            .find(|r| r.source == name)
            .and_then(|r| r.watermark)
            .map(Timestamp::at)
            .unwrap_or_else(|| self.settings.first_read_from(now));
        if let Err(error) = pool.source_started(name, Timestamp(now)).await {
            tracing::warn!(source = name, %error, "cannot note the run's start in the source's row");
        }
        let window = Window {
            from,
            to: now,
            patience: Duration::from_secs(self.settings.job_timeout_secs),
            max_pages: self.settings.max_pages,
            region: self.recorder.trust.region,
        };
        let outcome = self.read_and_record(pool, window).await;
        let at = Timestamp(Utc::now());
        let kept = match &outcome {
            Ok(report) => {
                let watermark = report.watermark.unwrap_or(from);
                pool.source_ran(name, at, Ok(Timestamp(watermark))).await
            }
            Err(error) => pool.source_ran(name, at, Err(&error.error)).await,
        };
        if let Err(error) = kept {
            tracing::warn!(source = name, %error, "cannot keep the source's run in its row");
        }
        match &outcome {
            Ok(report) => {
                if let Some(metrics) = &self.metrics {
                    metrics.source_succeeded(name, at.at().timestamp());
                }
                tracing::info!(
                    source = name, kind, read = report.counts.read,
                    opt_outs = report.counts.opt_outs, confirmed = report.counts.confirmed,
                    ignored = report.counts.ignored, from = %from, "source read"
                );
            }
            Err(error) => tracing::warn!(
                source = name, kind, error = %error.error, read = error.recorded.read,
                opt_outs = error.recorded.opt_outs,
                "source run stopped: what it recorded is kept, its watermark stays"
            ),
        }
        outcome
    }

    /// Reads `window` and records what is read, as it comes.
    async fn read_and_record(&self, pool: &Pool, window: Window) -> Result<RunReport, RunError> {
        let key = self
            .key()
            .map_err(|e| run_error(&e, SourceCounts::default()))?;
        let mut conn = pool
            .bulk_connection(CACHE_KIB, CHECKPOINT_PAGES)
            .await
            .map_err(|e| RunError {
                error: e.to_string(),
                passing: true,
                recorded: SourceCounts::default(),
            })?;
        let (out, mut batches) = tokio::sync::mpsc::channel::<Vec<ReadRecord>>(IN_FLIGHT);
        let deadline = Duration::from_secs(self.settings.read_timeout_secs);
        // The read as a whole, not only each request or each byte: a file served a row every
        // few seconds, or a listing whose `next` is always new, ends here. Dropped, the
        // reader drops its sender, and what it handed on is recorded before the run ends.
        let read = async {
            tokio::time::timeout(deadline, self.system.read(self.api(&key), window, out))
                .await
                .unwrap_or_else(|_| {
                    Err(ReadError::Input(format!(
                        "the read took longer than read_timeout_secs ({} s) and was stopped; what it read is recorded, and the next run reads again from the same watermark",
                        deadline.as_secs()
                    )))
                })
        };
        let conn = &mut conn;
        // Moves the receiver in: when recording fails, it is dropped, and the reader stops
        // at its next batch instead of waiting for room.
        let record = async move {
            let mut counts = SourceCounts::default();
            let mut growth = Growth::default();
            while let Some(batch) = batches.recv().await {
                match self.recorder.record(conn, &batch).await {
                    Ok(done) => {
                        self.count(done);
                        counts += done;
                        growth
                            .wrote(
                                conn,
                                u64::try_from(done.opt_outs + done.opt_ins).unwrap_or(0),
                            )
                            .await;
                    }
                    Err(error) => return Err((error, counts)),
                }
            }
            Ok(counts)
        };
        let (read, recorded) = tokio::join!(read, record);
        match (read, recorded) {
            (Ok(watermark), Ok(counts)) => Ok(RunReport {
                counts,
                watermark: Some(trust::watermark(watermark, window.to)),
            }),
            (_, Err((error, counts))) => Err(RunError {
                error: format!("recording: {error}"),
                passing: true,
                recorded: counts,
            }),
            (Err(error), Ok(counts)) => Err(run_error(&error, counts)),
        }
    }

    fn count(&self, done: SourceCounts) {
        if let Some(metrics) = &self.metrics {
            metrics.source_counts(&self.settings.name, done);
            let future = u64::try_from(done.future).unwrap_or(0);
            metrics.future_times(self.recorder.kind.as_str(), future);
        }
    }
}

fn run_error(error: &ReadError, recorded: SourceCounts) -> RunError {
    RunError {
        error: error.to_string(),
        passing: matches!(error, ReadError::Stop(Stop::Retry { .. })),
        recorded,
    }
}

/// How often the leader looks for a reload's new list of sources.
const LIST_CHECK: Duration = Duration::from_secs(1);

/// Runs every source of `sources` until `stop` (the leader's work). When a reload replaces
/// the list, every reader stops where it is and the new list's start: a source added runs,
/// one removed stops, one changed runs as it now reads.
pub async fn run_configured(
    sources: Live<Vec<SourceSettings>>,
    (served, destinations, trust): (Vec<AccountId>, Vec<DestinationSettings>, Trust),
    pool: Pool,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    loop {
        let list = sources.current();
        let these = stop.child_token();
        let readers: Vec<Reader> = list
            .iter()
            .filter(|s| s.system.polled())
            .filter_map(|s| match Reader::new(s, &served) {
                Ok(reader) => Some(
                    reader
                        .echoing(&destinations)
                        .trusting(trust)
                        .counted_in(metrics.clone()),
                ),
                Err(error) => {
                    tracing::error!(source = %s.name, %error, "cannot build the source's HTTP client; it does not run");
                    None
                }
            })
            .collect();
        // Readers end only once stopped; with none (an empty list) this waits for a reload.
        let running = async {
            futures::future::join_all(
                readers
                    .iter()
                    .map(|reader| reader.run(pool.clone(), these.clone())),
            )
            .await;
            std::future::pending::<()>().await;
        };
        let replaced = async {
            while Arc::ptr_eq(&list, &sources.current()) {
                tokio::time::sleep(LIST_CHECK).await;
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = running => {}
            () = replaced => {
                these.cancel();
                tracing::info!(sources = sources.current().len(), "sources replaced by a reload");
            }
        }
    }
}
