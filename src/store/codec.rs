//! How values cross the storage boundary as text: JSON parameters and results, times as
//! stored, and the rowids of a multi-row insert.

use sqlx::SqliteConnection;

/// The rows of `sql`, a query of one `json_group_array` row, with its one parameter.
/// Many rows come back as one: each row of a result costs a hand-over between SQLite's
/// thread and the calling task, which for a thousand rows outweighs the query itself.
pub async fn json_rows<'q, T, P>(
    conn: &mut SqliteConnection,
    sql: &'q str,
    parameter: P,
) -> Result<Vec<T>, sqlx::Error>
where
    T: serde::de::DeserializeOwned,
    P: 'q + Send + sqlx::Encode<'q, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    json_row(conn, sqlx::query_scalar(sql).bind(parameter)).await
}

/// [`json_rows`] of a statement about one account: `?1` is `parameter`, `?2` the account.
pub async fn json_rows_in<'q, T, P>(
    conn: &mut SqliteConnection,
    sql: &'q str,
    parameter: P,
    account: &'q str,
) -> Result<Vec<T>, sqlx::Error>
where
    T: serde::de::DeserializeOwned,
    P: 'q + Send + sqlx::Encode<'q, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    json_row(conn, sqlx::query_scalar(sql).bind(parameter).bind(account)).await
}

/// The one JSON row of `query`, decoded.
async fn json_row<'q, T: serde::de::DeserializeOwned>(
    conn: &mut SqliteConnection,
    query: sqlx::query::QueryScalar<'q, sqlx::Sqlite, String, sqlx::sqlite::SqliteArguments<'q>>,
) -> Result<Vec<T>, sqlx::Error> {
    let text = query.fetch_one(&mut *conn).await?;
    json_decoded(&text)
}

/// JSON text the database built, decoded; a decode error of the query when it is not.
pub fn json_decoded<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// `value` as JSON text, for a `json_each(?)` parameter or a JSON column. A value that
/// cannot be encoded is an error: binding `[]` in its place would silently match nothing
/// (or mark nothing applied).
pub fn json_param<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, sqlx::Error> {
    serde_json::to_string(value).map_err(|e| sqlx::Error::Encode(Box::new(e)))
}

/// The rowids a multi-row `INSERT OR IGNORE` (or `... ON CONFLICT DO NOTHING`) of `rows`
/// rows gave, when it inserted every one: consecutive, in VALUES order, ending at the last
/// insert rowid (the caller holds the write lock, so no other insert interleaves). `None`
/// when some rows conflicted: skipped rows may burn AUTOINCREMENT values, so the caller
/// looks the new ones up.
pub fn consecutive_rowids(
    done: &sqlx::sqlite::SqliteQueryResult,
    rows: usize,
) -> Option<std::ops::RangeInclusive<i64>> {
    let last = done.last_insert_rowid();
    (rows > 0 && done.rows_affected() == rows as u64).then(|| last - rows as i64 + 1..=last)
}

/// A time as SQLite stores it and the ledger shows it: RFC 3339, UTC, milliseconds.
pub fn timestamp(at: chrono::DateTime<chrono::Utc>) -> String {
    crate::model::Timestamp(at).to_string()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::json_param;

    #[test]
    fn a_value_that_cannot_be_encoded_is_an_encode_error_not_an_empty_array() {
        // JSON object keys must be strings.
        let unencodable = BTreeMap::from([((1, 2), "pair key")]);
        let error = json_param(&unencodable).expect_err("tuple keys cannot be JSON keys");
        assert!(matches!(error, sqlx::Error::Encode(_)), "{error:?}");
        assert_eq!(
            json_param(&["a", "b"]).expect("strings encode"),
            r#"["a","b"]"#
        );
    }
}
