//! How a statement reaches its backend: [`Pool`], [`Tx`] and [`Connection`] each lend
//! their backend's executor as a [`Backend`], and [`on_backend!`] runs one body on
//! whichever it is.
//!
//! A statement is written once, in the concern's file (`store/<concern>.rs`), as the body
//! of `on_backend!`: the body is compiled once per backend, each time with the executor of
//! that backend, so the same text binds and decodes with either driver. Where the dialects
//! differ, the body names the part through the backend's module (`on_backend!(self,
//! |pool, backend| ...)` binds `backend` to `store::sqlite` or `store::postgres`), and each
//! backend's file holds its own part under the same name.

use super::{Connection, Pool, Tx};

/// The executor of one backend or the other.
pub(crate) enum Backend<S, P> {
    Sqlite(S),
    Postgres(P),
}

/// Runs `body` with `$db` bound to the executor of `$on`'s backend (a [`Pool`]'s pool, a
/// [`Tx`]'s or a [`Connection`]'s connection) and, in the second form, `$dialect` to that
/// backend's module (`store::sqlite` or `store::postgres`) for the parts its dialect
/// writes its own way.
macro_rules! on_backend {
    ($on:expr, |$db:ident| $body:expr) => {
        match $on.backend() {
            $crate::store::backend::Backend::Sqlite($db) => $body,
            $crate::store::backend::Backend::Postgres($db) => $body,
        }
    };
    ($on:expr, |$db:ident, $dialect:ident| $body:expr) => {
        match $on.backend() {
            $crate::store::backend::Backend::Sqlite($db) => {
                use $crate::store::sqlite as $dialect;
                $body
            }
            $crate::store::backend::Backend::Postgres($db) => {
                use $crate::store::postgres as $dialect;
                $body
            }
        }
    };
}

pub(crate) use on_backend;

impl Pool {
    /// The pool of the backend, for [`on_backend!`].
    pub(crate) fn backend(&self) -> Backend<&sqlx::SqlitePool, &sqlx::PgPool> {
        match self {
            Pool::Sqlite(pool) => Backend::Sqlite(pool),
            Pool::Postgres(pool) => Backend::Postgres(pool),
        }
    }
}

impl Tx<'_> {
    /// The transaction's connection, for [`on_backend!`].
    pub(crate) fn backend(
        &mut self,
    ) -> Backend<&mut sqlx::SqliteConnection, &mut sqlx::PgConnection> {
        match self {
            Tx::Sqlite(tx) => Backend::Sqlite(&mut ***tx),
            Tx::Postgres(tx) => Backend::Postgres(&mut **tx),
        }
    }
}

impl Connection {
    /// The connection, for [`on_backend!`].
    pub(crate) fn backend(
        &mut self,
    ) -> Backend<&mut sqlx::SqliteConnection, &mut sqlx::PgConnection> {
        match self {
            Connection::Sqlite(writer) => Backend::Sqlite(&mut **writer),
            Connection::Postgres(conn) => Backend::Postgres(conn),
        }
    }
}

/// What lends its backend's connection to a statement: a [`Tx`], a [`Connection`], a
/// backend's own connection or the ingest writer's ([`super::sqlite::Embedded`]), so that a
/// statement all of them run is written once for all ([`super::ApplyTx`],
/// [`super::IngestStore`], [`super::SourceTx`]). Its SQLite side runs statements through
/// [`Exec`](super::exec::Exec), whichever connection that is.
pub(crate) trait Lend {
    type Sqlite: super::exec::Exec;
    fn backend(&mut self) -> Backend<&mut Self::Sqlite, &mut sqlx::PgConnection>;
}

impl Lend for Tx<'_> {
    type Sqlite = sqlx::SqliteConnection;
    fn backend(&mut self) -> Backend<&mut sqlx::SqliteConnection, &mut sqlx::PgConnection> {
        Tx::backend(self)
    }
}

impl Lend for sqlx::SqliteConnection {
    type Sqlite = sqlx::SqliteConnection;
    fn backend(&mut self) -> Backend<&mut sqlx::SqliteConnection, &mut sqlx::PgConnection> {
        Backend::Sqlite(self)
    }
}

impl Lend for sqlx::PgConnection {
    type Sqlite = sqlx::SqliteConnection;
    fn backend(&mut self) -> Backend<&mut sqlx::SqliteConnection, &mut sqlx::PgConnection> {
        Backend::Postgres(self)
    }
}

impl Lend for Connection {
    type Sqlite = sqlx::SqliteConnection;
    fn backend(&mut self) -> Backend<&mut sqlx::SqliteConnection, &mut sqlx::PgConnection> {
        Connection::backend(self)
    }
}
