//! The floors the daemon's ingest is measured against: what any implementation of the
//! ingest contract must at least do, written by hand without the daemon's layers.
//!
//! Both verify the signature (the daemon's verifier: HMAC-SHA256 compared in constant time)
//! with the secrets of the account whose path a delivery came on, key the body by its
//! SHA-256 and hand both to one group-commit loop, which answers after the commit. On SQLite
//! the loop is a thread of its own that owns a rusqlite connection to a file of its own (WAL,
//! `synchronous = FULL`) and commits every waiting delivery in one transaction; on
//! PostgreSQL a dedicated connection stores each batch in tables of its own in the bench's
//! database.
//!
//! - The **bare floor** ([`Floor::Bare`]) stores the delivery and nothing else: a prepared
//!   `INSERT ... ON CONFLICT (key) DO NOTHING` each into a table with a unique key (on
//!   PostgreSQL one `unnest` insert per batch).
//! - The **ledger floor** ([`Floor::Ledger`]) also does, in the same transaction, what the
//!   daemon's promise ("an acknowledged opt-out is already in the ledger") needs at the
//!   least: the body parsed once, a hash-chained ledger row (the previous entry's hash, and
//!   the SHA-256 of it and the body), and the number's consent state upserted, the later
//!   change winning. A duplicate body stores nothing.

use std::sync::Arc;

use axum::Router;
use axum::routing::post;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use outreach_sync::settings::{Account, Settings};
use outreach_sync::signature::Verifier;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::common::BenchDatabase;

/// Which floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Floor {
    /// The delivery stored, nothing else.
    Bare,
    /// The delivery stored, parsed, chained into a ledger and its number's state upserted.
    Ledger,
}

/// A delivery handed to a floor's group-commit loop: its key (SHA-256 of the body), the
/// body, and where to answer with its row id.
type Stored = ([u8; 32], Bytes, oneshot::Sender<i64>);

/// Most deliveries a floor commits in one transaction, as the daemon's writer.
const FLOOR_BATCH: usize = 512;

/// What of a consent event the ledger floor reads: as the daemon, the body parsed once.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    created_at: String,
    data: EventData,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct EventData {
    organization_id: String,
    phone_number: String,
    global_opted_out: bool,
}

/// Where a floor stores its batches: on SQLite a synchronous binding (rusqlite) on a
/// thread of its own that owns the connection, in a file of its own; on PostgreSQL a
/// dedicated connection and tables of its own in the bench's database.
pub enum FloorStore {
    Sqlite(std::path::PathBuf, Floor),
    Postgres(sqlx::PgConnection, Floor),
}

impl FloorStore {
    pub async fn open(
        database: &BenchDatabase,
        settings: &Settings,
        floor: Floor,
    ) -> anyhow::Result<Self> {
        if database.is_postgres() {
            let mut conn = outreach_sync::store::postgres_connection(settings).await?;
            let tables = match floor {
                Floor::Bare => {
                    "CREATE TABLE floor (id BIGSERIAL PRIMARY KEY, key BYTEA NOT NULL UNIQUE, body BYTEA NOT NULL)"
                }
                Floor::Ledger => {
                    "CREATE TABLE ledger_floor (id BIGSERIAL PRIMARY KEY, key BYTEA NOT NULL UNIQUE, body BYTEA NOT NULL);
                     CREATE TABLE ledger_floor_entries (seq BIGSERIAL PRIMARY KEY, delivery BIGINT NOT NULL,
                         organization_id TEXT NOT NULL, phone_number TEXT NOT NULL, opted_out BOOLEAN NOT NULL,
                         occurred_at TEXT NOT NULL, prev_hash BYTEA NOT NULL, hash BYTEA NOT NULL);
                     CREATE TABLE ledger_floor_state (organization_id TEXT NOT NULL, phone_number TEXT NOT NULL,
                         opted_out BOOLEAN NOT NULL, changed_at TEXT NOT NULL,
                         PRIMARY KEY (organization_id, phone_number))"
                }
            };
            sqlx::raw_sql(tables).execute(&mut conn).await?;
            return Ok(Self::Postgres(conn, floor));
        }
        let file = match floor {
            Floor::Bare => "floor.db",
            Floor::Ledger => "ledger-floor.db",
        };
        Ok(Self::Sqlite(database.dir.path().join(file), floor))
    }

    /// Starts the group-commit loop: each batch of waiting deliveries in one transaction,
    /// every request of the batch answered after its commit (a duplicate answers id 0).
    fn start(self, mut rx: mpsc::Receiver<Stored>) -> anyhow::Result<()> {
        match self {
            Self::Sqlite(path, floor) => {
                let conn = open_sqlite(&path, floor)?;
                // Named apart (at most 15 bytes, Linux's limit), for a profile or `top -H`
                // to tell the two floors' writers from each other and from the daemon's.
                let name = match floor {
                    Floor::Bare => "floor-bare",
                    Floor::Ledger => "floor-ledger",
                };
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || {
                        let mut chain = Chain::default();
                        let mut batch = Vec::with_capacity(FLOOR_BATCH);
                        while let Some(first) = rx.blocking_recv() {
                            batch.push(first);
                            while batch.len() < FLOOR_BATCH {
                                match rx.try_recv() {
                                    Ok(next) => batch.push(next),
                                    Err(_) => break,
                                }
                            }
                            match store_sqlite(&conn, floor, &mut chain, &batch) {
                                Ok(ids) => answer(&mut batch, ids),
                                Err(error) => fail(&mut batch, &error),
                            }
                        }
                    })?;
            }
            Self::Postgres(mut conn, floor) => {
                tokio::spawn(async move {
                    let mut chain = Chain::default();
                    let mut batch = Vec::with_capacity(FLOOR_BATCH);
                    while rx.recv_many(&mut batch, FLOOR_BATCH).await > 0 {
                        let stored = match floor {
                            Floor::Bare => store_postgres(&mut conn, &batch).await,
                            Floor::Ledger => {
                                store_postgres_ledger(&mut conn, &mut chain, &batch).await
                            }
                        };
                        match stored {
                            Ok(ids) => answer(&mut batch, ids),
                            Err(error) => fail(&mut batch, &error),
                        }
                    }
                });
            }
        }
        Ok(())
    }
}

/// The ledger floor's chain: the last entry's hash, kept by the one writer (the daemon
/// reads it within the transaction; a single writer may keep it).
#[derive(Default)]
struct Chain {
    last: [u8; 32],
}

impl Chain {
    /// The next entry's previous hash and its own: SHA-256 of the previous hash and the
    /// body.
    fn link(&mut self, body: &[u8]) -> ([u8; 32], [u8; 32]) {
        let prev = self.last;
        let mut hasher = Sha256::new();
        hasher.update(prev);
        hasher.update(body);
        self.last = hasher.finalize().into();
        (prev, self.last)
    }
}

fn open_sqlite(path: &std::path::Path, floor: Floor) -> rusqlite::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch(
        "CREATE TABLE deliveries (id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, body BLOB NOT NULL)",
    )?;
    if floor == Floor::Ledger {
        conn.execute_batch(
            "CREATE TABLE ledger (seq INTEGER PRIMARY KEY, delivery INTEGER NOT NULL,
                 organization_id TEXT NOT NULL, phone_number TEXT NOT NULL,
                 opted_out INTEGER NOT NULL, occurred_at TEXT NOT NULL,
                 prev_hash BLOB NOT NULL, hash BLOB NOT NULL);
             CREATE TABLE state (organization_id TEXT NOT NULL, phone_number TEXT NOT NULL,
                 opted_out INTEGER NOT NULL, changed_at TEXT NOT NULL,
                 PRIMARY KEY (organization_id, phone_number));",
        )?;
    }
    Ok(conn)
}

/// One transaction for the batch: a prepared `INSERT ... ON CONFLICT (key) DO NOTHING` per
/// delivery (and for the ledger floor its entry and its state), then one durable commit.
fn store_sqlite(
    conn: &rusqlite::Connection,
    floor: Floor,
    chain: &mut Chain,
    batch: &[Stored],
) -> rusqlite::Result<Vec<i64>> {
    let tx = conn.unchecked_transaction()?;
    let mut ids = Vec::with_capacity(batch.len());
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO deliveries (key, body) VALUES (?1, ?2) ON CONFLICT (key) DO NOTHING",
        )?;
        for (key, body, _) in batch {
            let added = insert.execute(rusqlite::params![&key[..], body.as_ref()])?;
            let id = if added == 1 {
                tx.last_insert_rowid()
            } else {
                0
            };
            if id != 0 && floor == Floor::Ledger {
                record_sqlite(&tx, chain, id, body)?;
            }
            ids.push(id);
        }
    }
    tx.commit()?;
    Ok(ids)
}

/// The ledger floor's entry of one new delivery, and its number's state. A body that does
/// not parse is kept as a delivery and recorded nowhere else (the daemon quarantines it).
fn record_sqlite(
    tx: &rusqlite::Transaction<'_>,
    chain: &mut Chain,
    delivery: i64,
    body: &[u8],
) -> rusqlite::Result<()> {
    let Ok(event) = serde_json::from_slice::<Event>(body) else {
        return Ok(());
    };
    let (prev, hash) = chain.link(body);
    let data = &event.data;
    tx.prepare_cached(
        "INSERT INTO ledger (delivery, organization_id, phone_number, opted_out, occurred_at,
             prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(rusqlite::params![
        delivery,
        data.organization_id,
        data.phone_number,
        data.global_opted_out,
        event.created_at,
        &prev[..],
        &hash[..]
    ])?;
    tx.prepare_cached(
        "INSERT INTO state (organization_id, phone_number, opted_out, changed_at)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (organization_id, phone_number) DO UPDATE
         SET opted_out = excluded.opted_out, changed_at = excluded.changed_at
         WHERE excluded.changed_at >= state.changed_at",
    )?
    .execute(rusqlite::params![
        data.organization_id,
        data.phone_number,
        data.global_opted_out,
        event.created_at
    ])?;
    Ok(())
}

/// One statement for the batch in autocommit (one transaction, one durable commit).
async fn store_postgres(
    conn: &mut sqlx::PgConnection,
    batch: &[Stored],
) -> Result<Vec<i64>, sqlx::Error> {
    insert_deliveries(conn, "floor", batch).await
}

/// The batch's deliveries into `table` with one `unnest` insert; each one's row id, 0 for a
/// duplicate.
async fn insert_deliveries(
    conn: &mut sqlx::PgConnection,
    table: &str,
    batch: &[Stored],
) -> Result<Vec<i64>, sqlx::Error> {
    let keys: Vec<&[u8]> = batch.iter().map(|(key, _, _)| &key[..]).collect();
    let bodies: Vec<&[u8]> = batch.iter().map(|(_, body, _)| body.as_ref()).collect();
    let added: Vec<(Vec<u8>, i64)> = sqlx::query_as(&format!(
        "INSERT INTO {table} (key, body) SELECT * FROM unnest($1::bytea[], $2::bytea[]) \
         ON CONFLICT (key) DO NOTHING RETURNING key, id"
    ))
    .bind(&keys)
    .bind(&bodies)
    .fetch_all(&mut *conn)
    .await?;
    Ok(ids_of(batch, added))
}

/// The ledger floor on PostgreSQL: in one transaction, the batch's deliveries (one
/// `unnest` insert), the entries of those added (one `unnest` insert, chained in order) and
/// their numbers' states (one `unnest` upsert, the latest change of each number in the
/// batch), then one durable commit.
async fn store_postgres_ledger(
    conn: &mut sqlx::PgConnection,
    chain: &mut Chain,
    batch: &[Stored],
) -> Result<Vec<i64>, sqlx::Error> {
    use sqlx::Connection as _;
    let mut tx = conn.begin().await?;
    let ids = insert_deliveries(&mut tx, "ledger_floor", batch).await?;
    let mut entries = Entries::default();
    for ((_, body, _), &id) in batch.iter().zip(&ids) {
        if id == 0 {
            continue;
        }
        if let Ok(event) = serde_json::from_slice::<Event>(body) {
            let (prev, hash) = chain.link(body);
            entries.push(id, event, prev, hash);
        }
    }
    entries.store(&mut tx).await?;
    tx.commit().await?;
    Ok(ids)
}

/// A batch's ledger entries, column by column for `unnest`.
#[derive(Default)]
struct Entries {
    delivery: Vec<i64>,
    organization: Vec<String>,
    phone: Vec<String>,
    opted_out: Vec<bool>,
    occurred_at: Vec<String>,
    prev: Vec<Vec<u8>>,
    hash: Vec<Vec<u8>>,
}

impl Entries {
    fn push(&mut self, delivery: i64, event: Event, prev: [u8; 32], hash: [u8; 32]) {
        self.delivery.push(delivery);
        self.organization.push(event.data.organization_id);
        self.phone.push(event.data.phone_number);
        self.opted_out.push(event.data.global_opted_out);
        self.occurred_at.push(event.created_at);
        self.prev.push(prev.to_vec());
        self.hash.push(hash.to_vec());
    }

    async fn store(&self, tx: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
        if self.delivery.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO ledger_floor_entries (delivery, organization_id, phone_number, opted_out,
                 occurred_at, prev_hash, hash)
             SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bool[], $5::text[],
                 $6::bytea[], $7::bytea[])",
        )
        .bind(&self.delivery)
        .bind(&self.organization)
        .bind(&self.phone)
        .bind(&self.opted_out)
        .bind(&self.occurred_at)
        .bind(&self.prev)
        .bind(&self.hash)
        .execute(&mut *tx)
        .await?;
        // One row per number (an upsert may not touch a row twice): the batch's latest.
        let mut latest = std::collections::HashMap::new();
        for i in 0..self.delivery.len() {
            let number = (&self.organization[i], &self.phone[i]);
            let keep = latest
                .get(&number)
                .is_none_or(|&j: &usize| self.occurred_at[i] >= self.occurred_at[j]);
            if keep {
                latest.insert(number, i);
            }
        }
        let rows: Vec<usize> = latest.into_values().collect();
        let column = |values: &Vec<String>| -> Vec<String> {
            rows.iter().map(|&i| values[i].clone()).collect()
        };
        let opted_out: Vec<bool> = rows.iter().map(|&i| self.opted_out[i]).collect();
        sqlx::query(
            "INSERT INTO ledger_floor_state (organization_id, phone_number, opted_out, changed_at)
             SELECT * FROM unnest($1::text[], $2::text[], $3::bool[], $4::text[])
             ON CONFLICT (organization_id, phone_number) DO UPDATE
             SET opted_out = excluded.opted_out, changed_at = excluded.changed_at
             WHERE excluded.changed_at >= ledger_floor_state.changed_at",
        )
        .bind(column(&self.organization))
        .bind(column(&self.phone))
        .bind(opted_out)
        .bind(column(&self.occurred_at))
        .execute(&mut *tx)
        .await?;
        Ok(())
    }
}

/// Each delivery's row id in `added` (by key), 0 for a duplicate.
fn ids_of(batch: &[Stored], added: Vec<(Vec<u8>, i64)>) -> Vec<i64> {
    let added: std::collections::HashMap<Vec<u8>, i64> = added.into_iter().collect();
    batch
        .iter()
        .map(|(key, _, _)| added.get(&key[..]).copied().unwrap_or(0))
        .collect()
}

fn answer(batch: &mut Vec<Stored>, ids: Vec<i64>) {
    for (id, (_, _, reply)) in ids.into_iter().zip(batch.drain(..)) {
        let _ = reply.send(id);
    }
}

/// Dropping the replies answers 503: counted as non-200 in the table.
fn fail(batch: &mut Vec<Stored>, error: &dyn std::fmt::Display) {
    eprintln!("floor: storing a batch failed: {error}");
    batch.clear();
}

/// Serves a floor on a loopback port of its own until `shutdown`: verify the signature
/// with the secrets of the account whose path it came on, key the body by its SHA-256,
/// hand it to the group-commit loop and answer after the commit.
pub async fn spawn(
    served: &[Account],
    store: FloorStore,
    shutdown: CancellationToken,
) -> anyhow::Result<std::net::SocketAddr> {
    let (tx, rx) = mpsc::channel::<Stored>(4096);
    store.start(rx)?;
    let mut router = Router::new();
    for account in served {
        let (verifier, tx) = (Arc::new(Verifier::new(&account.webhook)), tx.clone());
        let ingest = move |headers: HeaderMap, body: Bytes| {
            let (verifier, tx) = (verifier.clone(), tx.clone());
            async move {
                let now = chrono::Utc::now().timestamp();
                if verifier.verify(&headers, &body, now).is_err() {
                    return Err(StatusCode::UNAUTHORIZED);
                }
                let key: [u8; 32] = Sha256::digest(&body).into();
                let (reply, stored) = oneshot::channel();
                tx.send((key, body, reply))
                    .await
                    .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
                let id = stored.await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
                let status = if id == 0 { "duplicate" } else { "accepted" };
                Ok(axum::Json(serde_json::json!({"status": status, "id": id})))
            }
        };
        router = router.route(&account.ingest_path, post(ingest));
    }
    crate::serve_baseline(router, shutdown).await
}
