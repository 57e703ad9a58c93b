//! The Import page: upload an opt-out list, see what it would do (the dry run), then
//! confirm. The upload waits for the confirmation in memory, for its uploader only, a few
//! at a time and for a while (see [`PendingImports`]); nothing is recorded before it.
//! A preview (from its upload on) and a confirmed import each take one of the API's import
//! slots (`admin::import::ImportSlots`), and run on a task of their own: a browser that
//! leaves does not stop an import half-way.

use crate::model::AccountId;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use askama::Template;
use axum::Form;
use axum::extract::rejection::FormRejection;
use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use serde::Deserialize;
use tokio::sync::OwnedSemaphorePermit;

use super::given;
use crate::admin::AdminState;
use crate::admin::console::session::Session;
use crate::admin::console::{ConsoleError, Frame, render};
use crate::admin::import::busy_message;
use crate::apply::imported::Scope;
use crate::import::{self, ImportError, InvalidRow, ListOptions, Report, Request};
use crate::model::MAX_REASON_CHARS;

/// Largest list the console takes; the CLI and the API take larger ones.
pub const MAX_UPLOAD_BYTES: usize = 16 * 1024 * 1024;
/// Previews waiting for a confirmation, across sessions; the oldest goes first.
const MAX_PENDING: usize = 4;
/// How long a preview can be confirmed.
const PENDING_FOR: Duration = Duration::from_secs(30 * 60);
/// Invalid rows shown on the page.
const SHOWN_INVALID: usize = 20;
/// Longest region given back on the page.
const REGION_CHARS: usize = 8;

/// Uploads previewed and not yet confirmed.
#[derive(Default)]
pub struct PendingImports(Mutex<VecDeque<Pending>>);

struct Pending {
    id: String,
    actor: String,
    request: Request,
    body: Bytes,
    at: Instant,
}

impl PendingImports {
    fn keep(&self, actor: &str, request: Request, body: Bytes) -> String {
        let id = format!("{:032x}", rand::random::<u128>());
        let mut pending = self.0.lock().unwrap_or_else(|p| p.into_inner());
        pending.retain(|p| p.at.elapsed() < PENDING_FOR && p.actor != actor);
        while pending.len() >= MAX_PENDING {
            pending.pop_front();
        }
        pending.push_back(Pending {
            id: id.clone(),
            actor: actor.to_owned(),
            request,
            body,
            at: Instant::now(),
        });
        id
    }

    fn take(&self, actor: &str, id: &str) -> Option<(Request, Bytes)> {
        let mut pending = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let at = pending
            .iter()
            .position(|p| p.id == id && p.actor == actor && p.at.elapsed() < PENDING_FOR)?;
        pending.remove(at).map(|p| (p.request, p.body))
    }
}

#[derive(Template)]
#[template(path = "console/import.html")]
struct ImportPage {
    frame: Frame,
    organization: String,
    account: bool,
    region: String,
    reason: String,
    skip_invalid: bool,
    error: Option<String>,
    /// The dry run of the upload, with the id that confirms it.
    preview: Option<(Report, String)>,
    /// What the confirmed import did.
    done: Option<Report>,
    /// The invalid rows shown, and how many more there are.
    invalid: Vec<InvalidRow>,
    more_invalid: u64,
}

impl ImportPage {
    fn blank(session: &Session) -> Self {
        Self {
            frame: Frame::of(session, "import"),
            organization: String::new(),
            account: false,
            region: "US".into(),
            reason: String::new(),
            skip_invalid: false,
            error: None,
            preview: None,
            done: None,
            invalid: Vec::new(),
            more_invalid: 0,
        }
    }

    fn showing_invalid(mut self, report: &Report) -> Self {
        self.invalid = report
            .invalid_rows
            .iter()
            .take(SHOWN_INVALID)
            .cloned()
            .collect();
        self.more_invalid = report.invalid.saturating_sub(self.invalid.len() as u64);
        self
    }

    fn refused(self, message: String) -> Response {
        self.answered(StatusCode::BAD_REQUEST, message)
    }

    fn answered(mut self, status: StatusCode, message: String) -> Response {
        self.error = Some(message);
        render(status, &self)
    }

    /// Every import slot is taken.
    fn busy(self) -> Response {
        self.answered(
            StatusCode::TOO_MANY_REQUESTS,
            format!("{}.", busy_message()),
        )
    }
}

pub async fn import_form(session: Session) -> Response {
    render(StatusCode::OK, &ImportPage::blank(&session))
}

/// The upload's fields.
#[derive(Default)]
struct Upload {
    csrf: Option<String>,
    file_name: Option<String>,
    body: Option<Bytes>,
    organization: Option<String>,
    scope: Option<String>,
    region: Option<String>,
    reason: Option<String>,
    skip_invalid: bool,
}

async fn read_upload(mut multipart: Multipart) -> Result<Upload, ConsoleError> {
    let mut upload = Upload::default();
    let bad = |e: axum::extract::multipart::MultipartError| ConsoleError::BadRequest(e.body_text());
    while let Some(field) = multipart.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_owned();
        if name == "list" {
            upload.file_name = field.file_name().map(str::to_owned);
            upload.body = Some(field.bytes().await.map_err(bad)?);
            continue;
        }
        let text = field.text().await.map_err(bad)?;
        match name.as_str() {
            "csrf" => upload.csrf = Some(text),
            "organizationId" => upload.organization = given(Some(text)),
            "scope" => upload.scope = Some(text),
            "region" => upload.region = given(Some(text)),
            "reason" => upload.reason = given(Some(text)),
            "skipInvalid" => upload.skip_invalid = true,
            _ => {}
        }
    }
    Ok(upload)
}

/// The upload: previewed (a dry run), kept for the confirmation.
pub async fn preview(
    session: Session,
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    multipart: Multipart,
) -> Result<Response, ConsoleError> {
    // Taken before the upload is read: what previews hold in memory is bounded in total.
    let Some(slot) = state.imports.try_take() else {
        crate::admin::console::session::check_origin(&headers)?;
        return Ok(ImportPage::blank(&session).busy());
    };
    let upload = read_upload(multipart).await?;
    session.check_form(&headers, upload.csrf.as_deref())?;
    let mut page = ImportPage::blank(&session);
    // Given back as sent, at most as long as taken.
    page.organization = shown(upload.organization.as_deref(), crate::model::MAX_ID_CHARS);
    page.account = upload.scope.as_deref() == Some("account");
    page.region = upload
        .region
        .as_deref()
        .map_or_else(|| "US".into(), |r| shown(Some(r), REGION_CHARS));
    page.reason = shown(upload.reason.as_deref(), MAX_REASON_CHARS + 1);
    page.skip_invalid = upload.skip_invalid;
    let Some(body) = upload.body.clone().filter(|b| !b.is_empty()) else {
        return Ok(page.refused("List: choose a CSV file.".into()));
    };
    let request = match request_of(&page, &upload, &state.first_account(), &session.actor) {
        Ok(request) => request,
        Err(message) => return Ok(page.refused(message)),
    };
    let outcome = detached(&state, slot, body.clone(), request.clone()).await;
    match outcome {
        Ok(report) => {
            let id = state.pending_imports.keep(&session.actor, request, body);
            let mut page = page.showing_invalid(&report);
            page.preview = Some((report, id));
            Ok(render(StatusCode::OK, &page))
        }
        Err(ImportError::Refused(report)) => {
            let message = ImportError::Refused(report.clone()).to_string();
            Ok(page.showing_invalid(&report).refused(message))
        }
        Err(error @ ImportError::Aborted { .. }) => {
            Ok(page.answered(StatusCode::SERVICE_UNAVAILABLE, error.to_string()))
        }
        Err(error) => Ok(page.refused(error.to_string())),
    }
}

/// The request a checked upload asks for, or what the page says is wrong with it.
fn request_of(
    page: &ImportPage,
    upload: &Upload,
    account: &AccountId,
    actor: &str,
) -> Result<Request, String> {
    let scope = match (page.account, page.organization.is_empty()) {
        (true, _) => Scope::Account,
        (false, false) => Scope::Organizations(vec![page.organization.clone()]),
        (false, true) => {
            return Err("Organization: required, or choose the whole account.".into());
        }
    };
    if page.reason.is_empty()
        || upload
            .reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
    {
        return Err(format!(
            "Reason: required, at most {MAX_REASON_CHARS} characters; it is kept with every entry."
        ));
    }
    let region = match page.region.parse() {
        Ok(region) => region,
        Err(_) => {
            let message = format!(
                "Region: {} is not a region; two letters (ISO 3166-1 alpha-2, e.g. US) are expected.",
                import::quoted(&page.region, REGION_CHARS)
            );
            return Err(message);
        }
    };
    Ok(Request {
        account: account.to_owned(),
        scope,
        options: ListOptions {
            phone_column: None,
            region,
        },
        file: upload
            .file_name
            .clone()
            .filter(|f| !f.trim().is_empty())
            .unwrap_or_else(|| "upload.csv".into())
            .chars()
            .take(crate::model::MAX_ID_CHARS)
            .collect(),
        actor: actor.to_owned(),
        reason: Some(page.reason.clone()),
        skip_invalid: page.skip_invalid,
        dry_run: true,
        outside_the_daemon: false,
    })
}

/// `request` over `body` on a task of its own, which holds `slot` until it ends: the
/// import goes on to its end (and wakes the pusher) whether or not the browser waits for
/// the page.
async fn detached(
    state: &AdminState,
    slot: OwnedSemaphorePermit,
    body: Bytes,
    request: Request,
) -> Result<Report, ImportError> {
    let pool = state.pool.clone();
    let wake = state.wake.clone();
    tokio::spawn(async move {
        let _slot = slot;
        let outcome = import::import(pool, std::io::Cursor::new(body), &request).await;
        if outcome.as_ref().is_ok_and(|report| report.pushes > 0) {
            crate::pusher::wake_all(&wake);
        }
        outcome
    })
    .await
    .unwrap_or_else(|e| Err(ImportError::Invalid(format!("the import stopped: {e}"))))
}

/// `text` given back on the page: at most `chars` characters of it.
fn shown(text: Option<&str>, chars: usize) -> String {
    text.unwrap_or_default().chars().take(chars).collect()
}

#[derive(Deserialize)]
pub struct ConfirmForm {
    csrf: Option<String>,
    id: Option<String>,
}

/// The confirmation of a previewed upload: recorded now.
pub async fn confirm(
    session: Session,
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    form: Result<Form<ConfirmForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    session.check_form(&headers, form.csrf.as_deref())?;
    let page = ImportPage::blank(&session);
    let Some(slot) = state.imports.try_take() else {
        return Ok(page.busy());
    };
    let id = form.id.unwrap_or_default();
    let Some((mut request, body)) = state.pending_imports.take(&session.actor, &id) else {
        return Ok(page.refused(
            "That preview has expired or was confirmed already; upload the list again.".into(),
        ));
    };
    request.dry_run = false;
    match detached(&state, slot, body, request).await {
        Ok(report) => {
            let mut page = page.showing_invalid(&report);
            page.done = Some(report);
            Ok(render(StatusCode::OK, &page))
        }
        Err(error @ ImportError::Aborted { .. }) => {
            Ok(page.answered(StatusCode::SERVICE_UNAVAILABLE, error.to_string()))
        }
        Err(error) => Ok(page.refused(error.to_string())),
    }
}
