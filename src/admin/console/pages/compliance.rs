//! The Compliance page: the report of a window (by default the last 30 days), each late or
//! waiting opt-out and each message after one linking to the number's timeline, and the
//! printable file to download.

use std::sync::Arc;

use askama::Template;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;

use super::lookup_href;
use crate::admin::AdminState;
use crate::admin::console::session::Session;
use crate::admin::console::views::query_value;
use crate::admin::console::{ConsoleError, Frame, render};
use crate::compliance::{self, Item, Items, Summary, View, Window};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComplianceQuery {
    since: Option<String>,
    until: Option<String>,
    organization_id: Option<String>,
}

impl ComplianceQuery {
    /// The query string that asks for the same window.
    fn query_string(&self) -> String {
        let pairs = [
            ("since", &self.since),
            ("until", &self.until),
            ("organizationId", &self.organization_id),
        ];
        let given: Vec<String> = pairs
            .iter()
            .filter_map(|(name, value)| {
                let value = value.as_deref().filter(|v| !v.trim().is_empty())?;
                Some(format!("{name}={}", query_value(value)))
            })
            .collect();
        given.join("&")
    }
}

#[derive(Template)]
#[template(path = "console/compliance.html")]
struct CompliancePage<'v, 'r> {
    frame: Frame,
    view: &'v View<'r>,
    links: bool,
    since: String,
    until: String,
    organization: String,
    download: String,
}

impl CompliancePage<'_, '_> {
    /// The number's timeline in its organization.
    fn href(&self, item: &Item) -> String {
        lookup_href(&item.phone_number, Some(&item.organization_id))
    }
}

/// What sums up the report of the query's window, as of now, read on the long reads' path
/// (a page at a time: the page lists the first [`compliance::LISTED`] of each kind).
async fn report_of(
    state: &AdminState,
    query: &ComplianceQuery,
) -> Result<(Summary, chrono::DateTime<Utc>), ConsoleError> {
    let rules = &state.compliance;
    let now = Utc::now();
    let window = Window::parse(
        query.since.as_deref(),
        query.until.as_deref(),
        query.organization_id.clone(),
        &rules.calendar,
        now,
    )
    .map_err(|e| ConsoleError::BadRequest(e.to_string()))?;
    let read = state.long_read()?;
    let items = Items::new(read.pool.clone(), rules.clone(), window.clone(), now);
    let rules = rules.clone();
    let summary = crate::admin::off_the_workers(async move {
        let _read = read;
        compliance::summarize(items, &rules, &window).await
    })
    .await
    .map_err(|e| ConsoleError::BadRequest(format!("the report stopped: {e}")))??;
    Ok((summary, now))
}

pub async fn compliance(
    session: Session,
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ComplianceQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let (report, now) = report_of(&state, &query).await?;
    let rules = &state.compliance;
    let view = View::of(&report, rules, now);
    let page = CompliancePage {
        frame: Frame::of(&session, "compliance"),
        view: &view,
        links: true,
        since: query.since.clone().unwrap_or_default(),
        until: query.until.clone().unwrap_or_default(),
        organization: query.organization_id.clone().unwrap_or_default(),
        download: format!("/compliance/report.html?{}", query.query_string()),
    };
    Ok(render(StatusCode::OK, &page))
}

/// The printable file of the same window, as a download.
pub async fn compliance_file(
    _session: Session,
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ComplianceQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let (report, now) = report_of(&state, &query).await?;
    let rules = &state.compliance;
    let view = View::of(&report, rules, now);
    let html = compliance::html(&view)?;
    let name = format!(
        "attachment; filename=\"compliance-report-{}.html\"",
        now.format("%Y%m%dT%H%M%SZ")
    );
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_owned()),
            (header::CONTENT_DISPOSITION, name),
        ],
        html,
    )
        .into_response())
}
