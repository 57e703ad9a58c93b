//! Reading an opt-out list a campaign brings from another platform: CSV with or without a
//! header row, `,` `;` or tab between fields, quoted fields, a UTF-8 BOM; every number
//! normalized to E.164 with [`phone::normalize`] (`region` for national formats).
//!
//! The list is read as a stream, a record at a time, and the reader keeps nothing of the
//! rows it gave: the numbers are kept by [`Numbers`] (16 bytes each with its first line,
//! repeats dropped), so memory grows with the distinct numbers, never with the file. What
//! the rows say is given row by row ([`Row`]); what the file says as a whole at the end
//! ([`Summary`], with the SHA-256 of its exact bytes). Lines end in LF, CRLF or CR alone,
//! and are counted whichever it is, blank ones included.

use std::io::{BufRead, BufReader, Read};

/// The readers under the CSV reader: line ends as LF, the hash of the exact bytes.
mod bytes;
mod numbers;
mod record;
use bytes::{Hashing, LineEnds};
pub use numbers::Numbers;
pub use record::{ImportError, MAX_INVALID_KEPT, Refusal, Report, Request, import};

use sha2::Digest as _;

use crate::model::phone::{self, E164, Region};

/// Header names taken as the phone column, compared without case, spaces, `_` or `-`.
const PHONE_HEADERS: [&str; 12] = [
    "phone",
    "phonenumber",
    "phoneno",
    "mobile",
    "mobilenumber",
    "mobilephone",
    "cell",
    "cellphone",
    "number",
    "msisdn",
    "telephone",
    "e164",
];
/// Longest part of an invalid value shown back, in characters.
const SHOWN_VALUE_CHARS: usize = 100;
/// Column names an error quotes from the first row, at most; and how much of each.
const QUOTED_COLUMNS: usize = 10;
const QUOTED_COLUMN_CHARS: usize = 40;
/// How much of the first row an error quotes in all, in characters.
const QUOTED_ROW_CHARS: usize = 200;
/// How much of the file's start is looked at to tell its delimiter.
const SNIFF_BYTES: usize = 64 * 1024;

/// How to read a list.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// The phone column's header; found by name (or by content) when not given.
    pub phone_column: Option<String>,
    /// Where national formats (`(202) 555-0143`) are read.
    pub region: Region,
}

/// Why a list cannot be read at all (a bad row is a [`Row::Invalid`] instead).
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("cannot read the file: {0}")]
    Read(#[from] std::io::Error),
    #[error("the file holds no rows")]
    Empty,
    #[error("no column is named {wanted} (the header row has: {found})")]
    NoSuchColumn { wanted: String, found: String },
    #[error(
        "no phone column found: the first row names none of the usual headers and holds no number; name it with --phone-column (the first row has: {found})"
    )]
    NoPhoneColumn { found: String },
    #[error("line {line}: {message}")]
    Csv { line: u64, message: String },
}

/// A row that does not hold a possible number.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct InvalidRow {
    pub line: u64,
    /// The cell as written, at most 100 characters of it.
    pub value: String,
    pub reason: String,
}

/// One data row of the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// A possible number (the file may hold it on other lines too: [`Numbers`] tells).
    Number {
        line: u64,
        number: E164,
    },
    Invalid(InvalidRow),
}

/// The whole file, once read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Data rows (the header row not counted).
    pub rows: u64,
    pub valid: u64,
    pub invalid: u64,
    /// Hex SHA-256 of the file's exact bytes.
    pub sha256: String,
}

/// A list being read.
pub struct ListReader<R: Read> {
    records: csv::Reader<LineEnds<Hashing<BufReader<R>>>>,
    column: usize,
    region: Region,
    /// The first data row, when the first row was one, with its line.
    first: Option<(csv::ByteRecord, u64)>,
    summary: Summary,
}

impl<R: Read> ListReader<R> {
    /// Opens a list: tells its delimiter from its start and finds the phone column.
    pub fn new(input: R, options: &ListOptions) -> Result<Self, ListError> {
        let mut buffered = BufReader::with_capacity(SNIFF_BYTES, input);
        let delimiter = sniff_delimiter(buffered.fill_buf()?);
        let mut records = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .has_headers(false)
            .flexible(true)
            .from_reader(LineEnds::new(Hashing::new(buffered)));
        let mut first = csv::ByteRecord::new();
        if !records.read_byte_record(&mut first).map_err(csv_error)? {
            return Err(ListError::Empty);
        }
        let (column, header) = phone_column(&first, options)?;
        let line = start_line(&records, &first);
        Ok(Self {
            records,
            column,
            region: options.region,
            first: (!header).then_some((first, line)),
            summary: Summary {
                rows: 0,
                valid: 0,
                invalid: 0,
                sha256: String::new(),
            },
        })
    }

    /// The next data row, `None` after the last.
    pub fn next_row(&mut self) -> Result<Option<Row>, ListError> {
        let (record, line) = match self.first.take() {
            Some(first) => first,
            None => {
                let mut record = csv::ByteRecord::new();
                if !self
                    .records
                    .read_byte_record(&mut record)
                    .map_err(csv_error)?
                {
                    return Ok(None);
                }
                let line = start_line(&self.records, &record);
                (record, line)
            }
        };
        self.summary.rows += 1;
        let row = self.row(line, record.get(self.column));
        match &row {
            Row::Number { .. } => self.summary.valid += 1,
            Row::Invalid(_) => self.summary.invalid += 1,
        }
        Ok(Some(row))
    }

    fn row(&self, line: u64, cell: Option<&[u8]>) -> Row {
        let invalid = |value: &str, reason: String| {
            Row::Invalid(InvalidRow {
                line,
                value: value.chars().take(SHOWN_VALUE_CHARS).collect(),
                reason,
            })
        };
        let Some(cell) = cell else {
            return invalid("", format!("no field {}", self.column + 1));
        };
        let Ok(text) = std::str::from_utf8(cell) else {
            let shown = String::from_utf8_lossy(cell);
            return invalid(&shown, "not UTF-8 text".into());
        };
        match phone::normalize(text.trim(), self.region) {
            Ok(number) => Row::Number { line, number },
            Err(error) => invalid(text, error.to_string()),
        }
    }

    /// Reads what is left (rows not asked for are not counted) and gives the summary.
    pub fn finish(mut self) -> Result<Summary, ListError> {
        std::io::copy(self.records.get_mut(), &mut std::io::sink())?;
        let hashing = self.records.into_inner().inner;
        self.summary.sha256 = hex::encode(hashing.hasher.finalize());
        Ok(self.summary)
    }
}

impl<R: Read> Iterator for ListReader<R> {
    type Item = Result<Row, ListError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_row().transpose()
    }
}

/// The line `record` (just read) begins on. The reader's own position of a record is where
/// the previous one ended, before the blank lines it skips; its line count once the record
/// is read is true, so the line is counted back from there: the line ends inside the
/// record's (quoted) fields, and the one that ended it unless the file did.
fn start_line<R: Read>(records: &csv::Reader<LineEnds<R>>, record: &csv::ByteRecord) -> u64 {
    let end = records.position();
    let inside = record.as_slice().iter().filter(|&&b| b == b'\n').count() as u64;
    let source = records.get_ref();
    let ended_by_the_file = source.at_end && !source.ends_in_lf && end.byte() == source.handed_on;
    let terminator = u64::from(!ended_by_the_file);
    end.line().saturating_sub(terminator + inside).max(1)
}

/// The delimiter of the first line: the most frequent of `,` `;` and tab outside quotes
/// (`,` when none is there).
fn sniff_delimiter(start: &[u8]) -> u8 {
    let start = start.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(start);
    let mut counts = [0usize; 3];
    let mut quoted = false;
    for &byte in start {
        match byte {
            b'"' => quoted = !quoted,
            b'\n' | b'\r' if !quoted => break,
            b',' if !quoted => counts[0] += 1,
            b';' if !quoted => counts[1] += 1,
            b'\t' if !quoted => counts[2] += 1,
            _ => {}
        }
    }
    let delimiters = [b',', b';', b'\t'];
    let (most, _) = counts.iter().enumerate().fold(
        (0, 0),
        |best, (i, &n)| if n > best.1 { (i, n) } else { best },
    );
    delimiters[most]
}

/// The phone column, and whether the first row is a header row.
fn phone_column(
    first: &csv::ByteRecord,
    options: &ListOptions,
) -> Result<(usize, bool), ListError> {
    let cells: Vec<String> = first
        .iter()
        .enumerate()
        .map(|(i, cell)| {
            let text = String::from_utf8_lossy(cell);
            // A BOM the reader left on the first field.
            let text = if i == 0 {
                text.trim_start_matches('\u{feff}').to_owned()
            } else {
                text.into_owned()
            };
            text.trim().to_owned()
        })
        .collect();
    let found = || quoted_columns(&cells);
    if let Some(wanted) = &options.phone_column {
        let key = header_key(wanted);
        return match cells.iter().position(|c| header_key(c) == key) {
            Some(column) => Ok((column, true)),
            None => Err(ListError::NoSuchColumn {
                wanted: quoted(wanted, QUOTED_COLUMN_CHARS),
                found: found(),
            }),
        };
    }
    if let Some(column) = cells
        .iter()
        .position(|c| PHONE_HEADERS.contains(&header_key(c).as_str()))
    {
        return Ok((column, true));
    }
    match cells
        .iter()
        .position(|c| phone::normalize(c, options.region).is_ok())
    {
        Some(column) => Ok((column, false)),
        None if cells.len() == 1 && !cells[0].chars().any(char::is_alphabetic) => Ok((0, false)),
        None => Err(ListError::NoPhoneColumn { found: found() }),
    }
}

/// `text` as an error quotes input: in quotes, control characters escaped, at most `chars`
/// characters of it (`…` after a cut).
pub fn quoted(text: &str, chars: usize) -> String {
    let mut shown: String = text.chars().take(chars).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    format!("{shown:?}")
}

/// The first row's cells as an error quotes them: the first [`QUOTED_COLUMNS`], each cut
/// to [`QUOTED_COLUMN_CHARS`], [`QUOTED_ROW_CHARS`] in all, and how many more there are.
fn quoted_columns(cells: &[String]) -> String {
    let mut shown = String::new();
    let mut count = 0;
    for cell in cells.iter().take(QUOTED_COLUMNS) {
        let next = quoted(cell, QUOTED_COLUMN_CHARS);
        if count > 0 && shown.chars().count() + next.chars().count() > QUOTED_ROW_CHARS {
            break;
        }
        if count > 0 {
            shown.push_str(", ");
        }
        shown.push_str(&next);
        count += 1;
    }
    if cells.len() > count {
        shown.push_str(&format!(" and {} more", cells.len() - count));
    }
    shown
}

/// A header compared without case, spaces, `_`, `-` or `.`.
fn header_key(header: &str) -> String {
    header
        .chars()
        .filter(|c| !matches!(c, ' ' | '_' | '-' | '.'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// An E.164 number as its digits, to remember it in 8 bytes (15 digits fit).
fn digits(number: &E164) -> u64 {
    number
        .as_str()
        .bytes()
        .filter(u8::is_ascii_digit)
        .fold(0u64, |n, d| {
            n.wrapping_mul(10).wrapping_add(u64::from(d - b'0'))
        })
}

fn csv_error(error: csv::Error) -> ListError {
    let line = error.position().map_or(0, csv::Position::line);
    match error.into_kind() {
        csv::ErrorKind::Io(error) => ListError::Read(error),
        kind => ListError::Csv {
            line,
            message: format!("{kind:?}"),
        },
    }
}

#[cfg(test)]
mod tests;
