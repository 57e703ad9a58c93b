//! What a warehouse is to the sender: a table written a batch of rows a request, each row a
//! ledger entry (`model::warehouse::Row`), each answered `sent` or `refused` with the
//! warehouse's reason. BigQuery ([`super::bigquery`]) and PostgreSQL ([`super::postgres`])
//! implement it; the sender's cursor, order, backoff, rate and outcomes are the same as for
//! every destination.

use std::time::Duration;

use secrecy::SecretString;

use super::{Pending, Stop};
use crate::model::warehouse::Row;

/// How a warehouse is reached for one call: the HTTP client, its secret in force (a
/// service account's key, a connection URL), its API's root and the longest wait.
#[derive(Clone, Copy)]
pub struct Link<'a> {
    pub http: &'a reqwest::Client,
    pub secret: &'a SecretString,
    pub base_url: &'a str,
    pub timeout: Duration,
}

/// What a warehouse's table holds, as its check found it: the sender fills a table that
/// holds less than was sent to it again from its first entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// Made by the check (it was missing: renamed, dropped, its schema dropped).
    Made,
    /// There, holding no row (truncated, or new).
    Empty,
    /// There, holding rows through this seq (PostgreSQL), or through a seq the warehouse
    /// does not tell cheaply (`None`: BigQuery).
    Holding(Option<i64>),
}

/// A row of a batch the warehouse would not take, by its index in the batch, with the
/// warehouse's reason.
pub type Refusal = (usize, String);

/// A table the ledger is mirrored into.
pub trait Warehouse: std::fmt::Debug + Send + Sync {
    /// Whether the table was checked (created when missing) under the secret in force.
    fn ready(&self) -> bool;

    /// Forgets the check (and any token or connection), so that the next batch checks
    /// again: after a stop, a reload, a table gone.
    fn forget(&self);

    /// Checks the secret and the table: creates the table and its views when missing; a
    /// table whose columns differ from the rows' is a [`Stop::Lookup`] naming the column.
    /// What the table holds, for the sender to tell whether it is behind.
    fn prepare<'a>(&'a self, link: Link<'a>) -> Pending<'a, Result<Table, Stop>>;

    /// Writes `rows` (a row the table has already is not written twice where the warehouse
    /// can tell, and never seen twice through its views). `Ok`: every row was taken but
    /// those refused.
    fn write<'a>(
        &'a self,
        link: Link<'a>,
        rows: &'a [Row],
    ) -> Pending<'a, Result<Vec<Refusal>, Stop>>;
}

/// A short fingerprint of `secret`, to tell whether what was made with it (a token, a
/// connection) is of the secret in force.
pub fn fingerprint(secret: &SecretString) -> [u8; 32] {
    use secrecy::ExposeSecret as _;
    use sha2::Digest as _;
    sha2::Sha256::digest(secret.expose_secret().as_bytes()).into()
}
