//! `GET /v1/compliance`: the compliance report (the contract's JSON form), streamed as it
//! is read, on the long reads' path.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chrono::Utc;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::{AdminError, AdminState};
use crate::compliance::{self, Items, Listing, Window};
use crate::ingest::ErrorBody;

/// Pages written ahead of a slow reader.
const PAGES_AHEAD: usize = 2;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ComplianceQuery {
    #[param(schema_with = since_schema)]
    since: Option<String>,
    #[param(schema_with = until_schema)]
    until: Option<String>,
    /// Only this organization.
    organization_id: Option<String>,
    /// Only this account (the name of an [[account]]).
    account_id: Option<String>,
}

fn since_schema() -> utoipa::openapi::schema::Schema {
    day_or_time(
        "First day (YYYY-MM-DD in compliance.timezone) or RFC 3339 time, before until; \
         default (also when empty): 30 days before until",
    )
}

fn until_schema() -> utoipa::openapi::schema::Schema {
    day_or_time(
        "Last day, taken whole (YYYY-MM-DD), or RFC 3339 time; default (also when empty): now",
    )
}

/// A bound of the window as [`Window::parse`] reads it: a day, an RFC 3339 time, or
/// nothing (the default).
fn day_or_time(description: &str) -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{
        AnyOfBuilder, KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type,
    };
    let string = |format| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(format)))
    };
    Schema::AnyOf(
        AnyOfBuilder::new()
            .item(string(KnownFormat::Date))
            .item(string(KnownFormat::DateTime))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(0)),
            )
            .description(Some(description))
            .build(),
    )
}

#[utoipa::path(
    get,
    path = "/v1/compliance",
    operation_id = "complianceReport",
    summary = "For every opt-out in the window: when the service and each subscriber had it against the legal deadline, and the messages sent after it",
    params(ComplianceQuery),
    responses(
        (status = 200, description = "success", body = compliance::Report),
        (status = 400, description = "invalid parameters or body", body = ErrorBody),
    )
)]
pub async fn report(
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ComplianceQuery>, QueryRejection>,
) -> Result<Response, AdminError> {
    let Query(query) = query?;
    let rules = state.compliance.clone();
    let now = Utc::now();
    let window = Window::parse(
        query.since.as_deref(),
        query.until.as_deref(),
        query.organization_id,
        &rules.calendar,
        now,
    )
    .map_err(|e| AdminError::BadRequest(e.to_string()))?
    .in_account(query.account_id);
    let read = state.long_read()?;
    let items = Items::new(read.pool.clone(), rules.clone(), window.clone(), now);
    let (mut pages, body) = mpsc::channel::<std::io::Result<Bytes>>(PAGES_AHEAD);
    super::off_the_workers(async move {
        let _read = read;
        let written = compliance::write(items, &rules, &window, Listing::Json, &mut pages).await;
        if let Err(error) = written {
            tracing::warn!(%error, "the compliance report stopped before its end");
            let _ = pages.send(Err(std::io::Error::other("cut short"))).await;
        }
    });
    let stream = tokio_stream_of(body);
    Ok((
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// The receiving end as a stream of body chunks.
fn tokio_stream_of(
    mut receiver: mpsc::Receiver<std::io::Result<Bytes>>,
) -> impl futures::Stream<Item = std::io::Result<Bytes>> {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}
