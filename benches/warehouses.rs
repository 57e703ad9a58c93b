//! `cargo bench --bench warehouses`: how fast the ledger is mirrored into a warehouse
//! (PostgreSQL, BigQuery), an entry a row, a batch of 500 rows a request, by the sender every
//! destination has (`Sender::try_send` in a loop, from cursor 0, at `requests_per_second =
//! 10,000` so that the limiter is not what is measured).
//!
//! The ledger: a SQLite file (`synchronous = full`) of `N` entries (`BENCH_WAREHOUSE_ENTRIES`,
//! default 1,000,000): three opt-outs to one opt-in, over 400,000 numbers in 3
//! organizations, one in twenty a local change whose evidence names its actor, the rest
//! webhooks'. They are appended through the storage layer (`ApplyTx::append_ledger`, hashes
//! and evidence as the apply path writes them, 5,000 a transaction), as the subscribers bench
//! builds its backlog; how long that took is printed. Its rows are then read once (pages of
//! 5,000 with their extras) for the baselines.
//!
//! 1. **PostgreSQL warehouse**: a database of its own on the server at `BENCH_POSTGRES_URL`,
//!    else postgres://postgres@127.0.0.1:5432/test (created, dropped after; skipped with a
//!    printed line if the server does not answer). 3 rounds, each a new destination
//!    (`warehouse-1`, ...) and a new table, until its cursor reaches the ledger's head:
//!    entries/s; target >= 20,000. Interleaved with each, the **floor**: the same rows (read
//!    once, in memory) inserted into a new table of the same database with the warehouse's
//!    own statement (`INSERT ... SELECT * FROM UNNEST(...) ON CONFLICT ("seq") DO NOTHING`,
//!    batch 500, one at a time): no ledger reads, no outcomes. Figures: daemon/floor per
//!    round. Then **where a batch's time goes**, measured from outside over the first
//!    `BENCH_WAREHOUSE_BREAKDOWN_BATCHES` batches (default 200): each store call the sender
//!    makes for a batch, timed alone (its state, `changes` of a page of 1,000 as a
//!    destination reads them, and of 500, the outcomes it has of the batch already
//!    (`entry_progress`), `row_extras`, the rows built, the insert,
//!    `record_rows` on the outcomes' unflushed connection), against the daemon's own time a
//!    batch.
//! 2. **BigQuery stand-in** (the sandbox's fake, in this process, answering at once): the
//!    first `BENCH_WAREHOUSE_BIGQUERY_ENTRIES` entries (default 100,000), 3 rounds, each a new
//!    dataset. The baseline: the same rows posted to the fake's `insertAll` directly, the
//!    daemon's body, with the token the fake granted the daemon's key in that round (the
//!    key's `token_uri` is a pass-through in this process that notes the token), into a
//!    table of a new dataset: the fake's own cost, and the request's. The fake keeps every
//!    row in memory: the process's peak RSS (VmHWM) is printed after each part.
//! 3. **A PostgreSQL ledger**: a database of its own on the same server, holding
//!    `BENCH_WAREHOUSE_PG_LEDGER_ENTRIES` entries (default 100,000) made the same way, into
//!    the PostgreSQL warehouse, 3 rounds against the floor of its own rows.
//!
//! Verdicts are printed, never turned into a failure.

#[allow(dead_code)] // The helpers other benches use.
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::response::IntoResponse;
use chrono::{TimeDelta, Utc};
use common::BenchDatabase;
use outreach_sync::model::warehouse::{COLUMNS, Row};
use outreach_sync::model::{AccountId, ConsentObservation, KeptEvidence, Source, Timestamp};
use outreach_sync::sender::{self, Attempt, Sender, Subscriber};
use outreach_sync::settings::kinds::bigquery::BigQuerySettings;
use outreach_sync::settings::kinds::postgres::PostgresSettings;
use outreach_sync::settings::{DestinationSettings, Live, SystemSettings};
use outreach_sync::store::{
    ApplyTx as _, DestinationStore as _, NewEntry, Pool, ReadStore as _, SubscriberStore as _,
};
use outreach_sync_sandbox::destinations::{BIGQUERY_DATASET, BIGQUERY_PROJECT};
use outreach_sync_sandbox::{RunningSandbox, Sandbox, SandboxConfig, bigquery_key_file};
use serde_json::json;
use sqlx::PgPool;

/// Rows a request, the warehouses' default.
const BATCH: u32 = 500;
/// Above what the daemon reaches: the daemon is what is measured.
const UNLIMITED_RPS: u32 = 10_000;
const TARGET_PER_SEC: f64 = 20_000.0;
/// Daemon and baseline, each measured this many times in turn.
const ROUNDS: usize = 3;
/// Entries appended a transaction while setting up, and rows read a page for the baselines.
const SETUP_BATCH: usize = 5_000;
/// Numbers the entries are about.
const NUMBERS: usize = 400_000;
/// What a destination's sender reads a time (`FILTERED_PAGE`: a destination never takes
/// every entry, so it reads a page and takes a batch of it).
const DESTINATION_PAGE: i64 = 1_000;
/// Connections the floor holds, as a warehouse does.
const WAREHOUSE_CONNECTIONS: u32 = 2;

#[tokio::main]
async fn main() {
    let entries = common::env_number("BENCH_WAREHOUSE_ENTRIES", 1_000_000) as usize;
    let bigquery = (common::env_number("BENCH_WAREHOUSE_BIGQUERY_ENTRIES", 100_000) as usize)
        .min(entries)
        .max(1);
    let on_postgres = common::env_number("BENCH_WAREHOUSE_PG_LEDGER_ENTRIES", 100_000) as usize;
    let breakdown = common::env_number("BENCH_WAREHOUSE_BREAKDOWN_BATCHES", 200) as usize;
    println!(
        "warehouses: a ledger of {entries} entries mirrored a row each, {BATCH} rows a request, \
         {ROUNDS} rounds (BigQuery: the first {bigquery}; a PostgreSQL ledger: {on_postgres})\n"
    );

    let started = Instant::now();
    let (database, pool) = BenchDatabase::open_on("warehouses.db", None).await;
    build_ledger(&pool, entries).await;
    let head = pool.ledger_head().await.expect("head");
    println!(
        "{}, {}",
        database.backend(),
        database.describe(&pool).await.expect("describe")
    );
    println!(
        "  setup: {head} ledger entries appended in {:.1} s ({SETUP_BATCH} a transaction)",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let rows = read_rows(&pool, head).await;
    println!(
        "  rows read once for the baselines: {} in {:.1} s",
        rows.len(),
        started.elapsed().as_secs_f64()
    );

    let server = common::answering_postgres().await;
    if let Some(server) = &server {
        let warehouse = BenchDatabase::create_on("unused.db", Some(server.clone()))
            .await
            .expect("the warehouse's database");
        let into = Warehouse::connect(&warehouse.url).await;
        println!("  PostgreSQL warehouse: {}", server_of(&into.pool).await);
        postgres_rounds(&pool, &rows, &into, "warehouse").await;
        where_time_goes(&pool, &rows, &into, breakdown, head).await;
        into.pool.close().await;
        drop(warehouse);
    }
    println!("  peak RSS so far: {:.0} MB\n", peak_rss_mb());

    bigquery_rounds(&pool, &rows[..bigquery.min(rows.len())]).await;
    println!("  peak RSS so far: {:.0} MB\n", peak_rss_mb());
    drop(rows);
    pool.close().await;
    drop(database);

    if let Some(server) = server {
        postgres_ledger(server, on_postgres).await;
    }
    println!("peak RSS (VmHWM): {:.0} MB", peak_rss_mb());
}

/// Appends `n` entries to the ledger of `pool`, [`SETUP_BATCH`] a transaction.
async fn build_ledger(pool: &Pool, n: usize) {
    let account = AccountId::default_account();
    let start = Utc::now() - TimeDelta::milliseconds(n as i64);
    for from in (0..n).step_by(SETUP_BATCH) {
        let observations: Vec<ConsentObservation> = (from..(from + SETUP_BATCH).min(n))
            .map(|i| {
                let number = i % NUMBERS;
                let local = i % 20 == 7;
                ConsentObservation {
                    organization_id: format!("org_{}", number % 3),
                    phone_number: format!("+1555{number:07}"),
                    lead_id: (!local).then(|| format!("lead_{number}")),
                    opted_out: i % 4 != 3,
                    occurred_at: start + TimeDelta::milliseconds(i as i64),
                    source: if local {
                        Source::Local
                    } else {
                        Source::Webhook
                    },
                    event_ref: if local {
                        format!("local:{i:032x}")
                    } else {
                        format!("event:evt_{i}")
                    },
                    tag_id: None,
                    reason: local.then(|| "bench".into()),
                    evidence: local.then(|| KeptEvidence::Local {
                        actor: "cli:bench".into(),
                    }),
                }
            })
            .collect();
        let new: Vec<NewEntry> = observations
            .iter()
            .map(|o| NewEntry {
                observation: o,
                lead_id: o.lead_id.as_deref(),
                superseded: false,
            })
            .collect();
        let mut tx = pool.begin_write().await.expect("begin");
        tx.append_ledger(&account, &new, Utc::now())
            .await
            .expect("append");
        tx.commit().await.expect("commit");
    }
}

/// Every entry up to `head` as its warehouse row, read a page at a time.
async fn read_rows(pool: &Pool, head: i64) -> Vec<Row> {
    let mut rows = Vec::with_capacity(usize::try_from(head).unwrap_or(0));
    let mut after = 0;
    while after < head {
        let page = pool
            .changes(after, SETUP_BATCH as i64)
            .await
            .expect("a page");
        let (Some(first), Some(last)) = (page.first(), page.last()) else {
            break;
        };
        let extras = pool
            .row_extras(first.seq, last.seq)
            .await
            .expect("the extras");
        let extras: std::collections::HashMap<i64, _> =
            extras.into_iter().map(|x| (x.seq, x)).collect();
        rows.extend(page.iter().map(|e| Row::of(e, extras.get(&e.seq))));
        after = last.seq;
    }
    rows
}

/// The PostgreSQL warehouse's database: its URL (the destination's key) and a pool of
/// [`WAREHOUSE_CONNECTIONS`] for the floor.
struct Warehouse {
    url: String,
    pool: PgPool,
}

impl Warehouse {
    async fn connect(url: &str) -> Self {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(WAREHOUSE_CONNECTIONS)
            .connect(url)
            .await
            .expect("the warehouse's database");
        Self {
            url: url.to_owned(),
            pool,
        }
    }

    /// A new table of the warehouse's columns, as the destination creates its own.
    async fn create(&self, table: &str) {
        let columns: Vec<String> = COLUMNS
            .iter()
            .map(|c| {
                let null = if c.required { " NOT NULL" } else { "" };
                let key = if c.name == "seq" { " PRIMARY KEY" } else { "" };
                format!("\"{}\" {}{null}{key}", c.name, postgres_type(c.kind))
            })
            .collect();
        sqlx::query(&format!(
            "CREATE TABLE \"{table}\" ({})",
            columns.join(", ")
        ))
        .execute(&self.pool)
        .await
        .expect("a floor table");
    }

    /// `rows` inserted into `table` with the warehouse's own statement, in one.
    async fn insert(&self, table: &str, rows: &[Row]) {
        outreach_sync::systems::postgres::insert_rows(&self.pool, &format!("\"{table}\""), rows)
            .await
            .expect("a floor batch");
    }

    async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT COUNT(*) FROM \"{table}\""))
            .fetch_one(&self.pool)
            .await
            .expect("a count")
    }
}

async fn server_of(pool: &PgPool) -> String {
    let (version, synchronous_commit): (String, String) = sqlx::query_as(
        "SELECT current_setting('server_version'), current_setting('synchronous_commit')",
    )
    .fetch_one(pool)
    .await
    .expect("the server's settings");
    format!("server {version}, synchronous_commit = {synchronous_commit}")
}

/// The sender of the destination `settings`, as the daemon makes it.
fn sender_of(pool: &Pool, settings: DestinationSettings) -> Sender {
    let mut settings = settings;
    settings.requests_per_second = Some(UNLIMITED_RPS);
    let settings = [settings];
    let keys = Live::new(outreach_sync::settings::keys_of(&settings));
    let subscriber = Arc::new(Subscriber::destination(&settings[0], keys));
    Sender::new(
        pool.clone(),
        subscriber,
        sender::http_client().expect("the senders' HTTP client"),
    )
}

/// Runs `sender` from its cursor until it has delivered entry `until` (or has nothing
/// left): seconds, and the batches it delivered.
async fn drain(sender: &Sender, until: i64) -> (f64, usize) {
    let mut progress = None;
    let mut batches = 0;
    let started = Instant::now();
    loop {
        match sender
            .try_send(&mut progress, Utc::now())
            .await
            .expect("the ledger")
        {
            Attempt::Delivered { last, .. } => {
                batches += 1;
                if last >= until {
                    break;
                }
            }
            Attempt::Waiting(wait) => tokio::time::sleep(wait).await,
            Attempt::Idle => break,
            other => panic!("the warehouse's sender: {other:?}"),
        }
    }
    (started.elapsed().as_secs_f64(), batches)
}

/// The entries `name` recorded as sent.
async fn sent(pool: &Pool, name: &str) -> i64 {
    pool.outcome_counts(name)
        .await
        .expect("outcome counts")
        .sent
}

/// Median, min and max.
fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (
        sorted[sorted.len() / 2],
        sorted[0],
        sorted[sorted.len() - 1],
    )
}

fn print_spread(what: &str, values: &[f64], digits: usize) {
    let (median, min, max) = spread(values);
    println!("    {what}: median {median:.digits$} (min–max {min:.digits$}–{max:.digits$})");
}

/// Seconds for the floor to insert `rows` into a new `table`, a batch at a time.
async fn floor(into: &Warehouse, table: &str, rows: &[Row]) -> f64 {
    let started = Instant::now();
    into.create(table).await;
    for batch in rows.chunks(BATCH as usize) {
        into.insert(table, batch).await;
    }
    started.elapsed().as_secs_f64()
}

/// [`ROUNDS`] of the daemon (destinations `{prefix}-1`, ...) and the floor in turn, over the
/// ledger of `pool` whose rows are `rows`: daemon entries/s of each round.
async fn postgres_rounds(pool: &Pool, rows: &[Row], into: &Warehouse, prefix: &str) -> Vec<f64> {
    let head = rows.last().map_or(0, |r| r.seq);
    let n = rows.len() as f64;
    let (mut daemon, mut floors, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let name = format!("{prefix}-{round}");
        let table = format!("{prefix}_{round}").replace('-', "_");
        let system = SystemSettings::Postgres(PostgresSettings::of_table(&table, BATCH));
        let sender = sender_of(pool, DestinationSettings::new(&name, system, "", &into.url));
        let (secs, batches) = drain(&sender, head).await;
        drop(sender);
        let (sent, stored) = (sent(pool, &name).await, into.count(&table).await);
        let rate = n / secs;
        let floor_table = format!("floor_{prefix}_{round}").replace('-', "_");
        let floor_secs = floor(into, &floor_table, rows).await;
        let floor_rate = n / floor_secs;
        println!(
            "  round {round}: daemon {secs:>6.2} s, {rate:>7.0} entries/s ({batches} batches, \
             sent {sent}, rows {stored}); floor {floor_secs:>6.2} s, {floor_rate:>7.0} \
             entries/s; daemon/floor {:.2}",
            rate / floor_rate
        );
        daemon.push(rate);
        floors.push(floor_rate);
        ratios.push(rate / floor_rate);
    }
    print_spread("daemon entries/s", &daemon, 0);
    print_spread("floor entries/s", &floors, 0);
    print_spread("daemon/floor", &ratios, 2);
    let (median, ..) = spread(&daemon);
    println!(
        "    target >= {TARGET_PER_SEC:.0} entries/s: {}",
        if median >= TARGET_PER_SEC {
            "met"
        } else {
            "NOT met"
        }
    );
    daemon
}

/// Times, alone and in turn, each call the sender makes for a batch, over the first
/// `batches` batches of the ledger, and prints them a batch beside the daemon's own time.
async fn where_time_goes(pool: &Pool, rows: &[Row], into: &Warehouse, batches: usize, head: i64) {
    let name = "breakdown";
    pool.ensure_subscribers(&[(name, 0)])
        .await
        .expect("a state");
    let outcomes = pool.unflushed();
    into.create("breakdown").await;
    // state, changes (1,000), changes (500), row_extras, rows built, insert, record_rows,
    // entry_progress.
    let mut spent = [Duration::ZERO; 8];
    let mut timed = |i: usize, started: Instant| spent[i] += started.elapsed();
    let mut cursor = 0;
    let mut done = 0;
    while done < batches && cursor < head {
        let started = Instant::now();
        pool.subscriber_state(name).await.expect("the state");
        timed(0, started);
        let started = Instant::now();
        let page = pool
            .changes(cursor, DESTINATION_PAGE)
            .await
            .expect("a page");
        timed(1, started);
        let started = Instant::now();
        let items = pool
            .changes(cursor, i64::from(BATCH))
            .await
            .expect("a batch");
        timed(2, started);
        let (Some(first), Some(last)) = (items.first(), items.last()) else {
            break;
        };
        let started = Instant::now();
        pool.entry_progress(name, first.seq, last.seq)
            .await
            .expect("the batch's outcomes");
        timed(7, started);
        let started = Instant::now();
        let extras = pool
            .row_extras(first.seq, last.seq)
            .await
            .expect("the extras");
        timed(3, started);
        let started = Instant::now();
        let by_seq: std::collections::HashMap<i64, _> =
            extras.into_iter().map(|e| (e.seq, e)).collect();
        let built: Vec<Row> = items
            .iter()
            .map(|e| Row::of(e, by_seq.get(&e.seq)))
            .collect();
        timed(4, started);
        let started = Instant::now();
        into.insert("breakdown", &built).await;
        timed(5, started);
        let seqs: Vec<i64> = built.iter().map(|r| r.seq).collect();
        let started = Instant::now();
        outcomes
            .record_rows(name, &seqs, &[], Timestamp(Utc::now()))
            .await
            .expect("outcomes");
        timed(6, started);
        drop(page);
        cursor = last.seq;
        done += 1;
    }
    print_breakdown(spent, done, rows.len().min(done * BATCH as usize));
}

/// Each call's time a batch, over `done` batches of `entries` in all; their sum is what the
/// sender does a batch: its state, a page of the batch's size, the outcomes it has, the
/// extras, the rows, the insert, the outcomes kept (a page of 1,000 shown beside it: what a
/// warehouse read before it read each entry once).
fn print_breakdown(spent: [Duration; 8], done: usize, entries: usize) {
    let ms = |d: Duration| d.as_secs_f64() * 1_000.0 / done.max(1) as f64;
    let [state, page, half, extras, built, insert, recorded, progress] = spent.map(ms);
    let sum = state + half + progress + extras + built + insert + recorded;
    println!(
        "  where a batch's time goes (each call alone, over the first {done} batches, {entries} \
         entries), ms a batch:"
    );
    println!(
        "    state {state:.2}, changes of 500 {half:.2} (of 1,000: {page:.2}), entry_progress \
         {progress:.2}, row_extras {extras:.2}, rows built {built:.2}, insert {insert:.2}, \
         record_rows {recorded:.2}; sum {sum:.2} ms = {:.0} entries/s",
        f64::from(BATCH) * 1_000.0 / sum
    );
}

/// A token endpoint in this process that passes the grant on to the fake's and notes the
/// token it gives: the baseline's token, granted once a round to the daemon's key.
#[derive(Clone)]
struct TokenPass {
    upstream: String,
    http: reqwest::Client,
    token: Arc<Mutex<Option<String>>>,
}

async fn pass_token(State(pass): State<TokenPass>, body: Bytes) -> axum::response::Response {
    let answer = pass
        .http
        .post(&pass.upstream)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .expect("the fake's token endpoint");
    let status = answer.status();
    let body = answer.bytes().await.expect("the token's answer");
    if let Ok(granted) = serde_json::from_slice::<serde_json::Value>(&body)
        && let Some(token) = granted["access_token"].as_str()
    {
        *pass.token.lock().expect("the token") = Some(token.to_owned());
    }
    let status = axum::http::StatusCode::from_u16(status.as_u16()).unwrap_or_default();
    (status, [("content-type", "application/json")], body).into_response()
}

/// The token URL of a pass-through to `sandbox`'s token endpoint (its path the fake's,
/// which the JWT's audience must end with), and where it notes the token.
async fn token_pass(sandbox: &RunningSandbox) -> (String, Arc<Mutex<Option<String>>>) {
    let pass = TokenPass {
        upstream: sandbox.bigquery_token_url(),
        http: reqwest::Client::new(),
        token: Arc::default(),
    };
    let token = pass.token.clone();
    let router = axum::Router::new()
        .route("/bigquery/oauth2/token", axum::routing::post(pass_token))
        .with_state(pass);
    let base = common::serve_local(router).await;
    (format!("{base}/bigquery/oauth2/token"), token)
}

/// Seconds for the baseline: a table made in `dataset`, then `rows` posted to the fake's
/// `insertAll` with `token`, a batch a request, the daemon's body, one at a time.
async fn bigquery_floor(
    http: &reqwest::Client,
    sandbox: &RunningSandbox,
    dataset: &str,
    token: &str,
    rows: &[Row],
) -> f64 {
    let tables = format!(
        "{}/projects/{BIGQUERY_PROJECT}/datasets/{dataset}/tables",
        sandbox.bigquery_url()
    );
    let schema: Vec<serde_json::Value> = COLUMNS
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": bigquery_type(c.kind),
                "mode": if c.required { "REQUIRED" } else { "NULLABLE" },
            })
        })
        .collect();
    let started = Instant::now();
    let table = json!({
        "tableReference": {"projectId": BIGQUERY_PROJECT, "datasetId": dataset, "tableId": "floor"},
        "schema": {"fields": schema},
    });
    let made = http
        .post(&tables)
        .bearer_auth(token)
        .json(&table)
        .send()
        .await
        .expect("tables.insert");
    assert!(
        made.status().is_success(),
        "tables.insert: {}",
        made.status()
    );
    let url = format!("{tables}/floor/insertAll");
    for batch in rows.chunks(BATCH as usize) {
        let body = json!({
            "kind": "bigquery#tableDataInsertAllRequest",
            "skipInvalidRows": true,
            "ignoreUnknownValues": false,
            "rows": batch.iter().map(|row| json!({ "insertId": row.seq.to_string(), "json": row })).collect::<Vec<_>>(),
        });
        let answer = http
            .post(&url)
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("insertAll");
        let status = answer.status();
        let answer: serde_json::Value = answer.json().await.expect("insertAll's answer");
        assert!(
            status.is_success() && answer.get("insertErrors").is_none(),
            "insertAll: {status} {answer}"
        );
    }
    started.elapsed().as_secs_f64()
}

/// [`ROUNDS`] of the daemon and the baseline in turn into the sandbox's BigQuery fake.
async fn bigquery_rounds(pool: &Pool, rows: &[Row]) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 10,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let (token_url, token) = token_pass(&sandbox).await;
    let key = bigquery_key_file(&token_url);
    let http = sender::http_client().expect("an HTTP client");
    let until = rows.last().map_or(0, |r| r.seq);
    let n = rows.len() as f64;
    println!(
        "BigQuery stand-in (the sandbox's fake, in this process, answering at once; \
         dataset {BIGQUERY_DATASET} left alone): the first {} entries",
        rows.len()
    );
    let (mut daemon, mut floors, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let dataset = format!("bench_{round}");
        sandbox.bigquery_add_dataset(BIGQUERY_PROJECT, &dataset);
        let name = format!("bigquery-{round}");
        let system = SystemSettings::BigQuery(BigQuerySettings::of_table(
            BIGQUERY_PROJECT,
            &dataset,
            "consent_events",
            BATCH,
        ));
        let settings = DestinationSettings::new(&name, system, &sandbox.bigquery_url(), &key);
        let sender = sender_of(pool, settings);
        let (secs, batches) = drain(&sender, until).await;
        drop(sender);
        let sent = sent(pool, &name).await;
        let rate = n / secs;
        let granted = token
            .lock()
            .expect("the token")
            .clone()
            .expect("the daemon was granted a token");
        let floor_dataset = format!("floor_{round}");
        sandbox.bigquery_add_dataset(BIGQUERY_PROJECT, &floor_dataset);
        let floor_secs = bigquery_floor(&http, &sandbox, &floor_dataset, &granted, rows).await;
        let floor_rate = n / floor_secs;
        println!(
            "  round {round}: daemon {secs:>6.2} s, {rate:>7.0} entries/s ({batches} batches, \
             sent {sent}); insertAll alone {floor_secs:>6.2} s, {floor_rate:>7.0} entries/s; \
             daemon/baseline {:.2}",
            rate / floor_rate
        );
        daemon.push(rate);
        floors.push(floor_rate);
        ratios.push(rate / floor_rate);
    }
    print_spread("daemon entries/s", &daemon, 0);
    print_spread("insertAll alone entries/s", &floors, 0);
    print_spread("daemon/baseline", &ratios, 2);
    sandbox.shutdown().await;
}

/// The warehouse fed from a PostgreSQL ledger of `n` entries.
async fn postgres_ledger(server: String, n: usize) {
    let started = Instant::now();
    let (database, pool) = BenchDatabase::open_on("unused.db", Some(server.clone())).await;
    build_ledger(&pool, n).await;
    let head = pool.ledger_head().await.expect("head");
    println!(
        "{}, {}",
        database.backend(),
        database.describe(&pool).await.expect("describe")
    );
    println!(
        "  setup: {head} ledger entries appended in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let rows = read_rows(&pool, head).await;
    let warehouse = BenchDatabase::create_on("unused.db", Some(server))
        .await
        .expect("the warehouse's database");
    let into = Warehouse::connect(&warehouse.url).await;
    println!("  into a PostgreSQL warehouse on the same server (a database of its own)");
    postgres_rounds(&pool, &rows, &into, "pg-ledger").await;
    into.pool.close().await;
    pool.close().await;
    drop(warehouse);
    drop(database);
}

/// Peak resident set size of this process (VmHWM), in MB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1_000.0
}

/// BigQuery's standard SQL type of each kind of column, as the contract's schema gives it.
fn bigquery_type(kind: outreach_sync::model::warehouse::ColumnType) -> &'static str {
    use outreach_sync::model::warehouse::ColumnType;
    match kind {
        ColumnType::Integer => "INTEGER",
        ColumnType::Text => "STRING",
        ColumnType::Boolean => "BOOLEAN",
        ColumnType::Time => "TIMESTAMP",
    }
}

/// PostgreSQL's type of each kind of column, as the contract's table gives it.
fn postgres_type(kind: outreach_sync::model::warehouse::ColumnType) -> &'static str {
    use outreach_sync::model::warehouse::ColumnType;
    match kind {
        ColumnType::Integer => "bigint",
        ColumnType::Text => "text",
        ColumnType::Boolean => "boolean",
        ColumnType::Time => "timestamp with time zone",
    }
}
