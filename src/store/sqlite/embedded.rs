//! The ingest writer's own SQLite connection, run on the writer's thread: a batch's
//! statements (the outbox INSERT, the apply path's reads and writes, the commit) each a
//! call into SQLite from the thread that asks, where sqlx's connection hands every
//! statement to a thread of its own and waits for the answer (two thread wake-ups a
//! statement, eight statements a batch). Statements are the same texts as on sqlx's
//! connections, run through [`Exec`], and kept prepared.

use std::path::Path;

use rusqlite::types::{ToSqlOutput, Value, ValueRef};

use crate::store::Error;
use crate::store::exec::{Arg, Done, Exec};

/// Prepared statements kept: the apply path's texts, with the padded INSERTs' ten sizes
/// each.
const STATEMENTS_KEPT: usize = 256;

/// A SQLite connection of the thread that owns it.
pub struct Embedded {
    conn: rusqlite::Connection,
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedded").finish_non_exhaustive()
    }
}

/// How the connection is opened: as the pool's (`store::open::connect_options`).
pub struct Options<'a> {
    pub path: &'a Path,
    pub full_sync: bool,
    pub busy_timeout: std::time::Duration,
    pub cache_kib: u32,
}

impl Embedded {
    /// Opens the database file, already made and migrated by the pool.
    pub fn open(options: &Options<'_>) -> Result<Self, Error> {
        use rusqlite::OpenFlags;
        let conn = rusqlite::Connection::open_with_flags(
            options.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(options.busy_timeout)?;
        let synchronous = if options.full_sync { "FULL" } else { "NORMAL" };
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous};
             PRAGMA foreign_keys = ON; PRAGMA cache_size = -{};",
            options.cache_kib
        ))?;
        conn.set_prepared_statement_cache_capacity(STATEMENTS_KEPT);
        Ok(Self { conn })
    }

    /// Begins a transaction with the database's write lock (`BEGIN IMMEDIATE`); it rolls
    /// back unless committed.
    pub fn begin_write(&mut self) -> Result<EmbeddedTx<'_>, Error> {
        self.control(super::ingest::BEGIN)?;
        Ok(EmbeddedTx {
            conn: self,
            open: true,
        })
    }

    /// Runs `BEGIN IMMEDIATE`, `COMMIT` or `ROLLBACK`, kept prepared like the batch's
    /// other statements (parsed anew each time, they cost more than the commit's own work).
    fn control(&self, sql: &str) -> Result<(), Error> {
        self.conn.prepare_cached(sql)?.raw_execute()?;
        Ok(())
    }

    fn statement(
        &self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<rusqlite::CachedStatement<'_>, Error> {
        let mut statement = self.conn.prepare_cached(sql)?;
        let mut anonymous = 0;
        for index in 1..=statement.parameter_count() {
            // `$N` and `?N` take the Nth value, as sqlx binds them; a plain `?` the next.
            let numbered = statement
                .parameter_name(index)
                .and_then(|name| name.get(1..))
                .and_then(|n| n.parse::<usize>().ok());
            let at = match numbered {
                Some(n) => n,
                None => {
                    anonymous += 1;
                    anonymous
                }
            };
            if let Some(arg) = at.checked_sub(1).and_then(|i| args.get(i)) {
                statement.raw_bind_parameter(index, arg)?;
            }
        }
        Ok(statement)
    }
}

impl rusqlite::ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Arg::Int(Some(v)) => ToSqlOutput::Borrowed(ValueRef::Integer(v)),
            Arg::Bool(v) => ToSqlOutput::Borrowed(ValueRef::Integer(i64::from(v))),
            Arg::Text(Some(v)) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
            Arg::Blob(v) => ToSqlOutput::Borrowed(ValueRef::Blob(v)),
            Arg::Time(Some(v)) => ToSqlOutput::Owned(Value::Text(v.text())),
            Arg::Int(None) | Arg::Text(None) | Arg::Time(None) => {
                ToSqlOutput::Borrowed(ValueRef::Null)
            }
        })
    }
}

impl Exec for Embedded {
    async fn run(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Done, Error> {
        let changed = self.statement(sql, args)?.raw_execute()?;
        Ok(Done {
            rows_affected: changed as u64,
            last_insert_rowid: self.conn.last_insert_rowid(),
        })
    }

    async fn int(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Option<i64>, Error> {
        let mut statement = self.statement(sql, args)?;
        let mut rows = statement.raw_query();
        Ok(match rows.next()? {
            Some(row) => row.get(0)?,
            None => None,
        })
    }

    async fn texts(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<String>, Error> {
        let mut statement = self.statement(sql, args)?;
        let mut rows = statement.raw_query();
        let mut texts = Vec::new();
        while let Some(row) = rows.next()? {
            if let Some(text) = row.get::<_, Option<String>>(0)? {
                texts.push(text);
            }
        }
        Ok(texts)
    }
}

/// A write transaction on an [`Embedded`] connection; rolled back when dropped uncommitted.
pub struct EmbeddedTx<'c> {
    conn: &'c mut Embedded,
    open: bool,
}

impl EmbeddedTx<'_> {
    /// The connection, for the transaction's statements.
    pub fn connection(&mut self) -> &mut Embedded {
        self.conn
    }

    pub fn commit(mut self) -> Result<(), Error> {
        self.open = false;
        self.conn.control("COMMIT")
    }

    pub fn rollback(mut self) -> Result<(), Error> {
        self.open = false;
        self.conn.control("ROLLBACK")
    }
}

impl Drop for EmbeddedTx<'_> {
    fn drop(&mut self) {
        if self.open {
            // A failed rollback leaves the transaction to the connection's close, which the
            // writer does after any failure.
            let _ = self.conn.control("ROLLBACK");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Embedded, Options};
    use crate::model::Timestamp;
    use crate::store::exec::{Exec, args};
    use sqlx::Connection as _;

    /// The same statements through sqlx's connection and the embedded one, each time with
    /// numbered parameters out of order, a plain `?`, NULLs and a time.
    #[tokio::test]
    async fn a_statement_writes_and_reads_the_same_through_either_connection() {
        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("exec.db");
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let mut sqlx_conn = sqlx::SqliteConnection::connect(&url).await.expect("sqlx");
        sqlx_conn
            .run(
                "CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER, b BLOB, at TEXT, f INTEGER)",
                &[],
            )
            .await
            .expect("table");
        let mut embedded = Embedded::open(&Options {
            path: &path,
            full_sync: true,
            busy_timeout: std::time::Duration::from_secs(5),
            cache_kib: 1024,
        })
        .expect("embedded");
        let at = Timestamp(
            chrono::DateTime::parse_from_rfc3339("2026-11-28T10:00:00.123Z")
                .expect("a time")
                .to_utc(),
        );
        let insert = "INSERT INTO t (n, k, b, at, f) VALUES ($2, $1, $3, $4, $5)";
        let bytes: &[u8] = b"\x00\xff";
        for (conn, key) in [(0, "sqlx"), (1, "embedded")] {
            let values = args![key, Some(7_i64), bytes, Some(at), true];
            let done = if conn == 0 {
                sqlx_conn.run(insert, &values).await
            } else {
                embedded.run(insert, &values).await
            }
            .expect("insert");
            assert_eq!(done.rows_affected, 1);
        }
        // A statement kept prepared forgets its last values: the second run binds fewer,
        // and what it leaves unbound is NULL.
        let update = "UPDATE t SET n = ?, at = ? WHERE k = ?3";
        embedded
            .run(update, &args![Some(9_i64), Some(at), "embedded"])
            .await
            .expect("update");
        embedded
            .run(update, &args![None::<i64>])
            .await
            .expect("an update of no row");
        let read = "SELECT json_group_array(json_array(k, n, hex(b), at, f)) FROM
                        (SELECT * FROM t ORDER BY k)";
        let through_sqlx = sqlx_conn.texts(read, &[]).await.expect("read");
        let through_embedded = embedded.texts(read, &[]).await.expect("read");
        assert_eq!(through_sqlx, through_embedded);
        assert_eq!(
            through_embedded,
            [
                r#"[["embedded",9,"00FF","2026-11-28T10:00:00.123Z",1],["sqlx",7,"00FF","2026-11-28T10:00:00.123Z",1]]"#
            ]
        );
        assert_eq!(
            embedded
                .int("SELECT n FROM t WHERE k = $1", &args!["sqlx"])
                .await
                .expect("int"),
            Some(7)
        );
        assert_eq!(
            embedded
                .int("SELECT n FROM t WHERE k = $1", &args!["none"])
                .await
                .expect("int"),
            None
        );
    }
}
