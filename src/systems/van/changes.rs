//! VAN read back: its changed entities. Each run makes an export job per resource
//! (`Contacts`: a phone and its opt-in status; `ContactHistory`: canvass responses) for
//! the window, with `excludeChangesFromSelf` (what this key wrote is not read back), polls
//! it until `Complete`, and reads its files. A phone whose opt-in status became the one
//! named "Opt-Out", or a canvass response whose result is `result_code` ("Do Not Text"),
//! is an opt-out; the ids of both are looked up by name (`/changedEntityExportJobs/fields`,
//! `/canvassResponses/resultCodes`), never assumed.
//!
//! A file is downloaded from a host that is not VAN's, with no credential of any kind, to a
//! temporary file (bounded: [`MAX_FILE_BYTES`]) while its SHA-256 is taken, then read as
//! CSV on a blocking thread, its records handed on a batch at a time.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::json;
use sha2::Digest as _;

use super::super::Pending;
use super::super::source::{
    BATCH, ReadError, ReadRecord, Records, Said, Source, SourceApi, Window,
};
use super::{ResultCode, basic};
use crate::settings::kinds::van::VanSettings;

/// How many days of changes VAN keeps.
pub const KEPT_DAYS: i64 = 90;
/// How far behind the watermark a read starts: a change VAN dates a little before it
/// committed it is read again, and recorded once.
pub const OVERLAP: chrono::Duration = chrono::Duration::minutes(5);
/// Largest file read: past it, the run stops with an error saying so. Jobs ask for files of
/// at most [`FILE_SIZE_KB`], so a file past it is not VAN's.
pub const MAX_FILE_BYTES: u64 = 256 << 20;
/// The `fileSizeKbLimit` a job asks for.
const FILE_SIZE_KB: u64 = 100_000;
/// The first wait between two polls of a job; doubled up to [`MAX_POLL_WAIT`].
const FIRST_POLL_WAIT: Duration = Duration::from_millis(250);
const MAX_POLL_WAIT: Duration = Duration::from_secs(15);

/// The phone's resource and its fields.
const CONTACTS: &str = "Contacts";
const CONTACT_FIELDS: [&str; 4] = ["VanID", "Phone", "PhoneDialingPrefix", "PhoneOptInStatusID"];
/// The canvass responses' resource and its fields.
const HISTORY: &str = "ContactHistory";
const HISTORY_FIELDS: [&str; 4] = ["VanID", "ResultID", "Phone", "PhoneDialingPrefix"];
/// The field whose values name the opt-in statuses, and the names read.
const STATUS_FIELD: &str = "PhoneOptInStatusID";
const OPT_OUT: &str = "Opt-Out";
const OPT_IN: &str = "Opt-In";
/// VAN's own column: when the record changed.
const DATE_CHANGED: &str = "DateChanged";

/// A VAN committee's changed entities, reached with one API key.
#[derive(Debug)]
pub struct Changes {
    application_name: String,
    database_mode: u8,
    result_code: String,
    /// What the reads need, once looked up.
    ids: Mutex<Option<Ids>>,
}

/// The committee's ids of what is an opt-out (and an opt-in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ids {
    opted_out: i64,
    opted_in: i64,
    result_code: i64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FieldInfo {
    field_name: String,
    #[serde(default)]
    available_values: Option<Vec<Available>>,
}

#[derive(Debug, Deserialize)]
struct Available {
    id: i64,
    name: String,
}

/// An export job as VAN answers it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Job {
    export_job_id: i64,
    job_status: String,
    #[serde(default)]
    files: Vec<JobFile>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JobFile {
    download_url: String,
}

impl Changes {
    pub fn new(own: &VanSettings) -> Self {
        Self {
            application_name: own.application_name().to_owned(),
            database_mode: own.database_mode(),
            result_code: own.result_code().to_owned(),
            ids: Mutex::new(None),
        }
    }

    /// Looks up the resources, the statuses' ids and the result code's id; what it found.
    async fn look_up(&self, api: &SourceApi<'_>) -> Result<(Ids, Vec<String>), ReadError> {
        let path = "/changedEntityExportJobs/resources";
        let resources: Vec<String> = api.get_json(path, path).await?;
        let mut found = Vec::new();
        let mut statuses = (0, 0);
        for (resource, fields) in [(CONTACTS, &CONTACT_FIELDS), (HISTORY, &HISTORY_FIELDS)] {
            if !resources.iter().any(|r| r.eq_ignore_ascii_case(resource)) {
                return Err(lookup(format!(
                    "the key cannot export the resource {resource} (it may: {})",
                    resources.join(", ")
                )));
            }
            let path = format!("/changedEntityExportJobs/fields/{resource}");
            let infos: Vec<FieldInfo> = api.get_json(&path, &path).await?;
            if let Some(missing) = fields
                .iter()
                .find(|f| !infos.iter().any(|i| i.field_name.eq_ignore_ascii_case(f)))
            {
                return Err(lookup(format!("{resource} has no field {missing}")));
            }
            found.push(format!("resource {resource}: {}", fields.join(", ")));
            if resource == CONTACTS {
                let values = infos
                    .iter()
                    .find(|i| i.field_name.eq_ignore_ascii_case(STATUS_FIELD))
                    .and_then(|i| i.available_values.as_deref())
                    .unwrap_or_default();
                let id_of = |name: &str| {
                    values
                        .iter()
                        .find(|v| same_name(&v.name, name))
                        .map(|v| v.id)
                        .ok_or_else(|| {
                            lookup(format!("{STATUS_FIELD} has no value named {name:?}"))
                        })
                };
                let (out, ins) = (id_of(OPT_OUT)?, id_of(OPT_IN)?);
                statuses = (out, ins);
                found.push(format!(
                    "{STATUS_FIELD}: {OPT_OUT} is {out}, {OPT_IN} is {ins}"
                ));
            }
        }
        let path = "/canvassResponses/resultCodes";
        let codes: Vec<ResultCode> = api.get_json(path, path).await?;
        let result_code = codes
            .iter()
            .find(|c| same_name(&c.name, &self.result_code))
            .map(|c| c.result_code_id)
            .ok_or_else(|| {
                lookup(format!(
                    "no result code named {:?} in this committee",
                    self.result_code
                ))
            })?;
        found.push(format!(
            "result code {:?} is {result_code}",
            self.result_code
        ));
        let ids = Ids {
            opted_out: statuses.0,
            opted_in: statuses.1,
            result_code,
        };
        if let Ok(mut kept) = self.ids.lock() {
            *kept = Some(ids);
        }
        Ok((ids, found))
    }

    /// The ids, looked up now if they are not.
    async fn ids(&self, api: &SourceApi<'_>) -> Result<Ids, ReadError> {
        if let Some(ids) = self.ids.lock().ok().and_then(|ids| *ids) {
            return Ok(ids);
        }
        Ok(self.look_up(api).await?.0)
    }

    /// One resource's job for `window`: made, waited for, its files read.
    async fn export(
        &self,
        api: &SourceApi<'_>,
        (resource, fields): (&'static str, &'static [&'static str]),
        window: Window,
        (ids, out): (Ids, &Records),
    ) -> Result<(), ReadError> {
        let body = json!({
            "dateChangedFrom": window.from.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "dateChangedTo": window.to.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "resourceType": resource,
            "requestedFields": fields,
            "excludeChangesFromSelf": true,
            "fileSizeKbLimit": FILE_SIZE_KB,
        });
        let path = "/changedEntityExportJobs";
        let mut job: Job = api
            .post_json(path, &body, "a changed-entity export job")
            .await?;
        let mut wait = FIRST_POLL_WAIT;
        let began = tokio::time::Instant::now();
        while job.job_status != "Complete" {
            match job.job_status.as_str() {
                "Error" => {
                    return Err(ReadError::Stop(super::super::Stop::Retry {
                        error: format!(
                            "export job {} of {resource} ended in Error: {}",
                            job.export_job_id,
                            job.message.as_deref().unwrap_or("VAN gave no message")
                        ),
                        retry_after: None,
                    }));
                }
                status if began.elapsed() > window_patience(&window) => {
                    return Err(ReadError::Input(format!(
                        "export job {} of {resource} is still {status} after {} s",
                        job.export_job_id,
                        began.elapsed().as_secs()
                    )));
                }
                _ => {}
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MAX_POLL_WAIT);
            let path = format!("/changedEntityExportJobs/{}", job.export_job_id);
            job = api.get_json(&path, "the export job").await?;
        }
        for (index, file) in job.files.iter().enumerate() {
            let name = FileName {
                job: job.export_job_id,
                resource,
                index,
            };
            let (temp, sha256) = download(api, &file.download_url, &name).await?;
            let out = out.clone();
            let read = tokio::task::spawn_blocking(move || {
                let region = window.region;
                read_file(
                    temp,
                    &FileRead {
                        name,
                        sha256,
                        ids,
                        region,
                    },
                    &out,
                )
            });
            read.await
                .map_err(|e| ReadError::Input(format!("reading {name}: {e}")))??;
        }
        Ok(())
    }
}

/// How long a job may take (the source's `job_timeout_secs`).
fn window_patience(window: &Window) -> Duration {
    window.patience
}

fn lookup(error: String) -> ReadError {
    ReadError::Stop(super::super::Stop::Lookup(error))
}

/// Names compared as VAN's users write them: case, spaces and `-` aside.
fn same_name(a: &str, b: &str) -> bool {
    let plain = |s: &str| {
        s.chars()
            .filter(|c| !c.is_whitespace() && *c != '-')
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    plain(a) == plain(b)
}

impl Source for Changes {
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: &SecretString,
    ) -> reqwest::RequestBuilder {
        basic(request, &self.application_name, key, self.database_mode)
    }

    fn error_words(&self, body: &serde_json::Value) -> Option<String> {
        super::error_words(body)
    }

    fn check<'a>(&'a self, api: SourceApi<'a>) -> Pending<'a, Result<Vec<String>, ReadError>> {
        Box::pin(async move { Ok(self.look_up(&api).await?.1) })
    }

    fn read<'a>(
        &'a self,
        api: SourceApi<'a>,
        window: Window,
        out: Records,
    ) -> Pending<'a, Result<DateTime<Utc>, ReadError>> {
        Box::pin(async move {
            let oldest = window.to - chrono::Duration::days(KEPT_DAYS);
            if window.from < oldest {
                return Err(ReadError::TooOld(format!(
                    "the watermark {} is older than the {KEPT_DAYS} days of changes VAN keeps; read again from a date within them with `outreach-sync sources resync NAME --since DATE`",
                    window
                        .from
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                )));
            }
            let ids = self.ids(&api).await?;
            let from = (window.from - OVERLAP).max(oldest + chrono::Duration::minutes(1));
            let read = Window { from, ..window };
            for resource in [
                (CONTACTS, &CONTACT_FIELDS[..]),
                (HISTORY, &HISTORY_FIELDS[..]),
            ] {
                self.export(&api, resource, read, (ids, &out)).await?;
            }
            Ok(window.to)
        })
    }
}

/// A file of a job, as its records and errors name it (never by its URL: a download URL
/// may carry a token).
#[derive(Debug, Clone, Copy)]
struct FileName {
    job: i64,
    resource: &'static str,
    index: usize,
}

impl std::fmt::Display for FileName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "file {} of export job {} ({})",
            self.index + 1,
            self.job,
            self.resource
        )
    }
}

/// A downloaded file's body in a temporary file, bounded, and its SHA-256.
async fn download(
    api: &SourceApi<'_>,
    url: &str,
    name: &FileName,
) -> Result<(std::fs::File, String), ReadError> {
    let io = |e: std::io::Error| ReadError::Input(format!("keeping {name}: {e}"));
    let mut response = api.download(url, &name.to_string()).await?;
    let mut temp = tempfile::tempfile().map_err(io)?;
    let mut hash = sha2::Sha256::new();
    let mut size: u64 = 0;
    loop {
        let chunk = response.chunk().await.map_err(|e| {
            ReadError::Stop(super::super::Stop::Retry {
                error: format!("{name}: {}", super::super::http::transport_error(e)),
                retry_after: None,
            })
        })?;
        let Some(chunk) = chunk else { break };
        size += chunk.len() as u64;
        if size > MAX_FILE_BYTES {
            return Err(ReadError::Input(format!(
                "{name} is over {} MiB, the most read; ask VAN for a smaller window (`sources resync NAME --since DATE`) or a smaller fileSizeKbLimit",
                MAX_FILE_BYTES >> 20
            )));
        }
        hash.update(&chunk);
        temp.write_all(&chunk).map_err(io)?;
    }
    use std::io::Seek as _;
    temp.rewind().map_err(io)?;
    Ok((temp, hex::encode(hash.finalize())))
}

/// What reading one file needs besides its bytes.
struct FileRead {
    name: FileName,
    sha256: String,
    ids: Ids,
    /// Where a phone without a dialing prefix is read.
    region: crate::model::phone::Region,
}

/// Reads a file's rows, handing its records on a batch at a time (on a blocking thread).
fn read_file(file: std::fs::File, read: &FileRead, out: &Records) -> Result<(), ReadError> {
    let name = read.name;
    let mut csv = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(std::io::BufReader::new(file));
    let header: Vec<String> = csv
        .headers()
        .map_err(|e| ReadError::Input(format!("{name}: no header row: {e}")))?
        .iter()
        .map(str::to_owned)
        .collect();
    let fields: &[&str] = if name.resource == CONTACTS {
        &CONTACT_FIELDS
    } else {
        &HISTORY_FIELDS
    };
    let mut columns = HashMap::new();
    for wanted in fields.iter().chain([&DATE_CHANGED]) {
        let Some(at) = header.iter().position(|h| h.eq_ignore_ascii_case(wanted)) else {
            return Err(ReadError::Input(format!(
                "{name} has no column {wanted} (its header: {})",
                crate::model::text::bounded(&header.join(","), 200)
            )));
        };
        columns.insert(*wanted, at);
    }
    let mut batch = Vec::with_capacity(BATCH);
    for (index, row) in csv.records().enumerate() {
        let line = index as u64 + 2;
        let record = match row {
            Ok(row) => record_of(&row, &columns, &header, read, line),
            Err(error) => garbage(read, line, &error.to_string()),
        };
        batch.push(record);
        if batch.len() == BATCH {
            send(out, std::mem::take(&mut batch))?;
        }
    }
    if !batch.is_empty() {
        send(out, batch)?;
    }
    Ok(())
}

fn send(out: &Records, batch: Vec<ReadRecord>) -> Result<(), ReadError> {
    out.blocking_send(batch)
        .map_err(|_| ReadError::Input("the recorder stopped".to_owned()))
}

/// A row that is not CSV: ignored, once (keyed by its file's hash and line).
fn garbage(read: &FileRead, line: u64, error: &str) -> ReadRecord {
    ReadRecord {
        key: format!("{}:unreadable:{}:{line}", read.name.resource, read.sha256),
        said: Said::Nothing(format!(
            "line {line}: {}",
            crate::model::text::bounded(error, 100)
        )),
        stands_on: json!({"job": read.name.job, "sha256": read.sha256, "row": line}),
    }
}

/// What one row says.
fn record_of(
    row: &csv::StringRecord,
    columns: &HashMap<&str, usize>,
    header: &[String],
    read: &FileRead,
    line: u64,
) -> ReadRecord {
    let cell = |name: &str| -> String {
        columns
            .get(name)
            .and_then(|at| row.get(*at))
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let values: serde_json::Map<String, serde_json::Value> = header
        .iter()
        .zip(row.iter())
        .map(|(h, v)| (h.clone(), json!(crate::model::text::bounded(v, 200))))
        .collect();
    let (van_id, phone, changed) = (cell("VanID"), cell("Phone"), cell(DATE_CHANGED));
    let (phone, changed) = (phone.as_str(), changed.as_str());
    let stands_on = json!({
        "job": read.name.job,
        "resource": read.name.resource,
        "file": read.name.index + 1,
        "sha256": read.sha256,
        "row": line,
        "values": values,
    });
    let key = format!("{}:{van_id}:{phone}:{changed}", read.name.resource);
    let said = said(read, &cell, phone, changed);
    ReadRecord {
        key,
        said,
        stands_on,
    }
}

/// What a row says, by its resource: a phone's status, or a canvass response's result.
fn said(read: &FileRead, cell: &dyn Fn(&str) -> String, phone: &str, changed: &str) -> Said {
    let ids = read.ids;
    let opted_out = if read.name.resource == CONTACTS {
        match cell(STATUS_FIELD).parse::<i64>() {
            Ok(id) if id == ids.opted_out => true,
            Ok(id) if id == ids.opted_in => false,
            _ => return Said::Nothing(format!("opt-in status {:?}", cell(STATUS_FIELD))),
        }
    } else {
        match cell("ResultID").parse::<i64>() {
            Ok(id) if id == ids.result_code => true,
            _ => return Said::Nothing(format!("result {:?}", cell("ResultID"))),
        }
    };
    let Some(occurred_at) = changed_at(changed) else {
        return Said::Nothing(format!("{DATE_CHANGED} {changed:?} is not a time"));
    };
    match normalized(phone, &cell("PhoneDialingPrefix"), read.region) {
        Ok(phone_number) => Said::Consent {
            phone_number,
            opted_out,
            occurred_at,
        },
        Err(why) => Said::Nothing(why),
    }
}

/// VAN's change time: RFC 3339, or without an offset (UTC).
fn changed_at(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
                .ok()
                .map(|t| t.and_utc())
        })
}

/// A VAN phone in E.164: its dialing prefix (country code) before it, else a number of
/// `region` (`[consent] default_region`).
fn normalized(
    phone: &str,
    prefix: &str,
    region: crate::model::phone::Region,
) -> Result<String, String> {
    if phone.is_empty() {
        return Err("no phone".to_owned());
    }
    let digits: String = prefix.chars().filter(char::is_ascii_digit).collect();
    let raw = if digits.is_empty() || phone.starts_with('+') {
        phone.to_owned()
    } else {
        format!("+{digits}{phone}")
    };
    crate::model::phone::normalize(&raw, region)
        .map(crate::model::phone::E164::into_string)
        .map_err(|e| format!("phone {}: {e}", crate::model::text::bounded(phone, 40)))
}
