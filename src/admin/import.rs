//! `POST /v1/consent/import`: an opt-out list uploaded as CSV, refused whole when a row is
//! invalid unless `skipInvalid`.
//!
//! The body is first streamed to a temporary file (never held in memory; deleted when the
//! import ends), so that the listener's body deadline measures the client's upload alone,
//! not the daemon's reading of the list; then the list is read from the file and recorded
//! on a task of its own, which goes on to its end when the client leaves before the
//! answer. A list that does not arrive whole records nothing, and says so in the log.
//!
//! Imports and the console's previews take one of [`MAX_IMPORTS_AT_ONCE`] slots from the
//! start of the upload to the end of the recording; past it the answer is 429 with
//! `Retry-After`, so that the memory of the lists being read is bounded in total.

use crate::model::AccountId;
use std::io::{Seek as _, SeekFrom};
use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt as _;
use serde::Deserialize;
use tokio::io::AsyncWriteExt as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::auth::Actor;
use super::{AdminError, AdminState};
use crate::apply::imported::Scope;
use crate::import::{self, ImportError, ListOptions, Refusal, Report, Request};
use crate::ingest::ErrorBody;

/// Largest list taken over HTTP (413 past it); kept in a temporary file until recorded,
/// so it costs disk, not memory. A larger one goes in with the CLI.
pub const MAX_IMPORT_BYTES: usize = 256 * 1024 * 1024;
/// Imports and console previews in flight at once, across clients and sessions.
pub const MAX_IMPORTS_AT_ONCE: usize = 2;
/// What a client refused for want of a slot is told to wait, in seconds.
pub const BUSY_RETRY_AFTER_SECS: u64 = 30;
/// The buffer between the body and its temporary file.
const SPOOL_BUFFER_BYTES: usize = 256 * 1024;

/// The slots of imports and console previews in flight (see [`MAX_IMPORTS_AT_ONCE`]).
pub struct ImportSlots(Arc<Semaphore>);

impl Default for ImportSlots {
    fn default() -> Self {
        Self(Arc::new(Semaphore::new(MAX_IMPORTS_AT_ONCE)))
    }
}

impl ImportSlots {
    /// A slot, held until the permit is dropped; `None` when every one is taken.
    pub fn try_take(&self) -> Option<OwnedSemaphorePermit> {
        self.0.clone().try_acquire_owned().ok()
    }
}

/// Why an import was not taken for want of a slot.
pub fn busy_message() -> String {
    format!(
        "{MAX_IMPORTS_AT_ONCE} imports or previews are running already; try again in {BUSY_RETRY_AFTER_SECS} s"
    )
}

/// Why an import was refused with 400: the error of every answer (parameters, a list that
/// cannot be read), or a list with invalid rows, refused whole.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum ImportRefused<'a> {
    Invalid(ErrorBody),
    Rows(Refusal<'a>),
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ImportQuery {
    /// Record the opt-outs in this organization (or account=true).
    org: Option<String>,
    /// Opt the numbers out for the whole account, and suppress them for leads that appear
    /// later.
    #[serde(default)]
    account: bool,
    /// Where national formats are read (ISO 3166, default US).
    region: Option<String>,
    /// Kept with every entry (at most 500 characters).
    reason: Option<String>,
    /// Record the valid rows of a list that has invalid ones.
    #[serde(default)]
    skip_invalid: bool,
    /// Say what would be recorded; record nothing.
    #[serde(default)]
    dry_run: bool,
    /// The header of the numbers' column (found by name or content otherwise).
    phone_column: Option<String>,
    /// The list's name, kept in the evidence (default upload.csv).
    file: Option<String>,
    /// The account it is recorded in (default: the first account served).
    account_id: Option<String>,
}

impl ImportQuery {
    /// The request it makes, by `actor`.
    pub fn request(self, account: &AccountId, actor: String) -> Result<Request, AdminError> {
        let scope = match (self.org, self.account) {
            (Some(_), true) => {
                return Err(AdminError::BadRequest(
                    "org and account=true exclude each other".into(),
                ));
            }
            (Some(org), false) => Scope::Organizations(vec![org]),
            (None, true) => Scope::Account,
            (None, false) => {
                return Err(AdminError::BadRequest(
                    "name an organization (org=ID) or the whole account (account=true)".into(),
                ));
            }
        };
        let region = match self.region.as_deref().filter(|r| !r.is_empty()) {
            Some(region) => region
                .parse()
                .map_err(|e| AdminError::BadRequest(format!("region: {e}")))?,
            None => Default::default(),
        };
        let file = self
            .file
            .filter(|f| !f.trim().is_empty())
            .unwrap_or_else(|| "upload.csv".to_owned())
            .chars()
            .take(crate::model::MAX_ID_CHARS)
            .collect();
        Ok(Request {
            account: account.to_owned(),
            scope,
            options: ListOptions {
                phone_column: self.phone_column.filter(|c| !c.trim().is_empty()),
                region,
            },
            file,
            actor,
            reason: self.reason.filter(|r| !r.trim().is_empty()),
            skip_invalid: self.skip_invalid,
            dry_run: self.dry_run,
            outside_the_daemon: false,
        })
    }
}

#[utoipa::path(
    post,
    path = "/v1/consent/import",
    operation_id = "importOptOuts",
    summary = "Record an opt-out list (CSV body); a list with an invalid row is refused whole (400 naming the rows) unless skipInvalid",
    params(ImportQuery),
    request_body(
        content = String,
        content_type = "text/csv",
        description = "CSV with or without a header row; `,` `;` or tab; quoted fields; a UTF-8 BOM"
    ),
    responses(
        (status = 200, description = "success", body = Report),
        (status = 400, description = "invalid parameters, or a list with invalid rows", body = ImportRefused),
        (status = 404, description = "no such account is served (accountId)", body = ErrorBody),
        (status = 413, description = "body or batch too large", body = ErrorBody),
    )
)]
pub async fn import(
    State(state): State<Arc<AdminState>>,
    Extension(actor): Extension<Actor>,
    headers: HeaderMap,
    query: Result<Query<ImportQuery>, QueryRejection>,
    body: Body,
) -> Result<Response, AdminError> {
    let Query(query) = query?;
    let account = state.account(query.account_id.as_deref())?;
    let request = query.request(&account, actor.0)?;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_IMPORT_BYTES as u64) {
        return Err(AdminError::TooLarge(too_large()));
    }
    let Some(slot) = state.imports.try_take() else {
        return Ok(busy());
    };
    let pool = state.pool.clone();
    let wake = state.wake.clone();
    // On a task of its own: a client that leaves does not stop the import half-way; and on
    // a thread of its own, off the async workers that answer deliveries.
    let task = super::off_the_workers(async move {
        let _slot = slot;
        let file = spool(body, &request).await?;
        let outcome = import::import(pool, file, &request).await;
        if outcome.as_ref().is_ok_and(|report| report.pushes > 0) {
            crate::pusher::wake_all(&wake);
        }
        Ok(answer(outcome))
    });
    match task.await {
        Ok(Ok(answer) | Err(answer)) => Ok(answer),
        Err(error) => {
            tracing::error!(%error, "the import's task stopped");
            Ok(error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the import stopped unexpectedly; see the daemon's log".into(),
            ))
        }
    }
}

/// The answer to an import that ran.
fn answer(outcome: Result<import::Report, ImportError>) -> Response {
    match outcome {
        Ok(report) => (StatusCode::OK, axum::Json(report)).into_response(),
        Err(ImportError::Refused(report)) => {
            let message = ImportError::Refused(report.clone()).to_string();
            let refusal = report.refusal(message);
            (StatusCode::BAD_REQUEST, axum::Json(refusal)).into_response()
        }
        // The database's own words are in the log.
        Err(error @ ImportError::Aborted { .. }) => {
            error_response(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
        }
        Err(error) => error_response(StatusCode::BAD_REQUEST, error.to_string()),
    }
}

fn too_large() -> String {
    format!(
        "the list is larger than {} MiB, the most taken over HTTP; the CLI (outreach-sync import) takes any size",
        MAX_IMPORT_BYTES / 1024 / 1024
    )
}

/// 429 with `Retry-After`: every slot is taken.
fn busy() -> Response {
    let mut response = error_response(StatusCode::TOO_MANY_REQUESTS, busy_message());
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, BUSY_RETRY_AFTER_SECS.into());
    response
}

/// The listener's JSON error, `{"code","message"}`.
fn error_response(status: StatusCode, message: String) -> Response {
    let body = ErrorBody {
        code: status.as_u16(),
        message,
    };
    (status, axum::Json(body)).into_response()
}

/// `body` kept whole in a temporary file (deleted when the file is dropped), read back
/// from its start; or the answer that refuses it, logged.
async fn spool(mut body: Body, request: &Request) -> Result<std::fs::File, Response> {
    let unavailable = |error: std::io::Error| {
        tracing::error!(%error, "import refused: cannot keep the list in a temporary file");
        error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "cannot keep the list in a temporary file; see the daemon's log".into(),
        )
    };
    let file = tokio::task::spawn_blocking(tempfile::tempfile)
        .await
        .map_err(|e| unavailable(std::io::Error::other(e)))?
        .map_err(unavailable)?;
    let mut spooled =
        tokio::io::BufWriter::with_capacity(SPOOL_BUFFER_BYTES, tokio::fs::File::from_std(file));
    let mut received = 0u64;
    while let Some(frame) = body.frame().await {
        let data = match frame {
            Ok(frame) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
            Err(error) => return Err(cut_off(request, received, &error)),
        };
        received += data.len() as u64;
        if received > MAX_IMPORT_BYTES as u64 {
            tracing::info!(
                actor = ?request.actor, file = ?request.file, bytes_read = received,
                "import refused: the list is larger than the most taken over HTTP"
            );
            return Err(AdminError::TooLarge(too_large()).into_response());
        }
        spooled.write_all(&data).await.map_err(unavailable)?;
    }
    spooled.flush().await.map_err(unavailable)?;
    let mut file = spooled.into_inner().into_std().await;
    tokio::task::spawn_blocking(move || file.seek(SeekFrom::Start(0)).map(|_| file))
        .await
        .map_err(|e| unavailable(std::io::Error::other(e)))?
        .map_err(unavailable)
}

/// The answer to a body that stopped before its end (`received` bytes of it), logged: the
/// client was too slow sending it (the listener's body deadline), or it went away.
fn cut_off(request: &Request, received: u64, error: &axum::Error) -> Response {
    let timed_out = crate::listener::body_timeout(error);
    tracing::info!(
        actor = ?request.actor, file = ?request.file, bytes_read = received,
        timed_out = timed_out.is_some(), %error,
        "import refused: the list did not arrive whole; nothing was recorded"
    );
    match timed_out {
        Some(crate::listener::BodyTimedOut(limit)) => error_response(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the client was too slow sending the list: {received} bytes of it arrived within {}s (admin.body_timeout_secs), not all of it; nothing was recorded",
                limit.as_secs()
            ),
        ),
        None => error_response(
            StatusCode::BAD_REQUEST,
            format!(
                "the list did not arrive whole ({received} bytes arrived): {error}; nothing was recorded"
            ),
        ),
    }
}
