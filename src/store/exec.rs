//! One way to run a statement whatever runs it: sqlx's connections (SQLite through its
//! connection's thread, PostgreSQL over the wire) and the ingest writer's own SQLite
//! connection ([`super::sqlite::Embedded`], on the writer's thread, no hand-over). The
//! statements of a write transaction ([`super::ApplyTx`], [`super::IngestStore`],
//! [`super::SourceTx`]) are written once against [`Exec`], so each runs on either.
//!
//! Values are bound as [`Arg`]s; SQLite's reads give back one text (a JSON document the
//! statement builds: `json_group_array(json_array(...))`), or a text or an integer a row.

use crate::model::Timestamp;
use crate::store::Error;

/// A value bound to a statement's parameter. The `Option`s bind NULL of their type (which
/// PostgreSQL needs to know; SQLite does not mind).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Int(Option<i64>),
    Bool(bool),
    Text(Option<&'a str>),
    Blob(&'a [u8]),
    Time(Option<Timestamp>),
}

/// [`Arg`]s from values: `args![seq, name, at]`.
macro_rules! args {
    ($($value:expr),* $(,)?) => {
        [$($crate::store::exec::Arg::from($value)),*]
    };
}
pub(crate) use args;

impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}

impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}

impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(Some(v))
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Self {
        Arg::Text(Some(v))
    }
}

impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Arg::Text(v)
    }
}

impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Arg::Text(v.as_deref())
    }
}

impl<'a> From<&'a crate::model::AccountId> for Arg<'a> {
    fn from(v: &'a crate::model::AccountId) -> Self {
        Arg::Text(Some(v.as_str()))
    }
}

impl<'a> From<&'a [u8]> for Arg<'a> {
    fn from(v: &'a [u8]) -> Self {
        Arg::Blob(v)
    }
}

impl From<Timestamp> for Arg<'_> {
    fn from(v: Timestamp) -> Self {
        Arg::Time(Some(v))
    }
}

impl From<Option<Timestamp>> for Arg<'_> {
    fn from(v: Option<Timestamp>) -> Self {
        Arg::Time(v)
    }
}

/// What a statement that returns no rows did.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    pub rows_affected: u64,
    /// SQLite's last inserted rowid on the connection (0 on PostgreSQL).
    pub last_insert_rowid: i64,
}

impl Done {
    /// The rowids a multi-row `INSERT OR IGNORE` (or `... ON CONFLICT DO NOTHING`) of `rows`
    /// rows gave, when it inserted every one: consecutive, in VALUES order, ending at the
    /// last insert rowid (the caller holds the write lock, so no other insert interleaves).
    /// `None` when some rows conflicted: skipped rows may burn AUTOINCREMENT values, so the
    /// caller looks the new ones up.
    pub fn consecutive_rowids(&self, rows: usize) -> Option<std::ops::RangeInclusive<i64>> {
        let last = self.last_insert_rowid;
        (rows > 0 && self.rows_affected == rows as u64).then(|| last - rows as i64 + 1..=last)
    }
}

/// Runs statements. Every method runs one statement (its text kept prepared by the
/// connection) with `args` bound to its parameters in order (`$N` and `?N` take the
/// `N`th).
pub(crate) trait Exec: Send {
    /// Runs a statement that returns no rows.
    fn run(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Done, Error>> + Send;

    /// The first column of the first row as an integer; `None` without a row.
    fn int(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Option<i64>, Error>> + Send;

    /// The first column of every row, as text (NULLs left out).
    fn texts(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> impl Future<Output = Result<Vec<String>, Error>> + Send;
}

/// A statement's one row of one column, a JSON document (SQLite's reads), decoded.
pub(crate) async fn json<T, E>(conn: &mut E, sql: &str, args: &[Arg<'_>]) -> Result<T, Error>
where
    T: serde::de::DeserializeOwned,
    E: Exec + ?Sized,
{
    let text = conn.texts(sql, args).await?;
    let text = text.first().map_or("null", String::as_str);
    Ok(super::codec::json_decoded(text)?)
}

/// Binds `args` to a sqlx query of either backend.
macro_rules! bind_all {
    ($query:expr, $args:expr) => {{
        let mut query = $query;
        for arg in $args {
            query = match *arg {
                Arg::Int(v) => query.bind(v),
                Arg::Bool(v) => query.bind(v),
                Arg::Text(v) => query.bind(v),
                Arg::Blob(v) => query.bind(v),
                Arg::Time(v) => query.bind(v),
            };
        }
        query
    }};
}

/// sqlx's connections, each statement prepared and kept by sqlx.
macro_rules! exec_for_sqlx {
    ($connection:ty, $rowid:expr) => {
        impl Exec for $connection {
            async fn run(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Done, Error> {
                let done = bind_all!(sqlx::query(sql), args)
                    .execute(&mut *self)
                    .await?;
                Ok(Done {
                    rows_affected: done.rows_affected(),
                    last_insert_rowid: $rowid(&done),
                })
            }

            async fn int(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Option<i64>, Error> {
                Ok(bind_all!(sqlx::query_scalar(sql), args)
                    .fetch_optional(&mut *self)
                    .await?)
            }

            async fn texts(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<Vec<String>, Error> {
                let rows: Vec<Option<String>> = bind_all!(sqlx::query_scalar(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                Ok(rows.into_iter().flatten().collect())
            }
        }
    };
}

exec_for_sqlx!(
    sqlx::SqliteConnection,
    |done: &sqlx::sqlite::SqliteQueryResult| done.last_insert_rowid()
);
exec_for_sqlx!(sqlx::PgConnection, |_: &sqlx::postgres::PgQueryResult| 0);
