//! The keys of the `[[destination]]` kinds that are warehouses, `bigquery` and `postgres`:
//! a table the ledger is mirrored into, a batch of rows a request. Their secret is a file
//! (`credentials_file`, `url_file`), read into the destination's key so that a reload
//! replaces it as it replaces any key.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{Foreign, KindSettings, Named, SettingsError};

/// The table rows go to when `table` is not set.
pub const DEFAULT_TABLE: &str = "consent_events";
/// Rows per request when `batch` is not set.
pub const DEFAULT_BATCH: u32 = 500;
/// Most rows per request: BigQuery's `insertAll` takes at most 50,000 rows, and recommends
/// about 500; PostgreSQL binds 11 values a row, at most 65,535 a statement.
pub const MAX_BATCH: u32 = 5_000;
/// BigQuery's REST root when `base_url` is not set.
pub const BIGQUERY_BASE_URL: &str = "https://bigquery.googleapis.com/bigquery/v2";

/// What every warehouse takes: the table, the batch, where a new one starts.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Table {
    /// The table's name (its views are named after it).
    #[serde(default)]
    pub table: Option<String>,
    /// Rows per request.
    #[serde(default)]
    pub batch: Option<u32>,
    /// A new warehouse starts at this entry (default: the ledger's first).
    #[serde(default)]
    pub from_seq: Option<i64>,
}

impl Table {
    pub fn table(&self) -> &str {
        self.table.as_deref().unwrap_or(DEFAULT_TABLE)
    }

    pub fn batch(&self) -> u32 {
        self.batch.unwrap_or(DEFAULT_BATCH)
    }

    /// The cursor a new warehouse starts at: the entry before `from_seq`.
    pub fn start_cursor(&self) -> i64 {
        self.from_seq.map_or(0, |seq| seq.saturating_sub(1).max(0))
    }

    fn validate(&self, named: Named<'_>) -> Result<(), SettingsError> {
        if !sql_name(self.table()) {
            return Err(SettingsError::invalid(
                "destination.table",
                named("a table name is a letter or `_`, then up to 62 letters, digits or `_`"),
            ));
        }
        if !(1..=MAX_BATCH).contains(&self.batch()) {
            return Err(SettingsError::invalid(
                "destination.batch",
                named(&format!("must be between 1 and {MAX_BATCH}")),
            ));
        }
        if self.from_seq.is_some_and(|seq| seq < 1) {
            return Err(SettingsError::invalid(
                "destination.from_seq",
                named("the ledger's first entry is 1"),
            ));
        }
        Ok(())
    }
}

/// Whether `name` is a name both warehouses take unquoted (and `_current`, `_once` after
/// it still fit PostgreSQL's 63 bytes).
fn sql_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 54
}

/// Whether `name` is a BigQuery project or dataset id as Google allows them.
fn google_id(name: &str, dashes: bool) -> bool {
    !name.is_empty()
        && name.len() <= 1_024
        && name.chars().all(|c| {
            c.is_ascii_alphanumeric() || c == '_' || (dashes && (c == '-' || c == ':' || c == '.'))
        })
}

/// The keys of a `bigquery` destination beside the common ones.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct BigQuerySettings {
    /// The Google Cloud project that holds the dataset.
    #[serde(default)]
    pub project: String,
    /// The dataset (it must exist; the table is created in it when missing).
    #[serde(default)]
    pub dataset: String,
    /// A service account's JSON key; a secret, read into the destination's key.
    #[serde(default)]
    pub credentials_file: Option<PathBuf>,
    #[serde(flatten)]
    pub table: Table,
    #[serde(flatten)]
    pub(super) foreign: Foreign,
}

/// The keys of a `postgres` destination beside the common ones.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct PostgresSettings {
    /// A file holding the warehouse's connection URL; a secret, read into the
    /// destination's key.
    #[serde(default)]
    pub url_file: Option<PathBuf>,
    /// The schema the table is in (default: the connection's search path).
    #[serde(default)]
    pub schema: Option<String>,
    #[serde(flatten)]
    pub table: Table,
    #[serde(flatten)]
    pub(super) foreign: Foreign,
}

impl PostgresSettings {
    /// A warehouse of `table`, `batch` rows a request, for code that configures one itself
    /// (`demo`, tests); its URL is the destination's key.
    pub fn of_table(table: &str, batch: u32) -> Self {
        Self {
            table: Table {
                table: Some(table.to_owned()),
                batch: Some(batch),
                from_seq: None,
            },
            ..Self::default()
        }
    }
}

impl BigQuerySettings {
    /// A BigQuery warehouse of `project.dataset.table`, `batch` rows a request, for code
    /// that configures one itself; its service account's key is the destination's key.
    pub fn of_table(project: &str, dataset: &str, table: &str, batch: u32) -> Self {
        Self {
            project: project.to_owned(),
            dataset: dataset.to_owned(),
            table: Table {
                table: Some(table.to_owned()),
                batch: Some(batch),
                from_seq: None,
            },
            ..Self::default()
        }
    }
}

/// The keys of kind `bigquery`, for [`Foreign`].
pub(super) const BIGQUERY_KEYS: &[&str] = &[
    "project",
    "dataset",
    "credentials_file",
    "table",
    "batch",
    "from_seq",
];

/// The keys of kind `postgres`, for [`Foreign`].
pub(super) const POSTGRES_KEYS: &[&str] = &["url_file", "schema", "table", "batch", "from_seq"];

impl KindSettings for BigQuerySettings {
    fn foreign(&self) -> &Foreign {
        &self.foreign
    }

    fn validate(&self, named: Named<'_>) -> Result<(), SettingsError> {
        if !google_id(&self.project, true) {
            return Err(SettingsError::invalid(
                "destination.project",
                named("the Google Cloud project is required (letters, digits, `-`, `_`)"),
            ));
        }
        if !google_id(&self.dataset, false) {
            return Err(SettingsError::invalid(
                "destination.dataset",
                named("the dataset is required (letters, digits, `_`)"),
            ));
        }
        self.table.validate(named)
    }
}

impl KindSettings for PostgresSettings {
    fn foreign(&self) -> &Foreign {
        &self.foreign
    }

    fn validate(&self, named: Named<'_>) -> Result<(), SettingsError> {
        if let Some(schema) = &self.schema
            && !sql_name(schema)
        {
            return Err(SettingsError::invalid(
                "destination.schema",
                named("a schema name is a letter or `_`, then letters, digits or `_`"),
            ));
        }
        self.table.validate(named)
    }
}
