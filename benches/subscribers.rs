//! `cargo bench --bench subscribers`: how fast consent reaches a subscriber.
//!
//! Two measures, each beside a baseline run in the same process on the same receiver (a
//! local HTTP server on loopback that notes when each entry arrives):
//!
//! 1. **Latency** under a steady 1,000 entries/s for 10 s: local consent changes recorded
//!    through the apply path (one transaction each), and the time from each commit's return
//!    to the entry's receipt. The daemon: a subscriber's sender (`sender::run`), woken
//!    by the commit, reads the ledger, signs and posts. The baseline: the writer itself posts
//!    each entry right after its commit (no read, no signature, no cursor). Target: the
//!    daemon's p99 < 50 ms.
//! 2. **Catch-up**: 200,000 entries already in the ledger, sent with `batch = 100` until the
//!    receiver has them all. The daemon's sender (signed; cursor kept every second)
//!    beside a plain loop that reads pages of 100 and posts them unsigned. Target: the
//!    daemon >= 20,000 entries/s.
//!
//! The backend comes from the environment as in the other benches (`BENCH_POSTGRES_URL`);
//! `BENCH_QUICK=1` runs a tenth of the size. Verdicts are printed, never turned into a
//! failure.

#[allow(dead_code)] // The helpers other benches use.
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use chrono::Utc;
use common::BenchDatabase;
use outreach_sync::apply::{self, LocalChange};
use outreach_sync::ledger;
use outreach_sync::model::{ConsentObservation, Source};
use outreach_sync::settings::SubscriberSettings;
use outreach_sync::store::{ApplyTx, NewEntry, Pool};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "whsec_YmVuY2gtc3Vic2NyaWJlci1zZWNyZXQ=";
const TARGET_P99: Duration = Duration::from_millis(50);
const TARGET_CATCH_UP: f64 = 20_000.0;
const RATE: u64 = 1_000;
/// Entries appended per transaction while prefilling the backlog.
const PREFILL_BATCH: usize = 1_000;

/// The receiver's notes: when each seq arrived, and how many entries did.
#[derive(Default)]
struct Receipts {
    arrived: Mutex<Vec<(i64, Instant)>>,
    progress: Notify,
}

async fn receive(State(receipts): State<Arc<Receipts>>, body: Bytes) -> &'static str {
    let now = Instant::now();
    let body: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    let seqs = body["data"]["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|e| e["seq"].as_i64().expect("seq"));
    receipts
        .arrived
        .lock()
        .expect("lock")
        .extend(seqs.map(|seq| (seq, now)));
    receipts.progress.notify_waiters();
    "ok"
}

/// Starts the receiver; returns its URL and notes.
async fn receiver() -> (String, Arc<Receipts>) {
    let receipts = Arc::new(Receipts::default());
    let router = axum::Router::new()
        .route("/hooks", axum::routing::post(receive))
        .with_state(receipts.clone());
    let url = format!("{}/hooks", common::serve_local(router).await);
    (url, receipts)
}

impl Receipts {
    async fn wait_for(&self, n: usize) {
        loop {
            let notified = self.progress.notified();
            if self.arrived.lock().expect("lock").len() >= n {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
        }
    }

    fn take(&self) -> Vec<(i64, Instant)> {
        std::mem::take(&mut *self.arrived.lock().expect("lock"))
    }
}

async fn fresh() -> (BenchDatabase, Pool) {
    BenchDatabase::open("subscribers.db").await
}

fn change(i: u64) -> LocalChange {
    LocalChange {
        account: outreach_sync::model::AccountId::default_account(),
        organization_id: format!("org_{}", i % 3),
        phone_number: format!("+1555{:07}", i % 1_000_000),
        opted_out: i.is_multiple_of(2),
        tag_id: None,
        reason: Some("bench".into()),
        actor: "cli:bench".into(),
    }
}

/// Records `seconds * RATE` local changes at a steady pace; returns the instant each
/// commit returned, by seq. With `post`, also posts each entry to `url` itself.
async fn steady_writes(
    pool: &Pool,
    seconds: u64,
    post: Option<(&reqwest::Client, &str)>,
) -> Vec<(i64, Instant)> {
    let mut ticker = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut committed = Vec::new();
    for i in 0..seconds * RATE {
        ticker.tick().await;
        let recorded = apply::record_local(pool, &change(i), Utc::now())
            .await
            .expect("record");
        committed.push((recorded.seq, Instant::now()));
        if let Some((http, url)) = post {
            let entries = ledger::changes(pool, recorded.seq - 1, 1)
                .await
                .expect("read");
            let body = serde_json::json!({"type": "consent.changed", "data": {"items": entries}});
            http.post(url).json(&body).send().await.expect("post");
        }
    }
    committed
}

/// Percentiles (p50, p99, max) of the delay from commit to receipt.
fn delays(
    committed: &[(i64, Instant)],
    arrived: &[(i64, Instant)],
) -> (Duration, Duration, Duration) {
    let at: std::collections::HashMap<i64, Instant> = arrived.iter().copied().collect();
    let mut delays: Vec<Duration> = committed
        .iter()
        .map(|(seq, done)| at[seq].saturating_duration_since(*done))
        .collect();
    delays.sort();
    let pick = |q: f64| delays[((delays.len() - 1) as f64 * q).round() as usize];
    (pick(0.5), pick(0.99), delays[delays.len() - 1])
}

async fn latency(seconds: u64) {
    let http = reqwest::Client::new();

    let (url, receipts) = receiver().await;
    let (database, pool) = fresh().await;
    println!(
        "latency on {}, {}: {RATE} entries/s for {seconds} s",
        database.backend(),
        database.describe(&pool).await.expect("describe")
    );
    let committed = steady_writes(&pool, seconds, Some((&http, &url))).await;
    receipts.wait_for(committed.len()).await;
    let (b50, b99, bmax) = delays(&committed, &receipts.take());
    pool.close().await;
    drop(database);

    let (database, pool) = fresh().await;
    let subscriber = SubscriberSettings::new("bench", &url, SECRET);
    let stop = CancellationToken::new();
    let senders = tokio::spawn(outreach_sync::sender::run(
        pool.clone(),
        outreach_sync::sender::configured(&[subscriber]),
        outreach_sync::sender::http_client().expect("the subscribers' HTTP client"),
        stop.clone(),
    ));
    let committed = steady_writes(&pool, seconds, None).await;
    receipts.wait_for(committed.len()).await;
    let (d50, d99, dmax) = delays(&committed, &receipts.take());
    stop.cancel();
    senders.await.expect("senders");
    pool.close().await;
    drop(database);

    println!(
        "  baseline (the writer posts each entry itself): p50 {b50:.2?}, p99 {b99:.2?}, max {bmax:.2?}"
    );
    println!(
        "  daemon (subscriber sender, woken on commit):   p50 {d50:.2?}, p99 {d99:.2?}, max {dmax:.2?}"
    );
    println!(
        "  daemon p99 / baseline p99: {:.2}; target p99 < {TARGET_P99:?}: {}",
        d99.as_secs_f64() / b99.as_secs_f64().max(1e-6),
        if d99 < TARGET_P99 { "met" } else { "NOT met" }
    );
}

/// A fresh database whose ledger holds `n` entries, appended through the storage layer in
/// transactions of [`PREFILL_BATCH`].
async fn backlog(n: usize) -> (BenchDatabase, Pool) {
    let (database, pool) = fresh().await;
    let now = Utc::now();
    let observations: Vec<ConsentObservation> = (0..n)
        .map(|i| ConsentObservation {
            organization_id: format!("org_{}", i % 3),
            phone_number: format!("+1555{i:07}"),
            lead_id: Some(format!("lead_{i}")),
            opted_out: i.is_multiple_of(2),
            occurred_at: now,
            source: Source::Webhook,
            event_ref: format!("event:evt_{i}"),
            tag_id: None,
            reason: None,
            evidence: None,
        })
        .collect();
    let account = outreach_sync::model::AccountId::default_account();
    for chunk in observations.chunks(PREFILL_BATCH) {
        let entries: Vec<NewEntry> = chunk
            .iter()
            .map(|o| NewEntry {
                observation: o,
                lead_id: o.lead_id.as_deref(),
                superseded: false,
            })
            .collect();
        match &pool {
            Pool::Sqlite(p) => {
                let mut tx = p.begin().await.expect("begin");
                tx.append_ledger(&account, &entries, now)
                    .await
                    .expect("append");
                tx.commit().await.expect("commit");
            }
            Pool::Postgres(p) => {
                let mut tx = p.begin().await.expect("begin");
                tx.append_ledger(&account, &entries, now)
                    .await
                    .expect("append");
                tx.commit().await.expect("commit");
            }
        }
    }
    (database, pool)
}

async fn catch_up(n: usize) {
    let http = reqwest::Client::new();
    let (url, receipts) = receiver().await;

    let (database, pool) = backlog(n).await;
    println!(
        "catch-up on {}: {n} entries in the ledger, batch 100",
        database.backend()
    );
    let started = Instant::now();
    let mut after = 0;
    loop {
        let entries = ledger::changes(&pool, after, 100).await.expect("read");
        let Some(last) = entries.last() else { break };
        after = last.seq;
        let body = serde_json::json!({"type": "consent.changed", "data": {"items": entries}});
        let response = http.post(&url).json(&body).send().await.expect("post");
        assert!(response.status().is_success());
    }
    receipts.wait_for(n).await;
    let baseline = started.elapsed();
    assert_eq!(receipts.take().len(), n);
    pool.close().await;
    drop(database);

    let (database, pool) = backlog(n).await;
    let subscriber = SubscriberSettings::new("bench", &url, SECRET);
    let stop = CancellationToken::new();
    let started = Instant::now();
    let senders = tokio::spawn(outreach_sync::sender::run(
        pool.clone(),
        outreach_sync::sender::configured(&[subscriber]),
        outreach_sync::sender::http_client().expect("the subscribers' HTTP client"),
        stop.clone(),
    ));
    receipts.wait_for(n).await;
    let daemon = started.elapsed();
    stop.cancel();
    senders.await.expect("senders");
    let arrived = receipts.take();
    let in_order = arrived.windows(2).all(|w| w[0].0 < w[1].0);
    assert!(in_order && arrived.len() == n, "every entry once, in order");
    pool.close().await;
    drop(database);

    let rate = |d: Duration| n as f64 / d.as_secs_f64();
    println!(
        "  baseline (plain loop: read 100, post unsigned): {:.2?}, {:.0} entries/s",
        baseline,
        rate(baseline)
    );
    println!(
        "  daemon (signed, cursor kept every second):       {:.2?}, {:.0} entries/s",
        daemon,
        rate(daemon)
    );
    println!(
        "  daemon / baseline: {:.2}; target >= {TARGET_CATCH_UP} entries/s: {}",
        rate(daemon) / rate(baseline),
        if rate(daemon) >= TARGET_CATCH_UP {
            "met"
        } else {
            "NOT met"
        }
    );
}

#[tokio::main]
async fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let (seconds, backlog_size) = if quick { (2, 20_000) } else { (10, 200_000) };
    latency(seconds).await;
    catch_up(backlog_size).await;
}
