//! The ledger's hash chain as stored, one text for both backends (`$N` parameters):
//! reading it in seq order and its last entry. (Computing the chain of entries recorded
//! before it existed is SQLite's `chain`; PostgreSQL's migration computes it.)

use super::Error;
use super::backend::on_backend;
use super::{ChainStore, Pool};

impl ChainStore for Pool {
    async fn chain_page(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::chain::ChainRow>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(concat!(
                "SELECT ",
                crate::store::columns::chain_columns!(),
                " FROM ledger WHERE seq > $1 ORDER BY seq LIMIT $2"
            ))
            .bind(after)
            .bind(limit)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn chain_head(&self) -> Result<crate::model::chain::ChainHead, Error> {
        on_backend!(self, |pool| {
            // The hash is NULL on SQLite until the entries recorded before the chain
            // are hashed.
            let last: Option<(i64, Option<String>)> =
                sqlx::query_as("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1")
                    .fetch_optional(pool)
                    .await?;
            Ok(match last {
                None => crate::model::chain::ChainHead::empty(),
                Some((seq, hash)) => crate::model::chain::ChainHead {
                    seq,
                    hash: hash.unwrap_or_default(),
                },
            })
        })
    }
}
