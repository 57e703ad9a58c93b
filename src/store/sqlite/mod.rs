//! SQLite, the embedded default: one file, one writer at a time (taken with `BEGIN
//! IMMEDIATE`), statements tuned so that a batch costs a handful of hand-overs to SQLite's
//! thread.

pub(crate) mod apply;
pub mod chain;
pub mod compliance;
pub mod evidence;
pub mod ingest;
pub mod leases;
pub(crate) mod mirror;
pub mod outbox;
pub mod read;
pub mod reconcile;
pub mod retention;
pub mod state;

/// Most rows one [`padded_values`] statement takes: as many as the outbox writer's batch,
/// so that a batch's deliveries are one statement; at most 15 parameters a row stay under
/// SQLite's 32,766. (A `VALUES` list is not held to the 500 terms of a compound `SELECT`.)
pub(crate) const PADDED_ROWS: usize = 512;

/// `{head} SELECT * FROM (VALUES ...) WHERE column1 IS NOT NULL`: a multi-row statement of
/// `rows` (at most [`PADDED_ROWS`]), each bound by `bind` with `columns` values of which
/// the first is never NULL, padded with rows of NULLs up to the next power of two. Its text
/// then depends on that power alone, so the connection's statement cache keeps the few
/// texts a writer ever sends (10 up to 512 rows) prepared, where a list of exactly as many
/// rows as the batch would be parsed and planned again for nearly every batch. The padding
/// rows are filtered out before anything is written: what the statement does is what the
/// plain `{head} VALUES ...` of `rows` would do, in the same order (`head` may not end in
/// an upsert clause; `tail`, after the `WHERE`, may).
pub(crate) fn padded_values<'a, T>(
    head: &str,
    columns: usize,
    rows: &'a [T],
    mut bind: impl FnMut(sqlx::query_builder::Separated<'_, 'a, sqlx::Sqlite, &'static str>, &'a T),
    tail: &str,
) -> sqlx::QueryBuilder<'a, sqlx::Sqlite> {
    debug_assert!(rows.len() <= PADDED_ROWS);
    let mut query = sqlx::QueryBuilder::new(head);
    query.push(" SELECT * FROM (VALUES ");
    for i in 0..rows.len().next_power_of_two() {
        if i > 0 {
            query.push(", ");
        }
        query.push("(");
        match rows.get(i) {
            Some(row) => bind(query.separated(", "), row),
            None => {
                let mut padding = query.separated(", ");
                for _ in 0..columns {
                    padding.push_bind(None::<i64>);
                }
            }
        }
        query.push(")");
    }
    query.push(") WHERE column1 IS NOT NULL");
    query.push(tail);
    query
}

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
