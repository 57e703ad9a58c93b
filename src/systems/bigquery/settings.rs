//! The keys of a `[[destination]]` of kind `bigquery`: the dataset's project and name, a
//! service account's key in a file, and a warehouse's table. Compiled into the settings
//! layer (`crate::settings::kinds::bigquery`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::settings::SettingsError;
use crate::settings::kinds::warehouse::Table;
use crate::settings::kinds::{Foreign, Kind, KindSettings, Named, OwnSecret};

/// BigQuery's REST root when `base_url` is not set.
pub const BIGQUERY_BASE_URL: &str = "https://bigquery.googleapis.com/bigquery/v2";

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
    pub foreign: Foreign,
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

impl Kind for BigQuerySettings {
    const KIND: &'static str = "bigquery";
    const KEYS: &'static [&'static str] = &[
        "project",
        "dataset",
        "credentials_file",
        "table",
        "batch",
        "from_seq",
    ];
}

impl KindSettings for BigQuerySettings {
    fn foreign(&self) -> &Foreign {
        &self.foreign
    }

    fn table(&self) -> Option<&Table> {
        Some(&self.table)
    }

    fn own_secret(&self) -> Option<OwnSecret<'_>> {
        Some(OwnSecret::file(
            "destination.credentials_file",
            self.credentials_file.as_ref(),
        ))
    }

    fn default_base_url(&self) -> Option<&'static str> {
        Some(BIGQUERY_BASE_URL)
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

/// Whether `name` is a BigQuery project or dataset id as Google allows them.
fn google_id(name: &str, dashes: bool) -> bool {
    !name.is_empty()
        && name.len() <= 1_024
        && name.chars().all(|c| {
            c.is_ascii_alphanumeric() || c == '_' || (dashes && (c == '-' || c == ':' || c == '.'))
        })
}
