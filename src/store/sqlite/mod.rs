//! SQLite, the embedded default: one file, one writer at a time (taken with `BEGIN
//! IMMEDIATE`), statements tuned so that a batch costs a handful of hand-overs to SQLite's
//! thread.

pub(crate) mod apply;
pub mod chain;
pub mod compliance;
/// The ingest writer's own connection, on its thread.
mod embedded;
pub use embedded::{Embedded, EmbeddedTx, Options as EmbeddedOptions};
pub mod evidence;
pub mod ingest;
pub mod leases;
pub(crate) mod mirror;
pub mod outbox;
/// Multi-row statements kept prepared whatever their count of rows.
mod padded;
pub mod read;
pub mod reconcile;
pub mod retention;
pub mod state;

pub(crate) use padded::{PADDED_ROWS, padded_values};

/// A list bound as one parameter: a JSON array, read with `json_each`.
pub(crate) fn list<T: serde::Serialize>(items: &[T]) -> Result<String, crate::store::Error> {
    Ok(super::codec::json_param(items)?)
}

/// A tracked message whose status is final, and one whose status is not, as the partial
/// indexes on `messages` are defined.
pub(crate) const TERMINAL: &str = "terminal = 1";
pub(crate) const NOT_TERMINAL: &str = "terminal = 0";

/// What follows a subquery that takes rows for this transaction: nothing, the write lock
/// keeps every other writer out.
pub(crate) const SKIP_LOCKED: &str = "";

/// A row's `attempts`, selected as a 64-bit number.
pub(crate) const ATTEMPTS: &str = "attempts";

/// The writes of destinations (a JSON array of names, `$2`) of entries of numbers (a JSON
/// array, `$1`): each entry's number, what it said, and when the destination was last at
/// it (answered, or about to send: in flight). Led by the ledger's index of numbers.
pub(crate) const WRITES_OF_NUMBERS: &str = "SELECT l.phone_number, l.opted_out, o.at
     FROM ledger l JOIN destination_outcomes o ON o.seq = l.seq
     WHERE l.phone_number IN (SELECT value FROM json_each($1))
       AND o.destination IN (SELECT value FROM json_each($2))
       AND (o.outcome IS NULL OR o.outcome IN ('sent', 'already', 'unconfirmed'))";

/// Notes the records of a source (`$1`) in a JSON array of keys (`$2`) recorded at `$3`,
/// giving back those it had not noted before.
pub(crate) const CLAIM_SOURCE_RECORDS: &str = "INSERT INTO source_records (source, record, at)
     SELECT $1, value, $3 FROM json_each($2) WHERE true
     ON CONFLICT (source, record) DO NOTHING RETURNING record";

/// [`WRITES_OF_NUMBERS`] run: each row's number, what it said, and when.
pub(crate) async fn writes_of_numbers(
    conn: &mut impl crate::store::exec::Exec,
    phones: &str,
    destinations: &str,
) -> Result<Vec<(String, bool, crate::model::Timestamp)>, crate::store::Error> {
    crate::store::exec::json(
        conn,
        &format!(
            "SELECT json_group_array(json_array(phone_number,
                 json(iif(opted_out, 'true', 'false')), at))
             FROM ({WRITES_OF_NUMBERS})"
        ),
        &crate::store::exec::args![phones, destinations],
    )
    .await
}
