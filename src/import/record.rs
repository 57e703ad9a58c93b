//! An import from start to end: the list read whole first (a list with an invalid row is
//! refused before anything is recorded), then its numbers recorded a batch per transaction,
//! so that deliveries keep being committed while a long list goes in. A dry run reads in
//! transactions that take no write lock, so it never holds up a writer.
//!
//! Every import says in the log that it started, and that it finished or why it stopped
//! (with what it had recorded by then), whoever started it: the CLI, the API or the console.

use crate::model::AccountId;
use std::io::Read;
use std::time::Instant;

use chrono::Utc;
use serde::Serialize;

use super::{InvalidRow, ListError, ListOptions, ListReader, Numbers, Row};
use crate::apply::imported::{self, BatchCounts, ListEvidence, ListedNumber, Scope};
use crate::store::Pool;

/// Numbers per write transaction at most: the write lock is held for one batch at a time.
const BATCH: usize = 2000;
/// Numbers recorded at once within a transaction on SQLite: a transaction that ingest waits
/// for ends after the slice it is recording, so a delivery waits for at most this many.
const SLICE: usize = 200;
/// The least pause between two slices of an import run beside the daemon (the CLI's).
const GAP_OUTSIDE_THE_DAEMON: std::time::Duration = std::time::Duration::from_millis(5);
/// The import's own connection (SQLite): a page cache of this many KiB, and a WAL
/// checkpoint every this many pages rather than SQLite's 1,000. A list's numbers come in no
/// order, into indexes keyed by number; with the defaults nearly every batch's commit also
/// checkpointed, half of an import's time.
const CACHE_KIB: u32 = 4096;
const CHECKPOINT_PAGES: u32 = 10_000;
/// Invalid rows kept to be named back; past it they are counted only (a list of a million
/// bad rows must not cost their text in memory).
pub const MAX_INVALID_KEPT: usize = 10_000;

/// What an import asks for.
#[derive(Debug, Clone)]
pub struct Request {
    /// The account of the service the list is recorded in.
    pub account: AccountId,
    pub scope: Scope,
    pub options: ListOptions,
    /// The file as named (`-` for standard input, the upload's name on the console).
    pub file: String,
    pub actor: String,
    pub reason: Option<String>,
    pub skip_invalid: bool,
    pub dry_run: bool,
    /// Run by another process than `serve` (the CLI), which cannot see a delivery wait for
    /// its turn at the daemon's gate: each slice is then a transaction of its own, so a
    /// delivery beside it waits for one slice at most.
    pub outside_the_daemon: bool,
}

/// What an import did, or with `dry_run` would do (the contract's result).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ImportResult)]
pub struct Report {
    pub rows: u64,
    pub valid: u64,
    pub invalid: u64,
    pub duplicates_in_file: u64,
    /// (organization, number) pairs opted out already, left as they were.
    pub already_opted_out: u64,
    /// Ledger entries recorded.
    pub recorded: u64,
    /// Numbers suppressed that were not.
    pub suppressed: u64,
    /// Opt-outs queued for the service (mirrored leads of the numbers).
    pub pushes: u64,
    pub sha256: String,
    pub dry_run: bool,
    /// The invalid rows (the first [`MAX_INVALID_KEPT`]), skipped with `skip_invalid`.
    pub invalid_rows: Vec<InvalidRow>,
}

/// A refused list, as the CLI's `--json` and the admin API give it: every invalid row kept.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ImportRefusal)]
pub struct Refusal<'a> {
    pub message: String,
    pub rows: u64,
    /// How many rows are invalid; `invalid` names the first [`MAX_INVALID_KEPT`].
    pub invalid_count: u64,
    #[schema(value_type = Vec<InvalidRow>)]
    pub invalid: &'a [InvalidRow],
    pub sha256: &'a str,
}

impl Report {
    /// The refusal of this list, saying `message`.
    pub fn refusal(&self, message: String) -> Refusal<'_> {
        Refusal {
            message,
            rows: self.rows,
            invalid_count: self.invalid,
            invalid: &self.invalid_rows,
            sha256: &self.sha256,
        }
    }
}

/// Why nothing was recorded.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    List(#[from] ListError),
    /// The list holds invalid rows and `skip_invalid` was not given.
    #[error("{} of {} rows hold no possible phone number; nothing was recorded (--skip-invalid records the others)", .0.invalid, .0.rows)]
    Refused(Box<Report>),
    /// The database failed: the batches committed before (`recorded`) stay recorded, the
    /// rest of the list is not. (The database's own words are the source, for the log.)
    #[error("the database failed after {} entries of the list were recorded, and the rest were not; importing the list again records the rest (nothing is recorded twice)", .recorded.recorded)]
    Aborted {
        sha256: String,
        recorded: BatchCounts,
        #[source]
        error: crate::store::Error,
    },
}

impl Request {
    fn check(&self) -> Result<(), ImportError> {
        if let Scope::Organizations(orgs) = &self.scope {
            if orgs.is_empty() {
                return Err(ImportError::Invalid(
                    "name the organizations (--org ID) or the whole account (--account)".into(),
                ));
            }
            if let Some(org) = orgs.iter().find(|o| {
                o.trim().is_empty()
                    || *o == crate::model::ACCOUNT_WIDE
                    || o.chars().count() > crate::model::MAX_ID_CHARS
            }) {
                return Err(ImportError::Invalid(format!(
                    "organization {}: an organization id of 1 to {} characters is expected (\"*\" is the account: --account)",
                    super::quoted(org, crate::model::MAX_ID_CHARS),
                    crate::model::MAX_ID_CHARS
                )));
            }
        }
        if self
            .reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > crate::model::MAX_REASON_CHARS)
        {
            return Err(ImportError::Invalid(format!(
                "reason is at most {} characters",
                crate::model::MAX_REASON_CHARS
            )));
        }
        Ok(())
    }
}

/// A list read whole: its distinct numbers and what the file says.
struct ReadList {
    numbers: Vec<(u64, u64)>,
    report: Report,
}

/// Reads `input` (on a blocking thread: the reader is synchronous), then records it; logs
/// its start and its end.
pub async fn import(
    pool: impl Into<Pool>,
    input: impl Read + Send + 'static,
    request: &Request,
) -> Result<Report, ImportError> {
    let began = Instant::now();
    if let Err(error) = request.check() {
        tracing::info!(actor = ?request.actor, %error, "import refused; nothing was recorded");
        return Err(error);
    }
    tracing::info!(
        actor = ?request.actor, file = ?request.file, scope = %request.scope,
        dry_run = request.dry_run, "import started"
    );
    let mut stopped = StoppedPartWay(Some(request));
    let outcome = run(pool.into(), input, request).await;
    stopped.0 = None;
    let duration_ms = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
    match &outcome {
        Ok(report) => tracing::info!(
            actor = ?request.actor, file = ?request.file, sha256 = %report.sha256,
            dry_run = request.dry_run, rows = report.rows, valid = report.valid,
            invalid = report.invalid, recorded = report.recorded,
            already_opted_out = report.already_opted_out, suppressed = report.suppressed,
            pushes = report.pushes, duration_ms, "import finished"
        ),
        Err(ImportError::Aborted {
            sha256,
            recorded: counts,
            error,
        }) => tracing::warn!(
            actor = ?request.actor, file = ?request.file, sha256 = %sha256,
            dry_run = request.dry_run, recorded = counts.recorded,
            already_opted_out = counts.already_opted_out, suppressed = counts.suppressed,
            pushes = counts.pushes, duration_ms, %error,
            "import aborted: the entries counted here are recorded, the rest of the list is not"
        ),
        Err(ImportError::Refused(report)) => tracing::info!(
            actor = ?request.actor, file = ?request.file, sha256 = %report.sha256,
            rows = report.rows, invalid = report.invalid, duration_ms,
            "import refused: the list holds invalid rows; nothing was recorded"
        ),
        Err(error) => tracing::info!(
            actor = ?request.actor, file = ?request.file, duration_ms, %error,
            "import refused; nothing was recorded"
        ),
    }
    outcome
}

/// Says so in the log when an import is dropped before its end (the daemon stopped while it
/// ran): it is then neither finished nor aborted, and must not leave a start alone.
struct StoppedPartWay<'r>(Option<&'r Request>);

impl Drop for StoppedPartWay<'_> {
    fn drop(&mut self) {
        if let Some(request) = self.0 {
            tracing::warn!(
                actor = ?request.actor, file = ?request.file, dry_run = request.dry_run,
                "import stopped part-way (the daemon stopped): the batches committed before it are recorded; importing the list again records the rest"
            );
        }
    }
}

/// The import itself.
async fn run(
    pool: Pool,
    input: impl Read + Send + 'static,
    request: &Request,
) -> Result<Report, ImportError> {
    let options = request.options.clone();
    let read = tokio::task::spawn_blocking(move || read_list(input, &options))
        .await
        .map_err(|e| ImportError::Invalid(format!("reading the list stopped: {e}")))??;
    let ReadList {
        numbers,
        mut report,
    } = read;
    report.dry_run = request.dry_run;
    if report.invalid > 0 && !request.skip_invalid {
        return Err(ImportError::Refused(Box::new(report)));
    }
    let list = ListEvidence {
        account: request.account.clone(),
        file: request.file.clone(),
        sha256: report.sha256.clone(),
        actor: request.actor.clone(),
        reason: request.reason.clone(),
    };
    let mut counts = BatchCounts::default();
    // A dry run records nothing, whatever it had counted.
    let aborted = |counts: BatchCounts, error| ImportError::Aborted {
        sha256: report.sha256.clone(),
        recorded: if request.dry_run {
            BatchCounts::default()
        } else {
            counts
        },
        error,
    };
    let mut conn = pool
        .bulk_connection(CACHE_KIB, CHECKPOINT_PAGES)
        .await
        .map_err(|e| aborted(counts, e))?;
    // Only a database with one writer at a time makes a delivery wait for an import's
    // transaction: elsewhere (PostgreSQL), and for a dry run (which takes no turn), a batch
    // is recorded whole.
    let slice = if conn.single_writer() && !request.dry_run {
        SLICE
    } else {
        BATCH
    };
    let mut slices = numbers.chunks(slice).peekable();
    while slices.peek().is_some() {
        let began = std::time::Instant::now();
        let done = record(&mut conn, request, &list, &mut slices)
            .await
            .map_err(|e| aborted(counts, e))?;
        // Counted once committed: what an aborted import tells is what it recorded.
        counts += done;
        if request.outside_the_daemon && slice == SLICE {
            // The daemon's writer waits on the file's lock, retrying at growing intervals:
            // left as long as the slice took, the lock is free half the time, so it gets
            // in within a slice or two instead of being starved by commit after commit.
            tokio::time::sleep(began.elapsed().max(GAP_OUTSIDE_THE_DAEMON)).await;
        }
    }
    report.already_opted_out = counts.already_opted_out;
    report.recorded = counts.recorded;
    report.suppressed = counts.suppressed;
    report.pushes = counts.pushes;
    Ok(report)
}

/// One transaction of slices of the list: committed, or with `dry_run` only planned in a
/// transaction that reads (no write lock, no turn at the writers' gate) and rolled back.
/// It takes slices until it holds [`BATCH`] numbers, or, writing, until ingest waits for
/// its turn: a delivery then waits for one slice, not for the whole batch.
async fn record<'n>(
    conn: &mut crate::store::Connection,
    request: &Request,
    list: &ListEvidence,
    slices: &mut impl Iterator<Item = &'n [(u64, u64)]>,
) -> Result<BatchCounts, crate::store::Error> {
    let now = Utc::now();
    let mut tx = if request.dry_run {
        conn.begin_read().await?
    } else {
        conn.begin_write().await?
    };
    let mut counts = BatchCounts::default();
    let mut taken = 0;
    for slice in slices {
        let batch: Vec<ListedNumber> = slice
            .iter()
            .map(|&(digits, line)| ListedNumber {
                phone_number: format!("+{digits}"),
                line,
            })
            .collect();
        counts +=
            imported::record_batch(&mut tx, &request.scope, list, &batch, now, request.dry_run)
                .await?;
        taken += slice.len();
        if taken >= BATCH || tx.wanted_by_ingest() || request.outside_the_daemon {
            break;
        }
    }
    if request.dry_run {
        tx.rollback().await?;
    } else {
        tx.commit().await?;
        crate::signal::ledger_grew();
    }
    Ok(counts)
}

fn read_list(input: impl Read, options: &ListOptions) -> Result<ReadList, ListError> {
    let mut reader = ListReader::new(input, options)?;
    let mut numbers = Numbers::default();
    let mut invalid_rows = Vec::new();
    while let Some(row) = reader.next_row()? {
        match row {
            Row::Number { line, number } => numbers.push(&number, line),
            Row::Invalid(row) if invalid_rows.len() < MAX_INVALID_KEPT => invalid_rows.push(row),
            Row::Invalid(_) => {}
        }
    }
    let summary = reader.finish()?;
    let (numbers, duplicates_in_file) = numbers.finish();
    Ok(ReadList {
        numbers,
        report: Report {
            rows: summary.rows,
            valid: summary.valid,
            invalid: summary.invalid,
            duplicates_in_file,
            sha256: summary.sha256,
            invalid_rows,
            ..Report::default()
        },
    })
}
