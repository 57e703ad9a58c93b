//! `POST /v1/consent/import`: an opt-out list uploaded as CSV, streamed to the reader (the
//! body is never held whole), refused whole when a row is invalid unless `skipInvalid`.

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt as _;
use serde::Deserialize;
use tokio_util::io::{StreamReader, SyncIoBridge};

use super::auth::Actor;
use super::{AdminError, AdminState};
use crate::apply::imported::Scope;
use crate::import::{self, ImportError, ListOptions, Request};

/// Largest list taken over HTTP; read as it arrives, so it costs no memory, only time.
/// A larger one goes in with the CLI.
pub const MAX_IMPORT_BYTES: usize = 256 * 1024 * 1024;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImportQuery {
    org: Option<String>,
    #[serde(default)]
    account: bool,
    region: Option<String>,
    reason: Option<String>,
    #[serde(default)]
    skip_invalid: bool,
    #[serde(default)]
    dry_run: bool,
    phone_column: Option<String>,
    /// The list's name, kept in the evidence (default `upload.csv`).
    file: Option<String>,
}

impl ImportQuery {
    /// The request it makes, by `actor`.
    pub fn request(self, actor: String) -> Result<Request, AdminError> {
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
        })
    }
}

pub async fn import(
    State(state): State<Arc<AdminState>>,
    Extension(actor): Extension<Actor>,
    query: Result<Query<ImportQuery>, QueryRejection>,
    body: Body,
) -> Result<Response, AdminError> {
    let Query(query) = query?;
    let request = query.request(actor.0)?;
    run(&state, body, &request).await
}

/// Runs `request` over `body`; the console's import page calls it too.
pub(super) async fn run(
    state: &AdminState,
    body: Body,
    request: &Request,
) -> Result<Response, AdminError> {
    let limited = http_body_util::Limited::new(body, MAX_IMPORT_BYTES);
    let stream = Body::new(limited).into_data_stream().map_err(|error| {
        std::io::Error::other(format!(
            "{error} (at most {} MiB over HTTP; the CLI takes any size)",
            MAX_IMPORT_BYTES / 1024 / 1024
        ))
    });
    let input = SyncIoBridge::new(StreamReader::new(stream));
    match import::import(&state.pool, input, request).await {
        Ok(report) => {
            if report.pushes > 0 {
                state.wake.notify_one();
            }
            Ok((StatusCode::OK, axum::Json(report)).into_response())
        }
        Err(ImportError::Refused(report)) => {
            let message = ImportError::Refused(report.clone()).to_string();
            let refusal = report.refusal(message);
            Ok((StatusCode::BAD_REQUEST, axum::Json(refusal)).into_response())
        }
        Err(ImportError::Database(error)) => Err(AdminError::Database(error)),
        Err(error) => Err(AdminError::BadRequest(error.to_string())),
    }
}
