//! `tables.get` and `tables.insert` under `/projects/{project}/datasets/{dataset}/tables`:
//! the Table resource, a table with a schema or a view with a query. Types are stored by
//! their REST names (`INT64` as `INTEGER`, `FLOAT64` as `FLOAT`, `BOOL` as `BOOLEAN`), as
//! Google answers them.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{BigQuery, BigQueryDataset, BigQueryField, BigQueryTable, BigQueryView, GoogleError};
use crate::destinations::FakesState;

/// The modes a column may have; the first is the default.
const MODES: [&str; 3] = ["NULLABLE", "REQUIRED", "REPEATED"];

/// Longest table id Google takes.
const MAX_TABLE_ID: usize = 1024;

/// Longest column name Google takes.
const MAX_FIELD_NAME: usize = 300;

/// `tables.insert`, `tables.get` and `tables.patch`.
pub(super) fn routes() -> Router<FakesState> {
    Router::new()
        .route(
            "/projects/{project}/datasets/{dataset}/tables",
            post(insert),
        )
        .route(
            "/projects/{project}/datasets/{dataset}/tables/{table}",
            get(fetch).patch(patch),
        )
}

/// A table's id as Google writes it: `project:dataset.table`.
pub(super) fn table_id(project: &str, dataset: &str, table: &str) -> String {
    format!("{project}:{dataset}.{table}")
}

/// The REST name of a column type, or `None` if BigQuery has no such type here.
fn rest_type(given: &str) -> Option<&'static str> {
    Some(match given.to_ascii_uppercase().as_str() {
        "STRING" => "STRING",
        "INTEGER" | "INT64" => "INTEGER",
        "BOOLEAN" | "BOOL" => "BOOLEAN",
        "TIMESTAMP" => "TIMESTAMP",
        "FLOAT" | "FLOAT64" => "FLOAT",
        "NUMERIC" => "NUMERIC",
        "DATE" => "DATE",
        "DATETIME" => "DATETIME",
        "BYTES" => "BYTES",
        "JSON" => "JSON",
        _ => return None,
    })
}

/// The parts of a Table resource `tables.insert` reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TableBody {
    table_reference: Option<ReferenceBody>,
    schema: Option<SchemaBody>,
    view: Option<ViewBody>,
}

/// `tableReference`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReferenceBody {
    project_id: Option<String>,
    dataset_id: Option<String>,
    table_id: Option<String>,
}

/// `schema`.
#[derive(Deserialize)]
struct SchemaBody {
    #[serde(default)]
    fields: Vec<FieldBody>,
}

/// One of `schema.fields`.
#[derive(Deserialize)]
struct FieldBody {
    name: Option<String>,
    #[serde(rename = "type")]
    field_type: Option<String>,
    mode: Option<String>,
}

/// `view`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ViewBody {
    query: Option<String>,
    use_legacy_sql: Option<bool>,
}

/// A column name Google takes: a letter or underscore, then letters, digits, underscores.
fn valid_field_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= MAX_FIELD_NAME
}

/// One column as stored, or why not.
fn field(body: &FieldBody) -> Result<BigQueryField, GoogleError> {
    let name = body.name.clone().unwrap_or_default();
    if !valid_field_name(&name) {
        return Err(GoogleError::invalid(format!(
            "Invalid field name \"{name}\". Fields must contain only letters, numbers, and \
             underscores, start with a letter or underscore, and be at most {MAX_FIELD_NAME} \
             characters long."
        )));
    }
    let given = body.field_type.as_deref().unwrap_or_default();
    let field_type = rest_type(given).ok_or_else(|| {
        GoogleError::invalid(format!(
            "Invalid value for type: {given} is not a valid value"
        ))
    })?;
    let mode = body
        .mode
        .as_deref()
        .unwrap_or(MODES[0])
        .to_ascii_uppercase();
    if !MODES.contains(&mode.as_str()) {
        return Err(GoogleError::invalid(format!(
            "Invalid value for mode: {mode} is not a valid value"
        )));
    }
    Ok(BigQueryField {
        name,
        field_type: field_type.to_owned(),
        mode,
    })
}

/// The columns of a schema, names unique regardless of case.
fn schema(body: Option<&SchemaBody>) -> Result<Vec<BigQueryField>, GoogleError> {
    let mut fields: Vec<BigQueryField> = Vec::new();
    for given in body.map(|s| s.fields.as_slice()).unwrap_or_default() {
        let field = field(given)?;
        if fields
            .iter()
            .any(|f| f.name.eq_ignore_ascii_case(&field.name))
        {
            return Err(GoogleError::invalid(format!(
                "Field {} already exists in schema",
                field.name
            )));
        }
        fields.push(field);
    }
    Ok(fields)
}

/// A view's query, or why not.
fn view(body: Option<&ViewBody>) -> Result<Option<BigQueryView>, GoogleError> {
    let Some(body) = body else {
        return Ok(None);
    };
    let query = body.query.clone().unwrap_or_default();
    if query.trim().is_empty() {
        return Err(GoogleError::invalid("A view must have a query."));
    }
    Ok(Some(BigQueryView {
        query,
        use_legacy_sql: body.use_legacy_sql.unwrap_or(true),
    }))
}

/// A table id Google takes: letters, digits, underscores and dashes, at most 1024.
fn valid_table_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_TABLE_ID
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The table id of a reference in the dataset of the path, or why not.
fn reference(
    body: Option<&ReferenceBody>,
    project: &str,
    dataset: &str,
) -> Result<String, GoogleError> {
    let body = body.ok_or_else(|| GoogleError::invalid("Required parameter is missing"))?;
    let table = body
        .table_id
        .clone()
        .ok_or_else(|| GoogleError::invalid("Required parameter is missing"))?;
    if !valid_table_id(&table) {
        return Err(GoogleError::invalid(format!(
            "Invalid table ID \"{table}\". Table IDs must be alphanumeric (plus underscores) and \
             must be at most {MAX_TABLE_ID} characters long. Also, Table decorators cannot be used."
        )));
    }
    let elsewhere = body.project_id.as_deref().is_some_and(|p| p != project)
        || body.dataset_id.as_deref().is_some_and(|d| d != dataset);
    if elsewhere {
        return Err(GoogleError::invalid(format!(
            "Invalid table reference: the table must be in dataset {project}:{dataset}"
        )));
    }
    Ok(table)
}

impl BigQuery {
    /// 404 `Not found: Dataset p:d` unless the dataset is known.
    pub(super) fn dataset(&self, project: &str, dataset: &str) -> Result<(), GoogleError> {
        let wanted = BigQueryDataset {
            project_id: project.to_owned(),
            dataset_id: dataset.to_owned(),
        };
        if self.datasets.contains(&wanted) {
            Ok(())
        } else {
            Err(GoogleError::not_found(format!(
                "Not found: Dataset {project}:{dataset}"
            )))
        }
    }

    /// The table of `id`, or 404 `Not found: Table p:d.t`.
    pub(super) fn table_mut(&mut self, id: &str) -> Result<&mut BigQueryTable, GoogleError> {
        self.tables
            .get_mut(id)
            .ok_or_else(|| GoogleError::not_found(format!("Not found: Table {id}")))
    }
}

/// `POST .../tables`: creates a table or a view.
async fn insert(
    State(fakes): State<FakesState>,
    Path((project, dataset)): Path<(String, String)>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, GoogleError> {
    let body: TableBody = serde_json::from_slice(&bytes)
        .map_err(|e| GoogleError::invalid(format!("Invalid JSON payload received. {e}")))?;
    let table = reference(body.table_reference.as_ref(), &project, &dataset)?;
    let schema = schema(body.schema.as_ref())?;
    let view = view(body.view.as_ref())?;
    let mut bq = fakes.bigquery();
    bq.dataset(&project, &dataset)?;
    let id = table_id(&project, &dataset, &table);
    if bq.tables.contains_key(&id) {
        return Err(GoogleError::duplicate(format!(
            "Already Exists: Table {id}"
        )));
    }
    let stored = BigQueryTable {
        project_id: project,
        dataset_id: dataset,
        table_id: table,
        table_type: if view.is_some() { "VIEW" } else { "TABLE" }.into(),
        schema,
        view,
        rows: Vec::new(),
        creation_time: Utc::now().timestamp_millis(),
    };
    let answer = resource(&stored, &headers);
    bq.tables.insert(id, stored);
    Ok(Json(answer).into_response())
}

/// `PATCH .../tables/{table}`: the fields given replace the table's (a view's query, a
/// table's schema); the Table resource as it now is. A view stays a view.
async fn patch(
    State(fakes): State<FakesState>,
    Path((project, dataset, table)): Path<(String, String, String)>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, GoogleError> {
    let body: TableBody = serde_json::from_slice(&bytes)
        .map_err(|e| GoogleError::invalid(format!("Invalid JSON payload received. {e}")))?;
    let view = view(body.view.as_ref())?;
    let schema = body.schema.as_ref().map(|s| schema(Some(s))).transpose()?;
    let mut bq = fakes.bigquery();
    bq.dataset(&project, &dataset)?;
    let stored = bq.table_mut(&table_id(&project, &dataset, &table))?;
    match (view, stored.view.is_some()) {
        (Some(view), true) => stored.view = Some(view),
        (Some(_), false) => {
            return Err(GoogleError::invalid(
                "Cannot change a table into a view: a view's query is patched on a view",
            ));
        }
        (None, _) => {}
    }
    if let Some(schema) = schema {
        stored.schema = schema;
    }
    Ok(Json(resource(stored, &headers)).into_response())
}

/// `GET .../tables/{table}`: the Table resource.
async fn fetch(
    State(fakes): State<FakesState>,
    Path((project, dataset, table)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, GoogleError> {
    let mut bq = fakes.bigquery();
    bq.dataset(&project, &dataset)?;
    let stored = bq.table_mut(&table_id(&project, &dataset, &table))?;
    Ok(Json(resource(stored, &headers)).into_response())
}

/// The Table resource, its `selfLink` on the host the client called.
fn resource(table: &BigQueryTable, headers: &HeaderMap) -> Value {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    let (p, d, t) = (&table.project_id, &table.dataset_id, &table.table_id);
    let created = table.creation_time.to_string();
    let mut resource = json!({
        "kind": "bigquery#table",
        "etag": format!("{:x}", table.creation_time),
        "id": table_id(p, d, t),
        "selfLink": format!("http://{host}/bigquery/v2/projects/{p}/datasets/{d}/tables/{t}"),
        "tableReference": {"projectId": p, "datasetId": d, "tableId": t},
        "schema": {"fields": table.schema},
        "creationTime": created,
        "lastModifiedTime": created,
        "type": table.table_type,
        "location": "US",
    });
    if let Some(view) = &table.view {
        resource["view"] = json!({"query": view.query, "useLegacySql": view.use_legacy_sql});
    } else {
        // Streamed rows stay in the streaming buffer: not yet in `numRows`.
        resource["numBytes"] = json!("0");
        resource["numRows"] = json!("0");
        if !table.rows.is_empty() {
            resource["streamingBuffer"] = json!({"estimatedRows": table.rows.len().to_string()});
        }
    }
    resource
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A schema as a request gives it.
    fn body(json: Value) -> SchemaBody {
        serde_json::from_value(json).expect("a schema")
    }

    #[test]
    fn a_schema_takes_the_documented_types_and_modes() {
        let fields = schema(Some(&body(json!({"fields": [
            {"name": "phone", "type": "STRING", "mode": "REQUIRED"},
            {"name": "n", "type": "int64"},
            {"name": "ok", "type": "BOOL", "mode": "repeated"},
        ]}))))
        .expect("valid");
        let types: Vec<&str> = fields.iter().map(|f| f.field_type.as_str()).collect();
        assert_eq!(types, ["STRING", "INTEGER", "BOOLEAN"]);
        let modes: Vec<&str> = fields.iter().map(|f| f.mode.as_str()).collect();
        assert_eq!(modes, ["REQUIRED", "NULLABLE", "REPEATED"]);
    }

    #[test]
    fn a_bad_schema_is_refused() {
        for bad in [
            json!({"fields": [{"name": "x", "type": "GEOMETRY"}]}),
            json!({"fields": [{"type": "STRING"}]}),
            json!({"fields": [{"name": "1x", "type": "STRING"}]}),
            json!({"fields": [{"name": "x", "type": "STRING", "mode": "SOMETIMES"}]}),
            json!({"fields": [{"name": "x", "type": "STRING"}, {"name": "X", "type": "DATE"}]}),
        ] {
            assert!(schema(Some(&body(bad.clone()))).is_err(), "{bad}");
        }
    }
}
