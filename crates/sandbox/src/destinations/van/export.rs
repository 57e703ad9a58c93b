//! A changed-entity export job: what it selected when created (a window of the committee's
//! change log, without the caller's own changes when asked), how it moves from `Pending`
//! through `InProcess` to `Complete` over the polls, and the files it is cut into.

use chrono::{DateTime, Duration, Utc};
use rand::Rng as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::catalog::CHANGE_COLUMNS;
use super::changes::{Resource, Seed, VanChange, VanChangedBy, timestamp};

/// How a committee's export jobs behave, faults included (each job keeps the settings of
/// its creation). `PUT /_control/van/export` sets them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VanExportSettings {
    /// Polls of `GET /changedEntityExportJobs/{id}` answered before `Complete`: the first
    /// `Pending` (when two or more), the others `InProcess`. Default 2.
    pub polls_before_complete: u32,
    /// At most this many rows per file (a `fileSizeKbLimit` may make files smaller).
    pub rows_per_file: u64,
    /// Fault: the files lack this column (a requested or core field).
    pub missing_column: Option<String>,
    /// Fault: a row that is not one (wrong columns, not a VAN ID) among the good ones.
    pub garbage_row: bool,
    /// Fault: the job's one file is [`HUGE_FILE_BYTES`] of rows, made as it is sent.
    pub huge_file: bool,
    /// Fault: the job never leaves `InProcess`.
    pub stuck: bool,
    /// Fault: the download URLs have expired when the job completes (403 at the download).
    pub expired_urls: bool,
    /// Fault: the job's status is `Error` with this message.
    pub error: Option<String>,
    /// Hostile: every row's `DateChanged` is this many seconds later than the change (a
    /// VAN clock gone wrong): 2,300,000,000 puts a change of 2026 in 2099.
    pub future_by_secs: Option<i64>,
    /// Hostile: no `PhoneDialingPrefix` on any row: numbers without their country code.
    pub national_numbers: bool,
    /// Hostile: the file's rows come one at a time this many milliseconds apart, and after
    /// them made-up rows at the same pace, without end: a file that never finishes, though
    /// each byte comes in time.
    pub trickle_ms: Option<u64>,
    /// Hostile: each download answers `302 Found` to this URL instead of the file.
    pub redirect_downloads_to: Option<String>,
}

impl Default for VanExportSettings {
    fn default() -> Self {
        Self {
            polls_before_complete: 2,
            rows_per_file: 10_000,
            missing_column: None,
            garbage_row: false,
            huge_file: false,
            stuck: false,
            expired_urls: false,
            error: None,
            future_by_secs: None,
            national_numbers: false,
            trickle_ms: None,
            redirect_downloads_to: None,
        }
    }
}

/// The size of the file of [`VanExportSettings::huge_file`]: 2 GiB.
pub const HUGE_FILE_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// How long a download URL lives (VAN documents 20 days).
const DOWNLOAD_LIFETIME_DAYS: i64 = 20;

/// VAN keeps this many days of changes.
pub(crate) const RETENTION_DAYS: i64 = 90;

/// The size a row is taken to have when `fileSizeKbLimit` cuts files.
const ROW_BYTES: u64 = 100;

/// One file of a job: the rows `[first_row, first_row + rows)` of its selection.
#[derive(Debug, Clone)]
pub(crate) struct JobFile {
    pub token: String,
    pub first_row: u64,
    pub rows: u64,
    pub expires: DateTime<Utc>,
}

/// A contact's phone is one record: VAN exports its current version, once, however often it
/// changed in the window (and leaves it out with `excludeChangesFromSelf` when the caller
/// made its last change). A canvass response is a record of its own and is never merged.
fn current_versions(changes: Vec<VanChange>) -> Vec<VanChange> {
    let mut last = std::collections::HashMap::new();
    for (i, c) in changes.iter().enumerate() {
        last.insert(
            (c.van_id, c.dialing_prefix.clone(), c.phone_number.clone()),
            i,
        );
    }
    changes
        .into_iter()
        .enumerate()
        .filter(|(i, c)| {
            last.get(&(c.van_id, c.dialing_prefix.clone(), c.phone_number.clone())) == Some(i)
        })
        .map(|(_, c)| c)
        .collect()
}

/// A job, as created.
pub(crate) struct ExportJob {
    pub id: u64,
    pub committee: usize,
    pub resource: Resource,
    /// As the request named them (canonical case).
    pub requested_fields: Vec<&'static str>,
    /// The file's columns: the core and requested fields in field order, then VAN's own.
    pub columns: Vec<&'static str>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub exclude_self: bool,
    pub file_size_kb_limit: Option<u64>,
    pub settings: VanExportSettings,
    pub polls: u32,
    /// The selected changes of the log, oldest first; then the seeded rows.
    pub explicit: Vec<VanChange>,
    pub seeded: Vec<(Seed, u64, u64)>,
    pub files: Vec<JobFile>,
    /// A reference of the `Error` fault.
    pub code: String,
}

/// What a new job selects and how.
pub(crate) struct JobRequest {
    pub resource: Resource,
    pub requested_fields: Vec<&'static str>,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub exclude_self: bool,
    pub file_size_kb_limit: Option<u64>,
}

fn token() -> String {
    let mut bytes = [0u8; 16];
    rand::thread_rng().fill(&mut bytes[..]);
    hex::encode(bytes)
}

impl ExportJob {
    /// Selects the changes of `log` and `seeds` in the window (the caller's own left out
    /// when asked) and cuts them into files.
    pub(crate) fn new(
        id: u64,
        committee: usize,
        request: JobRequest,
        (log, seeds): (&[VanChange], &[Seed]),
        settings: VanExportSettings,
    ) -> Self {
        let in_window = |at: DateTime<Utc>| request.from <= at && at < request.to;
        let mut explicit: Vec<VanChange> = log
            .iter()
            .filter(|c| Resource::of(c) == request.resource && in_window(c.at))
            .cloned()
            .collect();
        explicit.sort_by_key(|c| c.at);
        if request.resource == Resource::Contacts {
            explicit = current_versions(explicit);
        }
        explicit.retain(|c| !(request.exclude_self && matches!(c.by, VanChangedBy::Api { .. })));
        let seeded: Vec<(Seed, u64, u64)> = seeds
            .iter()
            .filter(|s| s.resource == request.resource)
            .map(|s| {
                let (lo, hi) = s.within(request.from, request.to);
                (s.clone(), lo, hi)
            })
            .filter(|(_, lo, hi)| hi > lo)
            .collect();
        let columns = request
            .resource
            .fields()
            .iter()
            .filter(|f| f.core || request.requested_fields.contains(&f.name))
            .map(|f| f.name)
            .chain(CHANGE_COLUMNS)
            .collect();
        let mut job = Self {
            id,
            committee,
            resource: request.resource,
            requested_fields: request.requested_fields,
            columns,
            from: request.from,
            to: request.to,
            exclude_self: request.exclude_self,
            file_size_kb_limit: request.file_size_kb_limit,
            settings,
            polls: 0,
            explicit,
            seeded,
            files: Vec::new(),
            code: token()[..8].to_ascii_uppercase(),
        };
        job.files = job.cut();
        job
    }

    pub(crate) fn total_rows(&self) -> u64 {
        self.explicit.len() as u64 + self.seeded.iter().map(|(_, lo, hi)| hi - lo).sum::<u64>()
    }

    fn cut(&self) -> Vec<JobFile> {
        let mut per_file = self.settings.rows_per_file.max(1);
        if let Some(kb) = self.file_size_kb_limit {
            per_file = per_file.min((kb.saturating_mul(1024) / ROW_BYTES).max(1));
        }
        let total = self.total_rows();
        let count = if self.settings.huge_file {
            1
        } else {
            total.div_ceil(per_file).max(1)
        };
        let now = Utc::now();
        let expires = if self.settings.expired_urls {
            now - Duration::minutes(1)
        } else {
            now + Duration::days(DOWNLOAD_LIFETIME_DAYS)
        };
        (0..count)
            .map(|k| {
                let first_row = k * per_file;
                let rows = if self.settings.huge_file {
                    total
                } else {
                    per_file.min(total - first_row.min(total))
                };
                JobFile {
                    token: token(),
                    first_row,
                    rows,
                    expires,
                }
            })
            .collect()
    }

    /// The rows of `file`, the changes of the log cloned and the seeded ones as ranges.
    pub(crate) fn rows_of(&self, file: &JobFile) -> (Vec<VanChange>, Vec<(Seed, u64, u64)>) {
        let (start, end) = (file.first_row, file.first_row + file.rows);
        let n = self.explicit.len() as u64;
        let explicit = self
            .explicit
            .iter()
            .skip(usize::try_from(start).unwrap_or(usize::MAX))
            .take(usize::try_from(end.min(n).saturating_sub(start)).unwrap_or(0))
            .cloned()
            .collect();
        let mut seeded = Vec::new();
        let mut offset = n;
        for (seed, lo, hi) in &self.seeded {
            let len = hi - lo;
            let (a, b) = (start.max(offset), end.min(offset + len));
            if a < b {
                seeded.push((seed.clone(), lo + (a - offset), lo + (b - offset)));
            }
            offset += len;
        }
        (explicit, seeded)
    }

    /// The status a poll sees, counting it.
    pub(crate) fn poll(&mut self) -> &'static str {
        self.polls = self.polls.saturating_add(1);
        let first_pending = self.polls == 1 && self.settings.polls_before_complete >= 2;
        if self.settings.error.is_some() {
            "Error"
        } else if self.settings.stuck || self.polls <= self.settings.polls_before_complete {
            if first_pending {
                "Pending"
            } else {
                "InProcess"
            }
        } else {
            "Complete"
        }
    }

    /// The job object with `status`; the files' URLs on `host`.
    pub(crate) fn answer(&self, status: &str, host: &str) -> Value {
        let complete = status == "Complete";
        let files: Vec<Value> = if complete {
            self.files
                .iter()
                .map(|f| {
                    json!({
                        "downloadUrl": format!("http://{host}/van-files/{}.csv", f.token),
                        "dateExpired": timestamp(f.expires),
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        let message = match status {
            "Pending" => "Created export job".to_owned(),
            "InProcess" => "Processing export job".to_owned(),
            "Complete" => "Finished processing export job".to_owned(),
            _ => self.settings.error.clone().unwrap_or_default(),
        };
        json!({
            "exportJobId": self.id,
            "jobStatus": status,
            "resourceType": self.resource.name(),
            "dateChangedFrom": timestamp(self.from),
            "dateChangedTo": timestamp(self.to),
            "requestedFields": self.requested_fields,
            "excludeChangesFromSelf": self.exclude_self,
            "fileSizeKbLimit": self.file_size_kb_limit,
            "files": files,
            "message": message,
            "code": (status == "Error").then(|| self.code.clone()),
            "exportedRecordCount": if complete { self.total_rows() } else { 0 },
        })
    }
}

/// A job as the truth shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanExportJobTruth {
    pub export_job_id: u64,
    pub committee_id: u32,
    pub resource_type: String,
    pub exclude_changes_from_self: bool,
    pub polls: u32,
    pub rows: u64,
    pub files: usize,
}

impl ExportJob {
    pub(crate) fn truth(&self, committee_id: u32) -> VanExportJobTruth {
        VanExportJobTruth {
            export_job_id: self.id,
            committee_id,
            resource_type: self.resource.name().into(),
            exclude_changes_from_self: self.exclude_self,
            polls: self.polls,
            rows: self.total_rows(),
            files: self.files.len(),
        }
    }
}
