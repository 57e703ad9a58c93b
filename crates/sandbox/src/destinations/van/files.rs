//! The export files, on a download path of their own outside `/van/v4`
//! (`GET /van-files/{token}.csv`), as VAN hands them out on a storage host: no credential is
//! needed, and any credential a request carries (an `Authorization` header, a key-like query
//! parameter) is recorded for the truth, since a client must never send its VAN key there.
//! An expired URL answers 403 with a storage service's XML error; an unknown one 404.
//!
//! A file is written as it is sent (rows made from the job's selection, a chunk at a time),
//! so neither 100,000 seeded rows nor the 2 GiB fault is ever held in memory.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt as _;
use tokio_util::io::ReaderStream;

use super::catalog::{cell, csv_field};
use super::changes::{Resource, Seed, VanChange, timestamp};
use super::export::HUGE_FILE_BYTES;
use crate::destinations::FakesState;

/// A credential a download request carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanDownloadCredential {
    /// The path requested.
    pub path: String,
    /// `Authorization` (the header), or `query:NAME`.
    pub location: String,
    /// As sent: the point is to see which key leaked.
    pub value: String,
}

/// One request to the download path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VanDownload {
    pub path: String,
    pub status: u16,
    /// How many credentials it carried (see `downloadCredentialsSeen`).
    pub credentials: usize,
}

/// What serving one file takes, copied out of the state so the lock is not held while
/// the file is sent.
pub(crate) struct FilePlan {
    pub resource: Resource,
    pub columns: Vec<&'static str>,
    pub committee_id: u32,
    pub explicit: Vec<VanChange>,
    pub seeded: Vec<(Seed, u64, u64)>,
    pub garbage_row: bool,
    pub huge: bool,
    /// Hostile modes ([`super::export::VanExportSettings`]).
    pub future_by: Option<chrono::Duration>,
    pub national_numbers: bool,
    pub trickle: Option<std::time::Duration>,
    pub redirect_to: Option<String>,
}

/// Why a file is not served.
pub(crate) enum Refusal {
    Unknown,
    Expired(DateTime<Utc>),
}

/// Query parameters whose name says they carry a secret.
const SECRET_WORDS: [&str; 5] = ["key", "token", "auth", "password", "secret"];

fn credentials(path: &str, headers: &HeaderMap, query: Option<&str>) -> Vec<VanDownloadCredential> {
    let mut found = Vec::new();
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        found.push(VanDownloadCredential {
            path: path.to_owned(),
            location: "Authorization".into(),
            value: String::from_utf8_lossy(value.as_bytes()).into_owned(),
        });
    }
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let lower = name.to_ascii_lowercase();
        if SECRET_WORDS.iter().any(|w| lower.contains(w)) {
            found.push(VanDownloadCredential {
                path: path.to_owned(),
                location: format!("query:{name}"),
                value: value.to_owned(),
            });
        }
    }
    found
}

fn xml_error(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/xml")],
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{body}"),
    )
        .into_response()
}

/// `GET /van-files/{token}.csv`.
pub(crate) async fn download(
    State(fakes): State<FakesState>,
    headers: HeaderMap,
    uri: Uri,
    Path(file): Path<String>,
) -> Response {
    let path = uri.path().to_owned();
    let seen = credentials(&path, &headers, uri.query());
    let token = file.strip_suffix(".csv").unwrap_or(&file).to_owned();
    let plan = fakes.van().file_plan(&token, Utc::now());
    let response = match plan {
        Err(Refusal::Unknown) => xml_error(
            StatusCode::NOT_FOUND,
            format!(
                "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>{}</Key></Error>",
                csv_field(&file)
            ),
        ),
        Err(Refusal::Expired(at)) => xml_error(
            StatusCode::FORBIDDEN,
            format!(
                "<Error><Code>AccessDenied</Code><Message>Request has expired</Message><Expires>{}</Expires><ServerTime>{}</ServerTime></Error>",
                timestamp(at),
                timestamp(Utc::now())
            ),
        ),
        Ok(FilePlan {
            redirect_to: Some(to),
            ..
        }) => (StatusCode::FOUND, [(header::LOCATION, to)]).into_response(),
        Ok(plan) => stream(plan, fakes.cancel.clone()),
    };
    fakes
        .van()
        .record_download(&path, response.status().as_u16(), seen);
    response
}

/// The file as a body written by a task as the client reads it.
fn stream(plan: FilePlan, cancel: tokio_util::sync::CancellationToken) -> Response {
    let (reader, writer) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        tokio::select! {
            _ = cancel.cancelled() => {}
            // A client that stops reading ends the write with an error: nothing to do.
            _ = write_csv(plan, writer) => {}
        }
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/csv")],
        Body::from_stream(ReaderStream::new(reader)),
    )
        .into_response()
}

/// Bytes gathered before each write.
const CHUNK: usize = 64 * 1024;

fn line(columns: &[&str], change: &VanChange, committee_id: u32, out: &mut String) {
    let cells: Vec<String> = columns
        .iter()
        .map(|c| csv_field(&cell(change, c, committee_id)))
        .collect();
    out.push_str(&cells.join(","));
    out.push_str("\r\n");
}

/// A row that is not one: too few columns, and no VAN ID where one must be.
const GARBAGE_ROW: &str = "not-a-van-id,<html><body>Internal error</body></html>\r\n";

async fn write_csv(plan: FilePlan, mut out: tokio::io::DuplexStream) -> std::io::Result<()> {
    let mut buf = plan.columns.join(",");
    buf.push_str("\r\n");
    let mut rows: u64 = 0;
    let mut sent: u64 = 0;
    let seeded = plan
        .seeded
        .iter()
        .flat_map(|(seed, lo, hi)| (*lo..*hi).map(move |i| seed.row(i)));
    if let Some(every) = plan.trickle {
        return trickle(&plan, buf, every, out).await;
    }
    for change in plan.explicit.iter().cloned().chain(seeded) {
        let change = hostile(&plan, change);
        line(&plan.columns, &change, plan.committee_id, &mut buf);
        rows += 1;
        if plan.garbage_row && rows == 1 {
            buf.push_str(GARBAGE_ROW);
        }
        if buf.len() >= CHUNK {
            out.write_all(buf.as_bytes()).await?;
            sent += buf.len() as u64;
            buf.clear();
        }
    }
    if plan.garbage_row && rows == 0 {
        buf.push_str(GARBAGE_ROW);
    }
    if plan.huge {
        sent += buf.len() as u64;
        out.write_all(buf.as_bytes()).await?;
        buf.clear();
        pad(&plan, sent, &mut out).await?;
    }
    out.write_all(buf.as_bytes()).await?;
    out.shutdown().await
}

/// A change as a hostile VAN writes it: its time in the future, its number without its
/// country code.
fn hostile(plan: &FilePlan, mut change: VanChange) -> VanChange {
    if let Some(by) = plan.future_by {
        change.at += by;
    }
    if plan.national_numbers {
        change.dialing_prefix = None;
    }
    change
}

/// The header, then the rows one at a time `every` apart, then made-up rows at the same
/// pace until the client gives up.
async fn trickle(
    plan: &FilePlan,
    header: String,
    every: std::time::Duration,
    mut out: tokio::io::DuplexStream,
) -> std::io::Result<()> {
    out.write_all(header.as_bytes()).await?;
    let filler = Seed {
        first_van_id: 800_000_001,
        first_number: 2_013_500_000,
        count: u64::MAX,
        start: Utc::now(),
        step: chrono::Duration::milliseconds(1),
        resource: plan.resource,
        result_code_id: 1,
    };
    let seeded = plan
        .seeded
        .iter()
        .flat_map(|(seed, lo, hi)| (*lo..*hi).map(move |i| seed.row(i)));
    let made_up = (0..).map(|i| filler.row(i));
    for change in plan.explicit.iter().cloned().chain(seeded).chain(made_up) {
        let mut row = String::new();
        line(
            &plan.columns,
            &hostile(plan, change),
            plan.committee_id,
            &mut row,
        );
        out.write_all(row.as_bytes()).await?;
        tokio::time::sleep(every).await;
    }
    Ok(())
}

/// Good rows, made up, until the file reaches [`HUGE_FILE_BYTES`].
async fn pad(
    plan: &FilePlan,
    mut sent: u64,
    out: &mut tokio::io::DuplexStream,
) -> std::io::Result<()> {
    let filler = Seed {
        first_van_id: 700_000_001,
        first_number: 2_013_000_000,
        count: u64::MAX,
        start: Utc::now(),
        step: chrono::Duration::milliseconds(1),
        resource: plan.resource,
        result_code_id: 1,
    };
    let mut block = String::with_capacity(CHUNK + 256);
    let mut i = 0;
    while block.len() < CHUNK {
        line(&plan.columns, &filler.row(i), plan.committee_id, &mut block);
        i += 1;
    }
    while sent < HUGE_FILE_BYTES {
        out.write_all(block.as_bytes()).await?;
        sent += block.len() as u64;
    }
    Ok(())
}
