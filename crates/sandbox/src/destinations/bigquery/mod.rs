//! Google BigQuery's REST API v2 (`/bigquery/v2`), the three endpoints a consent export
//! uses: `tables.get`, `tables.insert` (a table or a view) and `tabledata.insertAll`
//! (streaming, validated row by row, de-duplicated by `insertId` on a best-effort window),
//! behind bearer tokens from a fake of Google's OAuth 2.0 token endpoint
//! (`/bigquery/oauth2/token`, the JWT bearer grant of a service account: `token.rs`).
//! Errors are Google's JSON error format. Tables: `tables.rs`; rows: `insert_all.rs` and
//! `cells.rs`; controls: `control.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::FakesState;
use super::faults::FakeRequestCounts;

mod cells;
mod control;
mod errors;
mod insert_all;
mod tables;
mod token;

pub(super) use control::routes as control_routes;
pub(crate) use errors::GoogleError;
pub(super) use errors::{injected, limited};
pub(super) use token::routes as token_routes;

/// The test service-account key file (Google's format), whose `token_uri` points at a
/// closed port: [`bigquery_key_file`] points it at a sandbox. A test key, known to no Google
/// project; the sandbox knows its public key for [`BIGQUERY_TEST_CLIENT_EMAIL`].
pub const BIGQUERY_TEST_KEY: &str = include_str!("../../../testdata/bigquery-service-account.json");

/// Where [`BIGQUERY_TEST_KEY`] is on disk, for a caller that wants a file's path.
pub const BIGQUERY_TEST_KEY_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/testdata/bigquery-service-account.json"
);

/// The public key of [`BIGQUERY_TEST_KEY`] (SPKI PEM).
pub const BIGQUERY_TEST_PUBLIC_KEY: &str =
    include_str!("../../../testdata/bigquery-service-account.pub.pem");

/// The service account of [`BIGQUERY_TEST_KEY`].
pub const BIGQUERY_TEST_CLIENT_EMAIL: &str =
    "outreach-sync@sandbox-project.iam.gserviceaccount.com";

/// The project and dataset the fake has from the start.
pub const BIGQUERY_PROJECT: &str = "sandbox-project";

/// See [`BIGQUERY_PROJECT`].
pub const BIGQUERY_DATASET: &str = "consent";

/// The OAuth scope of BigQuery, which a grant must ask for (or `cloud-platform`).
pub const BIGQUERY_SCOPE: &str = "https://www.googleapis.com/auth/bigquery";

/// The `token_uri` of [`BIGQUERY_TEST_KEY`] as committed.
const COMMITTED_TOKEN_URI: &str = "\"http://127.0.0.1:9/bigquery/oauth2/token\"";

/// [`BIGQUERY_TEST_KEY`] with its `token_uri` set to `token_uri` (a sandbox's
/// `bigquery_token_url()`).
pub fn bigquery_key_file(token_uri: &str) -> String {
    let quoted = Value::String(token_uri.to_owned()).to_string();
    BIGQUERY_TEST_KEY.replace(COMMITTED_TOKEN_URI, &quoted)
}

/// A column of a table's schema, as stored (type and mode upper case, mode defaulted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BigQueryField {
    pub name: String,
    #[serde(rename = "type")]
    pub field_type: String,
    pub mode: String,
}

/// The query of a view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BigQueryView {
    pub query: String,
    /// As the request said it; `true` when it said nothing, as Google defaults it.
    pub use_legacy_sql: bool,
}

/// A row stored by `insertAll`, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BigQueryRow {
    pub insert_id: Option<String>,
    pub json: Value,
}

/// A table or a view and its rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BigQueryTable {
    pub project_id: String,
    pub dataset_id: String,
    pub table_id: String,
    /// `TABLE` or `VIEW`.
    #[serde(rename = "type")]
    pub table_type: String,
    pub schema: Vec<BigQueryField>,
    pub view: Option<BigQueryView>,
    pub rows: Vec<BigQueryRow>,
    /// Milliseconds since the epoch.
    pub creation_time: i64,
}

/// A dataset the fake knows.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BigQueryDataset {
    pub project_id: String,
    pub dataset_id: String,
}

/// Rows whose `field` equals `value` get a per-row error (`reason`, `message`) from
/// `insertAll`, though valid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BigQueryRowRefusal {
    pub field: String,
    pub value: String,
    pub reason: String,
    pub message: String,
}

impl BigQueryRowRefusal {
    /// Reason `invalid` and a message naming the value unless given.
    pub(crate) fn new(
        field: &str,
        value: &str,
        reason: Option<String>,
        message: Option<String>,
    ) -> Self {
        Self {
            field: field.to_owned(),
            value: value.to_owned(),
            reason: reason.unwrap_or_else(|| "invalid".into()),
            message: message.unwrap_or_else(|| format!("Row refused: {field} is {value}.")),
        }
    }
}

/// What the fake did, counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BigQueryCounts {
    pub tokens_issued: u64,
    /// `insertAll` requests answered by the fake (authenticated, not faulted).
    pub insert_all_requests: u64,
    /// Rows of those requests that were well formed and within the limits.
    pub rows_received: u64,
    pub rows_stored: u64,
    /// Rows dropped silently: their `insertId` was seen within the window.
    pub rows_deduplicated: u64,
}

/// Everything the BigQuery fake holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BigQueryTruth {
    pub datasets: Vec<BigQueryDataset>,
    /// By id (`project:dataset.table`).
    pub tables: Vec<BigQueryTable>,
    /// The service accounts whose JWTs the token endpoint accepts.
    pub client_emails: Vec<String>,
    /// `expires_in` of the tokens issued from now on.
    pub token_lifetime_secs: u64,
    /// Zero: never de-duplicated.
    pub dedup_window_ms: u64,
    pub refusals: Vec<BigQueryRowRefusal>,
    pub counts: BigQueryCounts,
    pub requests: FakeRequestCounts,
}

/// The `expires_in` Google gives an access token.
const DEFAULT_TOKEN_LIFETIME_SECS: u64 = 3599;

/// How long an `insertId` is remembered by default (Google: "at least one minute").
const DEFAULT_DEDUP_WINDOW: Duration = Duration::from_secs(60);

/// The fake's state: keys, tokens, datasets, tables and rows, settings, counts.
pub(crate) struct BigQuery {
    /// Client email to its public key.
    keys: BTreeMap<String, token::PublicKey>,
    /// Access token to when it expires.
    tokens: HashMap<String, Instant>,
    token_lifetime_secs: u64,
    datasets: BTreeSet<BigQueryDataset>,
    /// By id (`project:dataset.table`).
    tables: BTreeMap<String, BigQueryTable>,
    /// (table id, `insertId`) to when a row with it was stored.
    seen: HashMap<(String, String), Instant>,
    dedup_window: Duration,
    refusals: Vec<BigQueryRowRefusal>,
    counts: BigQueryCounts,
}

impl BigQuery {
    /// The test key's account, the dataset `sandbox-project:consent`, no table.
    pub(crate) fn new() -> Self {
        let mut keys = BTreeMap::new();
        if let Ok(key) = token::PublicKey::from_pem(BIGQUERY_TEST_PUBLIC_KEY) {
            keys.insert(BIGQUERY_TEST_CLIENT_EMAIL.to_owned(), key);
        }
        let datasets = BTreeSet::from([BigQueryDataset {
            project_id: BIGQUERY_PROJECT.into(),
            dataset_id: BIGQUERY_DATASET.into(),
        }]);
        Self {
            keys,
            tokens: HashMap::new(),
            token_lifetime_secs: DEFAULT_TOKEN_LIFETIME_SECS,
            datasets,
            tables: BTreeMap::new(),
            seen: HashMap::new(),
            dedup_window: DEFAULT_DEDUP_WINDOW,
            refusals: Vec::new(),
            counts: BigQueryCounts::default(),
        }
    }

    /// Everything held, with the switchboard's `requests`.
    pub(crate) fn truth(&self, requests: FakeRequestCounts) -> BigQueryTruth {
        BigQueryTruth {
            datasets: self.datasets.iter().cloned().collect(),
            tables: self.tables.values().cloned().collect(),
            client_emails: self.keys.keys().cloned().collect(),
            token_lifetime_secs: self.token_lifetime_secs,
            dedup_window_ms: u64::try_from(self.dedup_window.as_millis()).unwrap_or(u64::MAX),
            refusals: self.refusals.clone(),
            counts: self.counts.clone(),
            requests,
        }
    }

    /// Adds a dataset; `false` if it was known.
    pub(crate) fn add_dataset(&mut self, project_id: &str, dataset_id: &str) -> bool {
        self.datasets.insert(BigQueryDataset {
            project_id: project_id.to_owned(),
            dataset_id: dataset_id.to_owned(),
        })
    }

    /// The `expires_in` of the tokens issued from now on.
    pub(crate) fn set_token_lifetime(&mut self, secs: u64) {
        self.token_lifetime_secs = secs;
    }

    /// How long a stored `insertId` is remembered; zero: not at all.
    pub(crate) fn set_dedup_window(&mut self, window: Duration) {
        self.dedup_window = window;
    }

    /// Rows whose `field` equals `value` are refused from now on.
    pub(crate) fn refuse_rows(&mut self, refusal: BigQueryRowRefusal) {
        self.refusals.push(refusal);
    }

    /// No row refused any more.
    pub(crate) fn clear_refusals(&mut self) {
        self.refusals.clear();
    }

    /// Hostile: a data team deletes table (or view) `table` of the default dataset, with its
    /// rows (`bq rm`); `false` if there was none.
    pub(crate) fn drop_table(&mut self, table: &str) -> bool {
        let id = tables::table_id(BIGQUERY_PROJECT, BIGQUERY_DATASET, table);
        self.seen.retain(|(of, _), _| *of != id);
        self.tables.remove(&id).is_some()
    }
}

/// What Google answers a request without a valid access token.
const UNAUTHENTICATED: &str = "Request had invalid authentication credentials. Expected OAuth 2 \
     access token, login cookie or other valid authentication credential. See \
     https://developers.google.com/identity/sign-in/web/devconsole-project.";

/// The access token of `Authorization: Bearer ...`.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The bearer token must be one this fake issued, not expired.
pub(crate) async fn auth(
    State(fakes): State<FakesState>,
    request: Request,
    next: Next,
) -> Response {
    let accepted = bearer(request.headers())
        .is_some_and(|token| fakes.bigquery().token_valid(token, Instant::now()));
    if accepted {
        return next.run(request).await;
    }
    let mut response = GoogleError::unauthorized(UNAUTHENTICATED).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"https://accounts.google.com/\""),
    );
    response
}

/// An unknown path under `/bigquery/v2`.
pub(crate) async fn no_such_endpoint() -> Response {
    GoogleError::not_found("Not found: URL").into_response()
}

/// `/projects/{project}/datasets/{dataset}/tables...`, nested under `/bigquery/v2`.
pub(super) fn routes() -> Router<FakesState> {
    tables::routes().merge(insert_all::routes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_file_points_where_asked_and_stays_json() {
        let file = bigquery_key_file("http://127.0.0.1:4242/bigquery/oauth2/token");
        let key: Value = serde_json::from_str(&file).expect("JSON");
        assert_eq!(
            key["token_uri"],
            "http://127.0.0.1:4242/bigquery/oauth2/token"
        );
        assert_eq!(key["type"], "service_account");
        assert_eq!(key["client_email"], BIGQUERY_TEST_CLIENT_EMAIL);
        assert_eq!(key["project_id"], BIGQUERY_PROJECT);
    }

    #[test]
    fn the_test_key_is_known_from_the_start() {
        let truth = BigQuery::new().truth(FakeRequestCounts::default());
        assert_eq!(truth.client_emails, [BIGQUERY_TEST_CLIENT_EMAIL]);
        assert_eq!(truth.datasets.len(), 1);
    }
}
