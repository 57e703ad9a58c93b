//! A PostgreSQL warehouse (`[[destination]]` of kind `postgres`): the table created when
//! missing (with a view of each number's current state beside it), and each batch one
//! `INSERT ... SELECT FROM UNNEST(...) ON CONFLICT (seq) DO NOTHING`, so a batch sent
//! again after a crash or a replay adds nothing a query sees twice. The connection URL is
//! the destination's secret (`url_file`), never shown: errors name what failed, not where.

use std::str::FromStr as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use secrecy::ExposeSecret as _;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::warehouse::{Link, Refusal, Table, Warehouse, fingerprint};
use super::{Pending, Stop};
use crate::model::text::bounded;
use crate::model::warehouse::{COLUMNS, Row};
use crate::settings::kinds::postgres::PostgresSettings;

/// PostgreSQL's type of a column of `kind`.
fn type_of(kind: crate::model::warehouse::ColumnType) -> &'static str {
    use crate::model::warehouse::ColumnType;
    match kind {
        ColumnType::Integer => "bigint",
        ColumnType::Text => "text",
        ColumnType::Boolean => "boolean",
        ColumnType::Time => "timestamp with time zone",
    }
}

/// Connections a warehouse holds: its sender writes one batch at a time.
const CONNECTIONS: u32 = 2;
/// How often the table's shape is compared with the rows' between batches: a column whose
/// type a data team changes (to `text`, which PostgreSQL casts a boolean into without a
/// word) or a `NOT NULL` column it adds is found within this, not at the next restart.
const SHAPE_CHECK: Duration = Duration::from_secs(10);

/// A PostgreSQL table.
pub struct Postgres {
    schema: Option<String>,
    table: String,
    /// The connections, and the URL's fingerprint they were made with.
    pool: Mutex<Option<([u8; 32], PgPool)>>,
    ready: AtomicBool,
    /// When the table's shape was last found to be the rows'.
    checked: Mutex<Option<std::time::Instant>>,
    /// The highest seq this process wrote into the table (0: none yet).
    written: std::sync::atomic::AtomicI64,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres")
            .field("table", &self.qualified(&self.table))
            .finish_non_exhaustive()
    }
}

impl Postgres {
    pub fn new(settings: &PostgresSettings) -> Self {
        Self {
            schema: settings.schema.clone(),
            table: settings.table.table().to_owned(),
            pool: Mutex::new(None),
            ready: AtomicBool::new(false),
            checked: Mutex::new(None),
            written: std::sync::atomic::AtomicI64::new(0),
        }
    }

    /// `name` quoted, in the configured schema.
    fn qualified(&self, name: &str) -> String {
        match &self.schema {
            Some(schema) => format!("\"{schema}\".\"{name}\""),
            None => format!("\"{name}\""),
        }
    }

    /// The connections for `link`'s URL, made anew when the URL changed.
    fn pool(&self, link: &Link<'_>) -> Result<PgPool, Stop> {
        let key = fingerprint(link.secret);
        let mut held = self
            .pool
            .lock()
            .map_err(|_| Stop::retry("the warehouse's connections are poisoned".to_owned()))?;
        if let Some((of, pool)) = held.as_ref()
            && *of == key
        {
            return Ok(pool.clone());
        }
        let options = PgConnectOptions::from_str(link.secret.expose_secret().trim())
            .map_err(|_| Stop::Lookup("url_file: not a PostgreSQL connection URL".to_owned()))?
            .application_name("outreach-sync");
        let pool = PgPoolOptions::new()
            .max_connections(CONNECTIONS)
            .acquire_timeout(link.timeout)
            .idle_timeout(Duration::from_secs(300))
            .connect_lazy_with(options);
        *held = Some((key, pool.clone()));
        Ok(pool)
    }

    fn drop_pool(&self) {
        if let Ok(mut held) = self.pool.lock() {
            held.take();
        }
    }

    /// The table and its view, created when missing; a table of other columns refused;
    /// what it holds.
    async fn check(&self, pool: &PgPool) -> Result<Table, Stop> {
        let table = self.qualified(&self.table);
        let existed: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
            .bind(&table)
            .fetch_one(pool)
            .await
            .map_err(|e| stop("looking for the table", e))?;
        self.make(pool).await?;
        self.noted_shape();
        if !existed {
            return Ok(Table::Made);
        }
        let last = self.last_seq(pool).await?;
        self.written.store(last.unwrap_or(0), Ordering::Release);
        Ok(last.map_or(Table::Empty, |last| Table::Holding(Some(last))))
    }

    fn noted_shape(&self) {
        if let Ok(mut checked) = self.checked.lock() {
            *checked = Some(std::time::Instant::now());
        }
    }

    /// Before a batch: the table still holds what was written to it (its last seq, an
    /// index lookup), and its shape is compared again when [`SHAPE_CHECK`] has passed
    /// since the last time; a table gone or behind is made again and filled by the next
    /// check.
    async fn shape_still_holds(&self, pool: &PgPool) -> Result<(), Stop> {
        let due = self
            .checked
            .lock()
            .map(|c| c.is_none_or(|at| at.elapsed() >= SHAPE_CHECK))
            .unwrap_or(true);
        if due {
            self.compared(pool).await?;
            self.noted_shape();
        }
        let last = match self.last_seq(pool).await {
            Err(Stop::Lookup(_)) if !self.exists(pool).await? => {
                return Err(self.gone());
            }
            last => last?,
        };
        let written = self.written.load(Ordering::Acquire);
        if last.unwrap_or(0) < written {
            // Truncated (or made again) under the daemon: the next check fills it again.
            self.ready.store(false, Ordering::Release);
            return Err(Stop::retry(format!(
                "table {} holds less than was written to it (rows through seq {written}): filled again from the first entry",
                self.table
            )));
        }
        Ok(())
    }

    /// The table is gone: the next check makes it again (and the sender fills it).
    fn gone(&self) -> Stop {
        self.ready.store(false, Ordering::Release);
        Stop::retry(format!(
            "table {} is gone: made again and filled from the first entry",
            self.table
        ))
    }

    async fn last_seq(&self, pool: &PgPool) -> Result<Option<i64>, Stop> {
        let table = self.qualified(&self.table);
        sqlx::query_scalar(&format!("SELECT MAX(\"seq\") FROM {table}"))
            .fetch_one(pool)
            .await
            .map_err(|e| stop("reading the table's last seq", e))
    }

    /// [`Postgres::compare`], a table found gone made again (and filled again) by the next
    /// check.
    async fn compared(&self, pool: &PgPool) -> Result<(), Stop> {
        match self.compare(pool).await {
            Err(Stop::Lookup(_)) if !self.exists(pool).await? => Err(self.gone()),
            other => other,
        }
    }

    async fn exists(&self, pool: &PgPool) -> Result<bool, Stop> {
        sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
            .bind(self.qualified(&self.table))
            .fetch_one(pool)
            .await
            .map_err(|e| stop("looking for the table", e))
    }

    /// The table and its view, created when missing; a table of other columns refused.
    async fn make(&self, pool: &PgPool) -> Result<(), Stop> {
        let columns: Vec<String> = COLUMNS
            .iter()
            .map(|c| {
                let null = if c.required { " NOT NULL" } else { "" };
                let key = if c.name == "seq" { " PRIMARY KEY" } else { "" };
                format!("\"{}\" {}{null}{key}", c.name, type_of(c.kind))
            })
            .collect();
        let table = self.qualified(&self.table);
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {table} ({})",
            columns.join(", ")
        );
        sqlx::query(&create)
            .execute(pool)
            .await
            .map_err(|e| stop("creating the table", e))?;
        self.compare(pool).await?;
        let view = format!(
            "CREATE OR REPLACE VIEW {} AS SELECT DISTINCT ON (\"accountId\", \"organizationId\", \"phoneNumber\") * \
             FROM {table} ORDER BY \"accountId\", \"organizationId\", \"phoneNumber\", \"occurredAt\" DESC, \"optedOut\" DESC, \"seq\" DESC",
            self.qualified(&format!("{}_current", self.table))
        );
        sqlx::query(&view)
            .execute(pool)
            .await
            .map_err(|e| stop("creating the view", e))?;
        Ok(())
    }

    /// Refuses a table whose columns are not the rows'.
    async fn compare(&self, pool: &PgPool) -> Result<(), Stop> {
        let found: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
            "SELECT column_name::text, data_type::text, is_nullable::text, column_default::text
                 FROM information_schema.columns
                 WHERE table_schema = COALESCE($1, current_schema()) AND table_name = $2",
        )
        .bind(&self.schema)
        .bind(&self.table)
        .fetch_all(pool)
        .await
        .map_err(|e| stop("reading the table's columns", e))?;
        let differs = |what: String| Err(Stop::Lookup(format!("table {}: {what}", self.table)));
        for column in COLUMNS {
            let Some((_, kind, nullable, _)) = found.iter().find(|f| f.0 == column.name) else {
                return differs(format!("no column `{}`", column.name));
            };
            if kind != type_of(column.kind) {
                return differs(format!(
                    "column `{}` is {kind}, the rows' {}",
                    column.name,
                    type_of(column.kind)
                ));
            }
            if nullable == "NO" && !column.required {
                return differs(format!(
                    "column `{}` is NOT NULL, and rows may leave it empty",
                    column.name
                ));
            }
        }
        if let Some((name, ..)) = found.iter().find(|(name, _, nullable, default)| {
            nullable == "NO" && default.is_none() && !COLUMNS.iter().any(|c| c.name == name)
        }) {
            return differs(format!("column `{name}` is NOT NULL, and no row fills it"));
        }
        Ok(())
    }

    /// Inserts `rows` in one statement; rows it already has are passed over.
    async fn insert(&self, pool: &PgPool, rows: &[Row]) -> Result<(), sqlx::Error> {
        insert_rows(pool, &self.qualified(&self.table), rows).await
    }

    /// Writes `rows`; when the batch holds a row the table will not take, each row alone,
    /// so that one row refused never holds the others back.
    async fn write_rows(&self, link: Link<'_>, rows: &[Row]) -> Result<Vec<Refusal>, Stop> {
        let pool = self.pool(&link)?;
        self.shape_still_holds(&pool).await?;
        match self.insert(&pool, rows).await {
            Ok(()) => {
                let last = rows.iter().map(|r| r.seq).max().unwrap_or(0);
                self.written.fetch_max(last, Ordering::AcqRel);
                return Ok(Vec::new());
            }
            Err(error) if row_error(&error).is_none() => {
                return Err(self.failed("inserting rows", error));
            }
            // A batch refused may be the table's doing (a column changed under it): then it
            // stops with the table's error, and no row is refused for it.
            Err(_) => self.compared(&pool).await?,
        }
        let mut refused = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            match self.insert(&pool, std::slice::from_ref(row)).await {
                Ok(()) => {
                    self.written.fetch_max(row.seq, Ordering::AcqRel);
                }
                Err(error) => match row_error(&error) {
                    Some(reason) => refused.push((i, reason)),
                    None => return Err(self.failed("inserting rows", error)),
                },
            }
        }
        Ok(refused)
    }

    /// `error` as a stop; a table gone (42P01) is made again before the next batch.
    fn failed(&self, what: &str, error: sqlx::Error) -> Stop {
        let gone =
            matches!(&error, sqlx::Error::Database(db) if db.code().as_deref() == Some("42P01"));
        let stop = stop(what, error);
        if gone {
            self.ready.store(false, Ordering::Release);
            return Stop::retry(stop.to_string());
        }
        stop
    }
}

impl Warehouse for Postgres {
    fn ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    fn forget(&self) {
        self.ready.store(false, Ordering::Release);
        self.drop_pool();
    }

    fn prepare<'a>(&'a self, link: Link<'a>) -> Pending<'a, Result<Table, Stop>> {
        Box::pin(async move {
            let pool = self.pool(&link)?;
            let table = self.check(&pool).await?;
            self.ready.store(true, Ordering::Release);
            Ok(table)
        })
    }

    fn write<'a>(
        &'a self,
        link: Link<'a>,
        rows: &'a [Row],
    ) -> Pending<'a, Result<Vec<Refusal>, Stop>> {
        Box::pin(self.write_rows(link, rows))
    }
}

/// Inserts `rows` into `table` (its name as SQL: quoted, in a schema or not) in one
/// statement, `INSERT ... SELECT * FROM UNNEST(...) ON CONFLICT ("seq") DO NOTHING`: the one
/// statement a PostgreSQL warehouse is written with (the warehouses bench's floor too).
pub async fn insert_rows(pool: &PgPool, table: &str, rows: &[Row]) -> Result<(), sqlx::Error> {
    let names: Vec<String> = COLUMNS.iter().map(|c| format!("\"{}\"", c.name)).collect();
    let arrays: Vec<String> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| format!("${}::{}[]", i + 1, type_of(c.kind)))
        .collect();
    let insert = format!(
        "INSERT INTO {} ({}) SELECT * FROM UNNEST({}) ON CONFLICT (\"seq\") DO NOTHING",
        table,
        names.join(", "),
        arrays.join(", ")
    );
    let text = |f: fn(&Row) -> &str| rows.iter().map(|r| f(r).to_owned()).collect::<Vec<_>>();
    let time =
        |f: fn(&Row) -> chrono::DateTime<chrono::Utc>| rows.iter().map(f).collect::<Vec<_>>();
    sqlx::query(&insert)
        .bind(rows.iter().map(|r| r.seq).collect::<Vec<_>>())
        .bind(text(|r| r.account_id.as_str()))
        .bind(text(|r| &r.organization_id))
        .bind(rows.iter().map(|r| r.lead_id.clone()).collect::<Vec<_>>())
        .bind(text(|r| &r.phone_number))
        .bind(rows.iter().map(|r| r.opted_out).collect::<Vec<_>>())
        .bind(text(|r| r.source.as_str()))
        .bind(rows.iter().map(|r| r.actor.clone()).collect::<Vec<_>>())
        .bind(time(|r| r.occurred_at.0))
        .bind(time(|r| r.recorded_at.0))
        .bind(
            rows.iter()
                .map(|r| r.entry_hash.clone())
                .collect::<Vec<_>>(),
        )
        .execute(pool)
        .await?;
    Ok(())
}

/// The reason a row is refused, when `error` is the row's (a data exception or a
/// constraint the table adds), not the warehouse's.
fn row_error(error: &sqlx::Error) -> Option<String> {
    let sqlx::Error::Database(db) = error else {
        return None;
    };
    let code = db.code()?;
    (code.starts_with("22") || code.starts_with("23")).then(|| {
        bounded(
            &format!("{code}: {}", db.message()),
            super::http::MAX_ERROR_BODY,
        )
    })
}

/// `error` of `what` as a stop: the credentials' (28xxx, 42501), what is missing (3D000,
/// 3F000, 42P01, 42P10, 42703), else tried again.
fn stop(what: &str, error: sqlx::Error) -> Stop {
    let text = match &error {
        sqlx::Error::Database(db) => {
            let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
            let text = bounded(
                &format!("{what}: {code}: {}", db.message()),
                super::http::MAX_ERROR_BODY,
            );
            return match code.as_str() {
                c if c.starts_with("28") || c == "42501" => Stop::Credentials(text),
                "3D000" | "3F000" | "42P01" | "42P10" | "42703" | "42804" | "42P16" => {
                    Stop::Lookup(text)
                }
                _ => Stop::retry(text),
            };
        }
        sqlx::Error::PoolTimedOut => format!("{what}: no connection within the timeout"),
        sqlx::Error::Io(io) => format!("{what}: no answer: {io}"),
        sqlx::Error::Tls(_) => format!("{what}: TLS failed"),
        _ => format!("{what}: {error}"),
    };
    Stop::retry(bounded(&text, super::http::MAX_ERROR_BODY))
}
