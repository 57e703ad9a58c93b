//! Bulk exports of the current consent and of the ledger, streamed: rows are read with a
//! cursor and written as they come, so memory stays flat whatever the size. A CSV cell of
//! text from elsewhere never starts a spreadsheet formula (see [`text`]).

use std::io::Write;

use futures::{Stream, TryStreamExt as _};
use serde::Serialize;

use crate::ledger::{ConsentRecord, LedgerEntry};
use crate::model::phone::is_e164_form;
use crate::model::text::spreadsheet_safe;
use crate::store::{ExportStore, Pool};

/// What is exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Dataset {
    /// `consent_current`: one row per (organization, number).
    Consent,
    /// The ledger, in seq order.
    Ledger,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// A header row, then RFC 4180 rows (fields quoted when they need it).
    #[default]
    Csv,
    /// One JSON record per line, as the admin API and `--json` write them.
    Jsonl,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("reading the database: {0}")]
    Database(#[from] crate::store::Error),
    #[error("writing the export: {0}")]
    Io(#[from] std::io::Error),
    #[error("encoding a record: {0}")]
    Json(#[from] serde_json::Error),
}

/// One row as CSV fields, in header order.
trait CsvRow {
    const HEADER: &'static [&'static str];
    fn fields(&self) -> Vec<String>;
}

fn opt<T: ToString>(value: &Option<T>) -> String {
    value.as_ref().map(ToString::to_string).unwrap_or_default()
}

/// A cell of text that came from elsewhere (an organization, lead or event id): one a
/// spreadsheet would run as a formula starts with `'` ([`spreadsheet_safe`]). The cells the
/// daemon writes in a form of its own (seqs, booleans, timestamps, sources, push states)
/// go as they are, and so does a number in E.164: it starts with `+` and must stay the
/// number it is (a ledger number is always E.164; anything else would be treated as text).
fn text(value: &str) -> String {
    spreadsheet_safe(value).into_owned()
}

fn opt_text(value: &Option<String>) -> String {
    value.as_deref().map(text).unwrap_or_default()
}

fn phone(value: &str) -> String {
    if is_e164_form(value) {
        value.to_owned()
    } else {
        text(value)
    }
}

impl CsvRow for ConsentRecord {
    const HEADER: &'static [&'static str] = &[
        "organization_id",
        "lead_id",
        "phone_number",
        "opted_out",
        "changed_at",
        "source",
    ];
    fn fields(&self) -> Vec<String> {
        vec![
            text(&self.organization_id),
            opt_text(&self.lead_id),
            phone(&self.phone_number),
            self.opted_out.to_string(),
            self.changed_at.to_string(),
            self.source.to_string(),
        ]
    }
}

impl CsvRow for LedgerEntry {
    const HEADER: &'static [&'static str] = &[
        "seq",
        "organization_id",
        "lead_id",
        "phone_number",
        "opted_out",
        "occurred_at",
        "recorded_at",
        "source",
        "event_ref",
        "superseded",
        "push",
        "echo_of",
    ];
    fn fields(&self) -> Vec<String> {
        vec![
            self.seq.to_string(),
            text(&self.organization_id),
            opt_text(&self.lead_id),
            phone(&self.phone_number),
            self.opted_out.to_string(),
            self.occurred_at.to_string(),
            self.recorded_at.to_string(),
            self.source.to_string(),
            text(&self.event_ref),
            self.superseded.to_string(),
            opt(&self.push),
            opt(&self.echo_of),
        ]
    }
}

/// Writes one CSV field, quoted when it holds a separator, a quote, a line break, or
/// surrounding spaces (which some readers would trim).
fn write_field(out: &mut impl Write, field: &str) -> std::io::Result<()> {
    let needs_quotes =
        field.contains([',', '"', '\n', '\r']) || field.starts_with(' ') || field.ends_with(' ');
    if needs_quotes {
        write!(out, "\"{}\"", field.replace('"', "\"\""))
    } else {
        out.write_all(field.as_bytes())
    }
}

fn write_csv_line<S: AsRef<str>>(out: &mut impl Write, fields: &[S]) -> std::io::Result<()> {
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write_field(out, field.as_ref())?;
    }
    out.write_all(b"\r\n")
}

/// Writes `rows` as they come.
async fn write_rows<T>(
    rows: impl Stream<Item = Result<T, crate::store::Error>>,
    format: Format,
    out: &mut impl Write,
) -> Result<u64, ExportError>
where
    T: CsvRow + Serialize,
{
    if format == Format::Csv {
        write_csv_line(out, T::HEADER)?;
    }
    let mut rows = std::pin::pin!(rows);
    let mut written = 0u64;
    while let Some(row) = rows.try_next().await? {
        match format {
            Format::Csv => write_csv_line(out, &row.fields())?,
            Format::Jsonl => {
                serde_json::to_writer(&mut *out, &row)?;
                out.write_all(b"\n")?;
            }
        }
        written += 1;
    }
    out.flush()?;
    Ok(written)
}

/// Streams `dataset` into `out`; returns the rows written. `since`: ledger entries with a
/// greater seq, or consent records whose current state was set by such an entry.
pub async fn export(
    pool: impl Into<Pool>,
    dataset: Dataset,
    format: Format,
    since: Option<i64>,
    out: &mut impl Write,
) -> Result<u64, ExportError> {
    let since = since.unwrap_or(0);
    let pool = pool.into();
    match dataset {
        Dataset::Consent => write_rows(pool.export_consent(since), format, out).await,
        Dataset::Ledger => write_rows(pool.export_ledger(since), format, out).await,
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_only_when_they_need_it() {
        let mut out = Vec::new();
        write_csv_line(
            &mut out,
            &["plain", "a,b", "say \"hi\"", "two\nlines", " pad", ""],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\" pad\",\r\n"
        );
    }
}
