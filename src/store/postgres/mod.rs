//! PostgreSQL, for replicas: any number of processes on one database. Statements take
//! whole batches as arrays (`unnest`), conflicts are settled by `ON CONFLICT`, workers
//! claim rows with `FOR UPDATE SKIP LOCKED`, and writers of the same numbers queue on
//! transaction-scoped advisory locks.

pub(crate) mod apply;
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

/// A list bound as one parameter: an array, read with `ANY` or `unnest`.
pub(crate) fn list<T>(items: &[T]) -> Result<&[T], crate::store::Error> {
    Ok(items)
}

/// A tracked message whose status is final, and one whose status is not, as the partial
/// indexes on `messages` are defined.
pub(crate) const TERMINAL: &str = "terminal";
pub(crate) const NOT_TERMINAL: &str = "NOT terminal";

/// What follows a subquery that takes rows for this transaction: their row locks, passing
/// over the rows another replica holds.
pub(crate) const SKIP_LOCKED: &str = " FOR UPDATE SKIP LOCKED";

/// A row's `attempts` (an `integer`), selected as a 64-bit number.
pub(crate) const ATTEMPTS: &str = "attempts::BIGINT AS attempts";

/// The writes of destinations (a JSON array of names, `$2`) of entries of numbers (a JSON
/// array, `$1`): each entry's number, what it said, and when the destination was last at
/// it (answered, or about to send: in flight). Led by the ledger's index of numbers.
pub(crate) const WRITES_OF_NUMBERS: &str = "SELECT l.phone_number, l.opted_out, o.at
     FROM ledger l JOIN destination_outcomes o ON o.seq = l.seq
     WHERE l.phone_number IN (SELECT jsonb_array_elements_text($1::jsonb))
       AND o.destination IN (SELECT jsonb_array_elements_text($2::jsonb))
       AND (o.outcome IS NULL OR o.outcome IN ('sent', 'already', 'unconfirmed'))";

/// Notes the records of a source (`$1`) in a JSON array of keys (`$2`) recorded at `$3`,
/// giving back those it had not noted before.
pub(crate) const CLAIM_SOURCE_RECORDS: &str = "INSERT INTO source_records (source, record, at)
     SELECT $1, k, $3 FROM jsonb_array_elements_text($2::jsonb) AS k
     ON CONFLICT (source, record) DO NOTHING RETURNING record";

/// [`WRITES_OF_NUMBERS`] run: each row's number, what it said, and when.
pub(crate) async fn writes_of_numbers(
    conn: &mut sqlx::PgConnection,
    phones: &str,
    destinations: &str,
) -> Result<Vec<(String, bool, crate::model::Timestamp)>, crate::store::Error> {
    Ok(sqlx::query_as(WRITES_OF_NUMBERS)
        .bind(phones)
        .bind(destinations)
        .fetch_all(conn)
        .await?)
}
