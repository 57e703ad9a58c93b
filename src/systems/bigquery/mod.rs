//! BigQuery, as a warehouse (`[[destination]]` of kind `bigquery`): an OAuth2 access
//! token from a service account's key (the JWT bearer grant, RS256, at the key's
//! `token_uri`), the table created with the rows' schema when missing and its views beside
//! it, and rows written with `tabledata.insertAll`, `insertId` the entry's `seq`.
//!
//! Google's answers, as its reference documents them: a row `insertAll` would not take is
//! one of `insertErrors` (refused, with its reason); `rateLimitExceeded` and
//! `quotaExceeded` (403), 429 and 5xx are tried again; any other 401 or 403 is the key's.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::http::{MAX_ERROR_BODY, prefix, transport_error};
use super::warehouse::{Link, Refusal, Table, Warehouse, fingerprint};
use super::{Pending, Stop};
use crate::model::text::bounded;
use crate::model::warehouse::{COLUMNS, Row};
use crate::settings::kinds::bigquery::BigQuerySettings;
use grant::{Token, grant};

mod grant;

/// A token is replaced this long before it expires.
const REFRESH_BEFORE: Duration = Duration::from_secs(60);
/// Longest answer read: an `insertAll` answer lists at most a few errors a row.
const MOST_ANSWER: usize = 8 << 20;

/// BigQuery's standard SQL type of a column of `kind`.
fn type_of(kind: crate::model::warehouse::ColumnType) -> &'static str {
    use crate::model::warehouse::ColumnType;
    match kind {
        ColumnType::Integer => "INTEGER",
        ColumnType::Text => "STRING",
        ColumnType::Boolean => "BOOLEAN",
        ColumnType::Time => "TIMESTAMP",
    }
}

/// A BigQuery table.
pub struct BigQuery {
    project: String,
    dataset: String,
    table: String,
    token: Mutex<Option<Token>>,
    ready: AtomicBool,
}

impl std::fmt::Debug for BigQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BigQuery")
            .field("table", &self.path())
            .finish_non_exhaustive()
    }
}

impl BigQuery {
    pub fn new(settings: &BigQuerySettings) -> Self {
        Self {
            project: settings.project.clone(),
            dataset: settings.dataset.clone(),
            table: settings.table.table().to_owned(),
            token: Mutex::new(None),
            ready: AtomicBool::new(false),
        }
    }

    /// `project.dataset.table`, as errors name it.
    fn path(&self) -> String {
        format!("{}.{}.{}", self.project, self.dataset, self.table)
    }

    fn tables_url(&self, link: &Link<'_>) -> String {
        format!(
            "{}/projects/{}/datasets/{}/tables",
            link.base_url, self.project, self.dataset
        )
    }

    /// The token in force for `link`'s key, granted anew when there is none, it is of
    /// another key, or it expires within a minute.
    async fn token(&self, link: &Link<'_>) -> Result<SecretString, Stop> {
        let key = fingerprint(link.secret);
        if let Ok(held) = self.token.lock()
            && let Some(token) = held.as_ref()
            && token.key == key
            && token.expires > Instant::now() + REFRESH_BEFORE
        {
            return Ok(token.value.clone());
        }
        let granted = grant(link).await?;
        let value = granted.value.clone();
        if let Ok(mut held) = self.token.lock() {
            *held = Some(granted);
        }
        Ok(value)
    }

    /// Whether the token in force was granted in the last minute (a 401 then is the key's,
    /// not an expired token's).
    fn fresh_token(&self) -> bool {
        self.token.lock().is_ok_and(|held| {
            held.as_ref()
                .is_some_and(|t| t.granted.elapsed() < Duration::from_secs(60))
        })
    }

    fn drop_token(&self) {
        if let Ok(mut held) = self.token.lock() {
            *held = None;
        }
    }

    /// A request with the token in force.
    async fn call(
        &self,
        link: &Link<'_>,
        request: reqwest::RequestBuilder,
        what: &str,
    ) -> Result<Answer, Stop> {
        let token = self.token(link).await?;
        let sent = request
            .timeout(link.timeout)
            .bearer_auth(token.expose_secret())
            .send()
            .await;
        let response =
            sent.map_err(|error| Stop::retry(format!("{what}: {}", transport_error(error))))?;
        let status = response.status();
        let retry_after = crate::client::retry_after(response.headers());
        let body = prefix(response, MOST_ANSWER).await;
        if status.is_success() {
            return serde_json::from_str(&body)
                .map(Answer::Ok)
                .map_err(|error| {
                    Stop::retry(format!(
                        "{what}: the answer is not the JSON expected: {error}"
                    ))
                });
        }
        let error = GoogleError::read(&body);
        let text = format!("{what}: answered {status}: {}", error.text());
        Ok(match (status.as_u16(), error.reason.as_str()) {
            (404, _) => Answer::NotFound(text),
            (409, _) => Answer::Exists,
            (403, "rateLimitExceeded" | "quotaExceeded") | (408 | 429 | 500.., _) => {
                return Err(Stop::Retry {
                    error: text,
                    retry_after,
                });
            }
            (401, _) if !self.fresh_token() => {
                // An expired or revoked token: granted anew at the next attempt.
                self.drop_token();
                return Err(Stop::retry(text));
            }
            (401 | 403, _) => return Err(Stop::Credentials(text)),
            (300..=399, _) => {
                return Err(Stop::retry(format!(
                    "{what}: answered {status}: redirects are not followed"
                )));
            }
            _ => Answer::Refused(text),
        })
    }

    /// The table's resource, `None` when it is missing.
    async fn table_resource(&self, link: &Link<'_>) -> Result<Option<serde_json::Value>, Stop> {
        self.resource_of(link, &self.table).await
    }

    /// The Table resource of `table` in the dataset, if there is one.
    async fn resource_of(
        &self,
        link: &Link<'_>,
        table: &str,
    ) -> Result<Option<serde_json::Value>, Stop> {
        let url = format!("{}/{}", self.tables_url(link), table);
        match self.call(link, link.http.get(url), "tables.get").await? {
            Answer::Ok(table) => Ok(Some(table)),
            Answer::NotFound(_) => Ok(None),
            Answer::Exists | Answer::Refused(_) => Err(Stop::retry(
                "tables.get: an answer BigQuery does not give".to_owned(),
            )),
        }
    }

    /// Creates the table (or a view, `resource` saying which); one there already is fine.
    async fn create(&self, link: &Link<'_>, resource: serde_json::Value) -> Result<(), Stop> {
        let request = link.http.post(self.tables_url(link)).json(&resource);
        match self.call(link, request, "tables.insert").await? {
            Answer::Ok(_) | Answer::Exists => Ok(()),
            Answer::NotFound(error) | Answer::Refused(error) => Err(Stop::Lookup(error)),
        }
    }

    /// The table and its views, created when missing; a table of other columns refused.
    async fn check(&self, link: Link<'_>) -> Result<Table, Stop> {
        let found = match self.table_resource(&link).await? {
            Some(table) => {
                self.compare(&table)?;
                // `numRows` counts stored rows; rows streamed in the last minutes are in
                // the streaming buffer. A table that has neither holds nothing.
                let empty = table.get("numRows").and_then(|n| n.as_str()) == Some("0")
                    && table.get("streamingBuffer").is_none();
                if empty {
                    Table::Empty
                } else {
                    Table::Holding(None)
                }
            }
            None => {
                let table = json!({
                    "tableReference": self.reference(&self.table),
                    "schema": { "fields": schema() },
                    "description": "The consent ledger of outreach-sync: an entry a row (a retried row may be here twice: read the _once view).",
                });
                self.create(&link, table).await?;
                Table::Made
            }
        };
        for (name, query) in self.views() {
            self.view(&link, &name, &query).await?;
        }
        Ok(found)
    }

    /// The view `name` of `query`: created when missing, its query replaced
    /// (`tables.patch`) when an earlier version of the daemon made it otherwise.
    async fn view(&self, link: &Link<'_>, name: &str, query: &str) -> Result<(), Stop> {
        let view = json!({ "query": query, "useLegacySql": false });
        if let Some(found) = self.resource_of(link, name).await? {
            if found.pointer("/view/query").and_then(|q| q.as_str()) == Some(query) {
                return Ok(());
            }
            let url = format!("{}/{}", self.tables_url(link), name);
            let request = link.http.patch(url).json(&json!({ "view": view }));
            return match self.call(link, request, "tables.patch").await? {
                Answer::Ok(_) => Ok(()),
                Answer::NotFound(error) | Answer::Refused(error) => Err(Stop::Lookup(error)),
                Answer::Exists => Err(Stop::retry(
                    "tables.patch: an answer BigQuery does not give".to_owned(),
                )),
            };
        }
        let resource = json!({ "tableReference": self.reference(name), "view": view });
        self.create(link, resource).await
    }

    fn reference(&self, table: &str) -> serde_json::Value {
        json!({ "projectId": self.project, "datasetId": self.dataset, "tableId": table })
    }

    /// The views beside the table: each entry once, and each number's current state (the
    /// latest act; at the same instant an opt-out, as the ledger ranks them).
    fn views(&self) -> [(String, String); 2] {
        let table = format!("`{}`", self.path());
        [
            (
                format!("{}_once", self.table),
                format!(
                    "SELECT * FROM {table} WHERE TRUE \
                     QUALIFY ROW_NUMBER() OVER (PARTITION BY seq ORDER BY recordedAt) = 1"
                ),
            ),
            (
                format!("{}_current", self.table),
                format!(
                    "SELECT * FROM {table} WHERE TRUE \
                     QUALIFY ROW_NUMBER() OVER (PARTITION BY accountId, organizationId, phoneNumber \
                     ORDER BY occurredAt DESC, optedOut DESC, seq DESC) = 1"
                ),
            ),
        ]
    }

    /// Refuses a table whose columns are not the rows': each row column there, of its
    /// type, and no other column a row must fill.
    fn compare(&self, table: &serde_json::Value) -> Result<(), Stop> {
        let fields: Vec<Field> = table
            .pointer("/schema/fields")
            .cloned()
            .and_then(|fields| serde_json::from_value(fields).ok())
            .unwrap_or_default();
        let differs = |what: String| Err(Stop::Lookup(format!("table {}: {what}", self.path())));
        for column in COLUMNS {
            let Some(field) = fields.iter().find(|f| f.name == column.name) else {
                return differs(format!("no column `{}`", column.name));
            };
            let (theirs, ours) = (same_type(&field.kind), type_of(column.kind));
            if theirs != ours {
                return differs(format!(
                    "column `{}` is {}, the rows' {ours}",
                    column.name, field.kind
                ));
            }
            if field.mode.as_deref() == Some("REQUIRED") && !column.required {
                return differs(format!(
                    "column `{}` is REQUIRED, and rows may leave it empty",
                    column.name
                ));
            }
            if field.mode.as_deref() == Some("REPEATED") {
                return differs(format!("column `{}` is REPEATED", column.name));
            }
        }
        if let Some(extra) = fields.iter().find(|f| {
            f.mode.as_deref() == Some("REQUIRED") && !COLUMNS.iter().any(|c| c.name == f.name)
        }) {
            return differs(format!(
                "column `{}` is REQUIRED, and no row fills it",
                extra.name
            ));
        }
        Ok(())
    }

    /// Sends `rows` with `insertAll`: the rows refused, by index.
    async fn insert(&self, link: Link<'_>, rows: &[Row]) -> Result<Vec<Refusal>, Stop> {
        let body = json!({
            "kind": "bigquery#tableDataInsertAllRequest",
            "skipInvalidRows": true,
            "ignoreUnknownValues": false,
            "rows": rows.iter().map(|row| json!({ "insertId": row.seq.to_string(), "json": row })).collect::<Vec<_>>(),
        });
        let url = format!("{}/{}/insertAll", self.tables_url(&link), self.table);
        let answer = self
            .call(&link, link.http.post(url).json(&body), "insertAll")
            .await?;
        let answer = match answer {
            Answer::Ok(answer) => answer,
            Answer::NotFound(error) => {
                // The table was deleted: made again before the next batch.
                self.ready.store(false, Ordering::Release);
                return Err(Stop::retry(error));
            }
            // The request as a whole: every row of it.
            Answer::Refused(error) => {
                return Ok((0..rows.len()).map(|i| (i, error.clone())).collect());
            }
            Answer::Exists => {
                return Err(Stop::retry(
                    "insertAll: an answer BigQuery does not give".to_owned(),
                ));
            }
        };
        let errors: Vec<InsertErrors> = answer
            .get("insertErrors")
            .cloned()
            .and_then(|errors| serde_json::from_value(errors).ok())
            .unwrap_or_default();
        if errors
            .iter()
            .any(|e| e.errors.iter().all(|e| e.reason == "stopped"))
        {
            // Never with skipInvalidRows; were it, the rows stopped were not refused.
            return Err(Stop::retry("insertAll: rows were stopped".to_owned()));
        }
        Ok(errors
            .into_iter()
            .filter(|e| e.index < rows.len())
            .map(|e| {
                let words: Vec<String> = e.errors.iter().map(GoogleReason::text).collect();
                (e.index, bounded(&words.join("; "), MAX_ERROR_BODY))
            })
            .collect())
    }
}

impl Warehouse for BigQuery {
    fn ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    fn forget(&self) {
        self.ready.store(false, Ordering::Release);
        self.drop_token();
    }

    fn prepare<'a>(&'a self, link: Link<'a>) -> Pending<'a, Result<Table, Stop>> {
        Box::pin(async move {
            let table = self.check(link).await?;
            self.ready.store(true, Ordering::Release);
            Ok(table)
        })
    }

    fn write<'a>(
        &'a self,
        link: Link<'a>,
        rows: &'a [Row],
    ) -> Pending<'a, Result<Vec<Refusal>, Stop>> {
        Box::pin(self.insert(link, rows))
    }
}

/// What an API call answered, beside the errors that stop the batch.
enum Answer {
    Ok(serde_json::Value),
    NotFound(String),
    Exists,
    /// Another 4xx: the request itself.
    Refused(String),
}

/// A column of a table's schema, as `tables.get` gives it.
#[derive(Deserialize)]
struct Field {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    mode: Option<String>,
}

/// A legacy type name as its standard SQL one.
fn same_type(kind: &str) -> &str {
    match kind {
        "INT64" => "INTEGER",
        "BOOL" => "BOOLEAN",
        other => other,
    }
}

/// The rows' schema, as `tables.insert` takes it.
fn schema() -> Vec<serde_json::Value> {
    COLUMNS
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": type_of(c.kind),
                "mode": if c.required { "REQUIRED" } else { "NULLABLE" },
            })
        })
        .collect()
}

/// One row's errors in an `insertAll` answer.
#[derive(Deserialize)]
struct InsertErrors {
    index: usize,
    #[serde(default)]
    errors: Vec<GoogleReason>,
}

/// One error as Google words it.
#[derive(Deserialize, Default)]
struct GoogleReason {
    #[serde(default)]
    reason: String,
    #[serde(default)]
    location: String,
    #[serde(default)]
    message: String,
}

impl GoogleReason {
    fn text(&self) -> String {
        match (self.location.is_empty(), self.message.is_empty()) {
            (_, true) => self.reason.clone(),
            (true, false) => format!("{}: {}", self.reason, self.message),
            (false, false) => format!("{} ({}): {}", self.reason, self.location, self.message),
        }
    }
}

/// An error answer: `{"error":{"code","message","errors":[{"reason",...}],"status"}}`.
#[derive(Default)]
struct GoogleError {
    reason: String,
    message: String,
}

impl GoogleError {
    fn read(body: &str) -> Self {
        let json: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        let error = &json["error"];
        let reason = error
            .pointer("/errors/0/reason")
            .and_then(|r| r.as_str())
            .unwrap_or_default();
        let message = error["message"]
            .as_str()
            .map_or_else(|| body.trim().to_owned(), str::to_owned);
        Self {
            reason: reason.to_owned(),
            message,
        }
    }

    fn text(&self) -> String {
        let text = if self.reason.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.reason, self.message)
        };
        bounded(&text, MAX_ERROR_BODY)
    }
}

#[cfg(test)]
mod tests;
