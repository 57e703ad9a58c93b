//! The keys of a `[[destination]]` of kind `postgres`: the warehouse's URL in a file, its
//! schema, and a warehouse's table. Compiled into the settings layer
//! (`crate::settings::kinds::postgres`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::settings::SettingsError;
use crate::settings::kinds::warehouse::{Table, sql_name};
use crate::settings::kinds::{Foreign, Kind, KindSettings, Named, OwnSecret};

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
    pub foreign: Foreign,
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

impl Kind for PostgresSettings {
    const KIND: &'static str = "postgres";
    const KEYS: &'static [&'static str] = &["url_file", "schema", "table", "batch", "from_seq"];
}

impl KindSettings for PostgresSettings {
    fn foreign(&self) -> &Foreign {
        &self.foreign
    }

    fn table(&self) -> Option<&Table> {
        Some(&self.table)
    }

    fn own_secret(&self) -> Option<OwnSecret<'_>> {
        Some(OwnSecret::file(
            "destination.url_file",
            self.url_file.as_ref(),
        ))
    }

    fn no_base_url(&self) -> Option<&'static str> {
        Some("a postgres destination is reached at the URL in `url_file`")
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
