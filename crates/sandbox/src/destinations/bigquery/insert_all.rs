//! `tabledata.insertAll` (`POST .../tables/{table}/insertAll`): streams rows into a table.
//! Each row is checked against the schema (and the refusals a test set); the answer is 200
//! with `insertErrors` per row. With `skipInvalidRows` false, one invalid row stops them all
//! (the valid ones get `stopped`); with it true, the valid rows are stored. A row whose
//! `insertId` was stored within the de-duplication window is dropped silently. Google's
//! request limits: 50,000 rows, 10 MB.

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::cells::cell_error;
use super::tables::table_id;
use super::{BigQuery, BigQueryField, BigQueryRow, BigQueryRowRefusal, GoogleError};
use crate::destinations::FakesState;

/// The most rows one request may carry.
const MAX_ROWS: usize = 50_000;

/// The largest request body: 10 MB.
const MAX_REQUEST_BYTES: usize = 10 * 1024 * 1024;

/// The most read of a body: a body a little over the limit is read whole, and refused in
/// Google's words with the connection intact.
const READ_LIMIT: usize = 2 * MAX_REQUEST_BYTES;

/// `POST .../tables/{table}/insertAll`, its body read up to [`READ_LIMIT`].
pub(super) fn routes() -> Router<FakesState> {
    Router::new().route(
        "/projects/{project}/datasets/{dataset}/tables/{table}/insertAll",
        post(insert_all).layer(DefaultBodyLimit::max(READ_LIMIT)),
    )
}

/// A `TableDataInsertAllRequest` (`kind`, `templateSuffix` and `traceId` ignored).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InsertAllBody {
    #[serde(default)]
    skip_invalid_rows: bool,
    #[serde(default)]
    ignore_unknown_values: bool,
    #[serde(default)]
    rows: Vec<RowBody>,
}

/// One of its rows: `insertId` and `json` (an object).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RowBody {
    insert_id: Option<String>,
    #[serde(default)]
    json: Map<String, Value>,
}

/// One entry of a row's `errors`.
struct RowError {
    reason: String,
    location: String,
    message: String,
}

impl RowError {
    /// Reason `invalid`, at the field `location`.
    fn invalid(location: &str, message: String) -> Self {
        Self {
            reason: "invalid".into(),
            location: location.to_owned(),
            message,
        }
    }

    /// What a valid row gets when another row stopped the request.
    fn stopped() -> Self {
        Self {
            reason: "stopped".into(),
            location: String::new(),
            message: String::new(),
        }
    }

    /// As Google writes it, with its empty `debugInfo`.
    fn to_json(&self) -> Value {
        json!({
            "reason": self.reason,
            "location": self.location,
            "debugInfo": "",
            "message": self.message,
        })
    }
}

/// The request, within Google's limits, or why not.
fn request(bytes: Result<Bytes, BytesRejection>) -> Result<InsertAllBody, GoogleError> {
    let too_large = || {
        GoogleError::invalid(format!(
            "Request payload size exceeds the limit: {MAX_REQUEST_BYTES} bytes."
        ))
    };
    let bytes = bytes.map_err(|_| too_large())?;
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(too_large());
    }
    let body: InsertAllBody = serde_json::from_slice(&bytes)
        .map_err(|e| GoogleError::invalid(format!("Invalid JSON payload received. {e}")))?;
    if body.rows.is_empty() {
        return Err(GoogleError::invalid("No rows present in the request."));
    }
    if body.rows.len() > MAX_ROWS {
        return Err(GoogleError::invalid(format!(
            "too many rows present in the request, limit: {MAX_ROWS} row count: {}.",
            body.rows.len()
        )));
    }
    Ok(body)
}

/// `POST .../insertAll`.
async fn insert_all(
    State(fakes): State<FakesState>,
    Path((project, dataset, table)): Path<(String, String, String)>,
    bytes: Result<Bytes, BytesRejection>,
) -> Result<Response, GoogleError> {
    fakes.bigquery().counts.insert_all_requests += 1;
    let body = request(bytes)?;
    let mut bq = fakes.bigquery();
    bq.counts.rows_received += body.rows.len() as u64;
    bq.dataset(&project, &dataset)?;
    let id = table_id(&project, &dataset, &table);
    let stored = bq.table_mut(&id)?;
    if stored.view.is_some() {
        return Err(GoogleError::invalid(format!(
            "Cannot add rows to {id}: it is a view."
        )));
    }
    let schema = stored.schema.clone();
    let verdicts: Vec<Vec<RowError>> = body
        .rows
        .iter()
        .map(|row| row_errors(&schema, &bq.refusals, &row.json, body.ignore_unknown_values))
        .collect();
    let any_invalid = verdicts.iter().any(|errors| !errors.is_empty());
    let stop = any_invalid && !body.skip_invalid_rows;
    let mut insert_errors = Vec::new();
    let mut accepted = Vec::new();
    for (index, (row, errors)) in body.rows.into_iter().zip(verdicts).enumerate() {
        if !errors.is_empty() {
            insert_errors.push(entry(index, &errors));
        } else if stop {
            insert_errors.push(entry(index, &[RowError::stopped()]));
        } else {
            accepted.push(kept(row, &schema, body.ignore_unknown_values));
        }
    }
    bq.store(&id, accepted, Instant::now());
    let mut answer = json!({"kind": "bigquery#tableDataInsertAllResponse"});
    if !insert_errors.is_empty() {
        answer["insertErrors"] = Value::Array(insert_errors);
    }
    Ok(Json(answer).into_response())
}

/// An `insertErrors` entry.
fn entry(index: usize, errors: &[RowError]) -> Value {
    json!({
        "index": index,
        "errors": errors.iter().map(RowError::to_json).collect::<Vec<_>>(),
    })
}

/// The row as stored: with `ignoreUnknownValues`, the unknown fields dropped.
fn kept(row: RowBody, schema: &[BigQueryField], ignore_unknown: bool) -> BigQueryRow {
    let mut json = row.json;
    if ignore_unknown {
        json.retain(|name, _| schema.iter().any(|f| &f.name == name));
    }
    BigQueryRow {
        insert_id: row.insert_id.filter(|id| !id.is_empty()),
        json: Value::Object(json),
    }
}

/// What is wrong with a row: its cells against the schema, its unknown fields, and the
/// refusals a test set.
fn row_errors(
    schema: &[BigQueryField],
    refusals: &[BigQueryRowRefusal],
    json: &Map<String, Value>,
    ignore_unknown: bool,
) -> Vec<RowError> {
    let mut errors = Vec::new();
    for field in schema {
        match json.get(&field.name).filter(|v| !v.is_null()) {
            None if field.mode == "REQUIRED" => errors.push(RowError::invalid(
                &field.name,
                format!("Missing required field: {}.", field.name),
            )),
            None => {}
            Some(value) => {
                if let Some(message) = cell_error(field, value) {
                    errors.push(RowError::invalid(&field.name, message));
                }
            }
        }
    }
    if !ignore_unknown {
        for name in json.keys() {
            if !schema.iter().any(|f| &f.name == name) {
                errors.push(RowError::invalid(name, format!("no such field: {name}.")));
            }
        }
    }
    for refusal in refusals {
        if json
            .get(&refusal.field)
            .is_some_and(|v| equals(v, &refusal.value))
        {
            errors.push(RowError {
                reason: refusal.reason.clone(),
                location: refusal.field.clone(),
                message: refusal.message.clone(),
            });
        }
    }
    errors
}

/// A cell equals a refusal's value: a string as is, anything else as JSON text.
fn equals(value: &Value, wanted: &str) -> bool {
    match value {
        Value::String(s) => s == wanted,
        other => serde_json::to_string(other).is_ok_and(|text| text == wanted),
    }
}

impl BigQuery {
    /// Appends the rows to the table of `id`, dropping those whose `insertId` was stored
    /// within the de-duplication window (none when the window is zero).
    fn store(&mut self, id: &str, rows: Vec<BigQueryRow>, now: Instant) {
        let window = self.dedup_window;
        self.seen.retain(|_, at| now.duration_since(*at) < window);
        let Some(table) = self.tables.get_mut(id) else {
            return;
        };
        for row in rows {
            if let Some(insert_id) = row.insert_id.as_ref().filter(|_| !window.is_zero()) {
                let key = (id.to_owned(), insert_id.clone());
                if self.seen.contains_key(&key) {
                    self.counts.rows_deduplicated += 1;
                    continue;
                }
                self.seen.insert(key, now);
            }
            table.rows.push(row);
            self.counts.rows_stored += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `phoneNumber` (required) and `optedOut`.
    fn schema() -> Vec<BigQueryField> {
        let field = |name: &str, field_type: &str, mode: &str| BigQueryField {
            name: name.into(),
            field_type: field_type.into(),
            mode: mode.into(),
        };
        vec![
            field("phone", "STRING", "REQUIRED"),
            field("optedOut", "BOOLEAN", "NULLABLE"),
        ]
    }

    /// A row's `json`.
    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn a_row_is_checked_field_by_field() {
        let row = object(json!({"phone": null, "optedOut": "maybe", "extra": 1}));
        let errors = row_errors(&schema(), &[], &row, false);
        let locations: Vec<&str> = errors.iter().map(|e| e.location.as_str()).collect();
        assert_eq!(locations, ["phone", "optedOut", "extra"]);
        assert_eq!(errors[0].message, "Missing required field: phone.");
        assert_eq!(errors[2].message, "no such field: extra.");
        assert!(
            row_errors(&schema(), &[], &row, true).len() == 2,
            "unknown ignored"
        );
    }

    #[test]
    fn a_refusal_matches_a_valid_row() {
        let refusal = BigQueryRowRefusal {
            field: "phone".into(),
            value: "+12025550199".into(),
            reason: "invalid".into(),
            message: "refused".into(),
        };
        let row = object(json!({"phone": "+12025550199", "optedOut": true}));
        let errors = row_errors(&schema(), &[refusal], &row, false);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].message, "refused");
    }
}
