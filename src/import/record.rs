//! An import from start to end: the list read whole first (a list with an invalid row is
//! refused before anything is recorded), then its numbers recorded a batch per transaction,
//! so that deliveries keep being committed while a long list goes in.

use std::io::Read;

use chrono::Utc;
use serde::Serialize;

use super::{InvalidRow, ListError, ListOptions, ListReader, Row};
use crate::apply::imported::{self, BatchCounts, ListEvidence, ListedNumber, Scope};
use crate::store::Pool;

/// Numbers per write transaction: the write lock is held for one batch at a time.
const BATCH: usize = 2000;
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
    pub scope: Scope,
    pub options: ListOptions,
    /// The file as named (`-` for standard input, the upload's name on the console).
    pub file: String,
    pub actor: String,
    pub reason: Option<String>,
    pub skip_invalid: bool,
    pub dry_run: bool,
}

/// What an import did, or with `dry_run` would do (the contract's result).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
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
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal<'a> {
    pub message: String,
    pub rows: u64,
    /// How many rows are invalid; `invalid` names the first [`MAX_INVALID_KEPT`].
    pub invalid_count: u64,
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
    #[error("cannot record the list: {0}")]
    Database(#[from] crate::store::Error),
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
                    "organization {org:?}: an organization id of 1 to {} characters is expected (\"*\" is the account: --account)",
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

/// Reads `input` (on a blocking thread: the reader is synchronous), then records it.
pub async fn import(
    pool: impl Into<Pool>,
    input: impl Read + Send + 'static,
    request: &Request,
) -> Result<Report, ImportError> {
    request.check()?;
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
        file: request.file.clone(),
        sha256: report.sha256.clone(),
        actor: request.actor.clone(),
        reason: request.reason.clone(),
    };
    let pool = pool.into();
    let mut conn = pool.bulk_connection(CACHE_KIB, CHECKPOINT_PAGES).await?;
    let mut counts = BatchCounts::default();
    for chunk in numbers.chunks(BATCH) {
        let batch: Vec<ListedNumber> = chunk
            .iter()
            .map(|&(digits, line)| ListedNumber {
                phone_number: format!("+{digits}"),
                line,
            })
            .collect();
        let mut tx = conn.begin_write().await?;
        let now = Utc::now();
        counts +=
            imported::record_batch(&mut tx, &request.scope, &list, &batch, now, request.dry_run)
                .await?;
        if request.dry_run {
            tx.rollback().await?;
        } else {
            tx.commit().await?;
            crate::signal::ledger_grew();
        }
    }
    report.already_opted_out = counts.already_opted_out;
    report.recorded = counts.recorded;
    report.suppressed = counts.suppressed;
    report.pushes = counts.pushes;
    Ok(report)
}

fn read_list(input: impl Read, options: &ListOptions) -> Result<ReadList, ListError> {
    let mut reader = ListReader::new(input, options)?;
    let mut numbers = Vec::new();
    let mut invalid_rows = Vec::new();
    while let Some(row) = reader.next_row()? {
        match row {
            Row::Number { line, number } => numbers.push((super::digits(&number), line)),
            Row::Repeat { .. } => {}
            Row::Invalid(row) if invalid_rows.len() < MAX_INVALID_KEPT => invalid_rows.push(row),
            Row::Invalid(_) => {}
        }
    }
    let summary = reader.finish()?;
    Ok(ReadList {
        numbers,
        report: Report {
            rows: summary.rows,
            valid: summary.valid,
            invalid: summary.invalid,
            duplicates_in_file: summary.duplicates_in_file,
            sha256: summary.sha256,
            invalid_rows,
            ..Report::default()
        },
    })
}
