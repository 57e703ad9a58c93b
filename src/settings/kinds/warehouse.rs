//! What every `[[destination]]` kind that is a warehouse takes: a table the ledger is
//! mirrored into, a batch of rows a request ([`Table`]). Each warehouse's own keys are in its
//! folder (`src/systems/bigquery/settings.rs`, ...); its secret is a file, read into the
//! destination's key so that a reload replaces it as it replaces any key.

use serde::{Deserialize, Serialize};

use super::Named;
use crate::settings::SettingsError;

/// The table rows go to when `table` is not set.
pub const DEFAULT_TABLE: &str = "consent_events";
/// Rows per request when `batch` is not set.
pub const DEFAULT_BATCH: u32 = 500;
/// Most rows per request: BigQuery's `insertAll` takes at most 50,000 rows, and recommends
/// about 500; PostgreSQL binds 11 values a row, at most 65,535 a statement.
pub const MAX_BATCH: u32 = 5_000;

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

    pub fn validate(&self, named: Named<'_>) -> Result<(), SettingsError> {
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
pub fn sql_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 54
}
