//! The ledger's hash chain on SQLite: reading it in seq order (the statements:
//! [`crate::store::chain`]), and computing it for the entries recorded before it existed.

use sqlx::{Connection as _, SqlitePool};

use crate::model::chain::{ChainRow, GENESIS};

/// Entries hashed per transaction when computing a missing chain: each transaction holds
/// the write lock, so it stays short.
const FILL_BATCH: i64 = 5_000;

/// Computes the hash of every entry that has none (those recorded before the chain), in
/// seq order from the entry before the first of them: the one update the append-only
/// trigger allows (see migration `20261125200001_ledger_chain`). Run after the migrations;
/// returns how many entries it hashed.
pub async fn fill_missing_hashes(pool: &SqlitePool) -> Result<u64, sqlx::Error> {
    // Read first: every command opens the database through here, often while the daemon
    // writes, and must not queue for the write lock when there is nothing to do.
    let missing: Option<i64> =
        sqlx::query_scalar("SELECT seq FROM ledger WHERE hash IS NULL ORDER BY seq LIMIT 1")
            .fetch_optional(pool)
            .await?;
    if missing.is_none() {
        return Ok(0);
    }
    let mut filled = 0;
    loop {
        let mut conn = pool.acquire().await?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        let first: Option<i64> =
            sqlx::query_scalar("SELECT seq FROM ledger WHERE hash IS NULL ORDER BY seq LIMIT 1")
                .fetch_optional(&mut *tx)
                .await?;
        let Some(first) = first else {
            return Ok(filled);
        };
        let before: Option<Option<String>> =
            sqlx::query_scalar("SELECT hash FROM ledger WHERE seq < ? ORDER BY seq DESC LIMIT 1")
                .bind(first)
                .fetch_optional(&mut *tx)
                .await?;
        let mut prev = before.flatten().unwrap_or_else(|| GENESIS.to_owned());
        let rows: Vec<ChainRow> = sqlx::query_as(concat!(
            "SELECT ",
            crate::store::columns::chain_columns!(),
            " FROM ledger WHERE seq >= ? ORDER BY seq LIMIT ?"
        ))
        .bind(first)
        .bind(FILL_BATCH)
        .fetch_all(&mut *tx)
        .await?;
        for row in rows {
            match &row.hash {
                // An entry hashed when recorded: the chain goes on from it.
                Some(hash) => prev = hash.clone(),
                None => {
                    prev = row.fields().hash_after(&prev);
                    sqlx::query("UPDATE ledger SET hash = ? WHERE seq = ?")
                        .bind(&prev)
                        .bind(row.entry.seq)
                        .execute(&mut *tx)
                        .await?;
                    filled += 1;
                }
            }
        }
        tx.commit().await?;
    }
}
