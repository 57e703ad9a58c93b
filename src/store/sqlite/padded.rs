//! Multi-row statements whose text depends on a power of two, not on the exact count of
//! their rows, so that the connection's statement cache keeps them prepared.

use crate::store::exec::Arg;

/// Most rows one [`padded_values`] statement takes: as many as the outbox writer's batch,
/// so that a batch's deliveries are one statement; at most 15 parameters a row stay under
/// SQLite's 32,766. (A `VALUES` list is not held to the 500 terms of a compound `SELECT`.)
pub(crate) const PADDED_ROWS: usize = 512;

/// `{head} SELECT * FROM (VALUES ...) WHERE column1 IS NOT NULL`: a multi-row statement of
/// `rows` (at most [`PADDED_ROWS`]), each bound by `bind` with `columns` values of which
/// the first is never NULL, padded with rows of NULLs (parameters left unbound) up to the
/// next power of two. Its text
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
    mut bind: impl FnMut(&mut Vec<Arg<'a>>, &'a T),
    tail: &str,
) -> (String, Vec<Arg<'a>>) {
    debug_assert!(rows.len() <= PADDED_ROWS);
    let padded = rows.len().next_power_of_two();
    // Sized once: a batch's text and values would otherwise grow by doubling, and each
    // large allocation makes the allocator sweep its freed small blocks first.
    let row_text = 4 + 3 * columns;
    let mut text = String::with_capacity(head.len() + tail.len() + 64 + padded * row_text);
    text.push_str(head);
    text.push_str(" SELECT * FROM (VALUES ");
    for i in 0..padded {
        if i > 0 {
            text.push_str(", ");
        }
        text.push('(');
        for c in 0..columns {
            text.push_str(if c == 0 { "?" } else { ", ?" });
        }
        text.push(')');
    }
    text.push_str(") WHERE column1 IS NOT NULL");
    text.push_str(tail);
    let mut values = Vec::with_capacity(rows.len() * columns);
    for row in rows {
        bind(&mut values, row);
    }
    (text, values)
}

#[cfg(test)]
mod tests {
    use crate::store::exec::{Exec as _, args};
    use sqlx::Connection as _;

    #[tokio::test]
    async fn a_padded_statement_writes_its_rows_alone_however_many_the_last_one_bound() {
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .expect("in-memory database");
        sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT NOT NULL UNIQUE, v)")
            .execute(&mut conn)
            .await
            .expect("table");
        // The same kept statement (4 rows' text) binds 4 rows, then 3: the fourth row of the
        // second is padding, never the first's fourth row again.
        for (batch, rows) in [(1, 4), (2, 3), (3, 1), (4, 4)] {
            let rows: Vec<(String, i64)> = (0..rows).map(|i| (format!("{batch}.{i}"), i)).collect();
            let (sql, values) = super::padded_values(
                "INSERT INTO t (k, v)",
                2,
                &rows,
                |row, (k, v)| row.extend(args![k, *v]),
                " ON CONFLICT (k) DO NOTHING",
            );
            let done = conn.run(&sql, &values).await.expect("insert");
            assert_eq!(done.rows_affected, rows.len() as u64);
        }
        let keys: Vec<String> = sqlx::query_scalar("SELECT k FROM t ORDER BY id")
            .fetch_all(&mut conn)
            .await
            .expect("rows");
        let expected = [
            "1.0", "1.1", "1.2", "1.3", "2.0", "2.1", "2.2", "3.0", "4.0", "4.1", "4.2", "4.3",
        ];
        assert_eq!(keys, expected);
    }
}
