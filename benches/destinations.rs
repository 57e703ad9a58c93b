//! `cargo bench --bench destinations`: how fast opt-outs reach a destination (NGP VAN),
//! beside a subscriber on the same ledger.
//!
//! Per backend (SQLite, then PostgreSQL), one database whose ledger holds `N` opt-outs
//! (`BENCH_DESTINATION_ENTRIES`, default 10,000; 100,000 take 1–2 minutes of sending a
//! backend at the 860–1,670 entries/s the daemon reached here), each of a lead in the mirror whose
//! custom field `VanID` names a person of the sandbox's VAN fake (in this process,
//! answering at once). The leads and their opt-outs are recorded as the reconciler records them
//! (`apply::lead_page`, a page of 1,000 per transaction). Then, on that one ledger:
//!
//! 1. **Baseline**: a subscriber's sender (signed, batch 100) to a local receiver that
//!    answers 200 at once, until the receiver has every entry; then the same with batch 1
//!    (one request per entry, as a destination makes) over the first entries.
//! 2. **Run A**: a VAN destination at `requests_per_second = 10,000` (above what the daemon
//!    reaches): entries/s and requests/s (2 per opt-out: the canvass response, the phone's
//!    status, each answered action committed before the next request).
//! 3. **Commit-to-request**: with run A's sender idle, opt-outs recorded one at a time
//!    (local changes, each its own commit) at a modest steady rate; from each ledger
//!    entry's `recorded_at` to the VAN fake's receipt of its canvass response (the fake's
//!    `at`; both to the millisecond).
//! 4. **Run B**: a second VAN destination (a cursor of its own, from the start of the same
//!    ledger) at `requests_per_second = 1,000`, over the first `BENCH_DESTINATION_LIMITED`
//!    opt-outs (default 5,000); requests/s sustained once past the rate limiter's first
//!    burst. Target: >= 900.
//!
//! PostgreSQL: the server at `BENCH_POSTGRES_URL`, else postgres://postgres@127.0.0.1:5432/test,
//! a database of its own per run, dropped after; skipped with a printed line if the server
//! does not answer. Verdicts are printed, never turned into a failure.

#[allow(dead_code)] // The helpers other benches use.
mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use chrono::{DateTime, Utc};
use common::BenchDatabase;
use outreach_sync::apply::{self, LocalChange};
use outreach_sync::model::Lead;
use outreach_sync::sender::{self, Subscriber};
use outreach_sync::settings::{DestinationSettings, Live, SubscriberSettings, SystemSettings};
use outreach_sync::store::{DestinationStore as _, Pool, SubscriberStore as _};
use outreach_sync_sandbox::destinations::Fake;
use outreach_sync_sandbox::{DEFAULT_VAN_KEY, RunningSandbox, Sandbox, SandboxConfig};
use sqlx::Connection as _;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "whsec_YmVuY2gtc3Vic2NyaWJlci1zZWNyZXQ=";
const ORGANIZATION: &str = "org_0";
/// Leads (and their opt-outs) recorded per transaction while setting up.
const PAGE: usize = 1_000;
/// Run A's rate: above what the daemon reaches, so the daemon is what is measured.
const UNLIMITED_RPS: u32 = 10_000;
/// Run B's rate, and the goal: at least this share of it sustained.
const LIMITED_RPS: u32 = 1_000;
const TARGET_SHARE: f64 = 0.9;
/// VAN requests per opt-out: the canvass response and the phone's status.
const REQUESTS_PER_ENTRY: f64 = 2.0;
/// Opt-outs trickled in while the sender is idle, and their rate.
const TRICKLE: usize = 500;
const TRICKLE_PER_SEC: u64 = 50;
/// Entries sent by the batch-1 subscriber.
const PER_REQUEST_ENTRIES: usize = 20_000;
/// How often progress is read while a sender drains.
const POLL: Duration = Duration::from_millis(20);
/// A sender that makes no progress for this long has failed the run.
const STALLED: Duration = Duration::from_secs(60);

#[tokio::main]
async fn main() {
    let entries = common::env_number("BENCH_DESTINATION_ENTRIES", 10_000) as usize;
    let limited = (common::env_number("BENCH_DESTINATION_LIMITED", 5_000) as usize).min(entries);
    println!(
        "destinations: {entries} opt-outs to a VAN fake answering at once (run B: the first \
         {limited} at {LIMITED_RPS} requests/s)\n"
    );
    run(None, entries, limited).await;
    if let Some(server) = common::answering_postgres().await {
        run(Some(server), entries, limited).await;
    }
}

/// The leads of the run: the opt-outs' (`0..entries`) and the trickle's (after them).
struct Campaign {
    database: BenchDatabase,
    pool: Pool,
    sandbox: RunningSandbox,
    /// The VAN ID of each lead, by lead id.
    van_ids: HashMap<String, u64>,
    /// The trickle's numbers, in the mirror with their leads, not yet opted out.
    trickle: Vec<String>,
}

fn phone(i: usize) -> String {
    format!("+1555{i:07}")
}

/// A fresh database whose mirror holds `entries + TRICKLE` leads, each with a VAN ID the
/// fake knows, the first `entries` opted out (an entry each in the ledger).
async fn campaign(server: Option<String>, entries: usize) -> Campaign {
    let (database, pool) = BenchDatabase::open_on("destinations.db", server).await;
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 1,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    sandbox.fake_latency(Fake::Van, Duration::ZERO);
    let mut van_ids = HashMap::new();
    let mut trickle = Vec::new();
    let total = entries + TRICKLE;
    for start in (0..total).step_by(PAGE) {
        let leads: Vec<Lead> = (start..(start + PAGE).min(total))
            .map(|i| {
                let number = phone(i);
                let van_id = sandbox.van_add_person(&number);
                let id = format!("lead_{i}");
                van_ids.insert(id.clone(), van_id);
                if i >= entries {
                    trickle.push(number.clone());
                }
                serde_json::from_value(serde_json::json!({
                    "id": id, "phoneNumber": number, "organizationId": ORGANIZATION,
                    "globalOptedOut": i < entries, "firstName": "Bench",
                    "customFields": {"VanID": van_id.to_string()},
                }))
                .expect("a lead")
            })
            .collect();
        apply_page(&pool, &leads).await;
    }
    Campaign {
        database,
        pool,
        sandbox,
        van_ids,
        trickle,
    }
}

/// One page of leads, as the reconciler applies it.
async fn apply_page(pool: &Pool, leads: &[Lead]) {
    let fetched_at = Utc::now();
    match pool {
        Pool::Sqlite(pool) => {
            let mut connection = pool.acquire().await.expect("a connection");
            let mut tx = connection
                .begin_with("BEGIN IMMEDIATE")
                .await
                .expect("begin");
            apply::lead_page(
                &mut *tx,
                &outreach_sync::model::AccountId::default_account(),
                "pass_bench",
                leads,
                fetched_at,
            )
            .await
            .expect("a page");
            tx.commit().await.expect("commit");
        }
        Pool::Postgres(pool) => {
            let mut tx = pool.begin().await.expect("begin");
            apply::lead_page(
                &mut *tx,
                &outreach_sync::model::AccountId::default_account(),
                "pass_bench",
                leads,
                fetched_at,
            )
            .await
            .expect("a page");
            tx.commit().await.expect("commit");
        }
    }
}

fn van(sandbox: &RunningSandbox, name: &str, rps: u32) -> DestinationSettings {
    let mut van = DestinationSettings::new(
        name,
        SystemSettings::Van(Default::default()),
        &sandbox.van_url(),
        DEFAULT_VAN_KEY,
    );
    van.requests_per_second = Some(rps);
    van
}

/// A sender running until its token is cancelled.
struct Running {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(pool: &Pool, senders: Vec<Arc<Subscriber>>) -> Self {
        let stop = CancellationToken::new();
        let task = tokio::spawn(sender::run(
            pool.clone(),
            senders,
            sender::http_client().expect("the senders' HTTP client"),
            stop.clone(),
        ));
        Self { stop, task }
    }

    fn destination(pool: &Pool, settings: DestinationSettings) -> Self {
        let settings = [settings];
        let keys = Live::new(outreach_sync::settings::keys_of(&settings));
        Self::start(
            pool,
            sender::destinations::configured(&settings, &keys, &Live::new(Vec::new())),
        )
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task.await.expect("the sender");
    }
}

/// Entries with an outcome at `name`: (sent, unmatched, refused).
async fn outcomes(pool: &Pool, name: &str) -> (i64, i64, i64) {
    let counts = pool.outcome_counts(name).await.expect("outcome counts");
    (counts.sent, counts.unmatched, counts.refused)
}

/// The seqs of the ledger's opt-outs, in order.
async fn opt_out_seqs(pool: &Pool) -> Vec<i64> {
    let sql = "SELECT seq FROM ledger WHERE opted_out ORDER BY seq";
    match pool {
        Pool::Sqlite(pool) => sqlx::query_scalar(sql).fetch_all(pool).await,
        Pool::Postgres(pool) => sqlx::query_scalar(sql).fetch_all(pool).await,
    }
    .expect("the opt-outs")
}

/// How many of `opt_outs` `name` is done with, read from its last outcome row alone (by
/// the primary key), so that watching the run costs it next to nothing. `name` is one of
/// this bench's own.
async fn done(pool: &Pool, name: &str, opt_outs: &[i64]) -> usize {
    let sql = format!(
        "SELECT seq, CASE WHEN outcome IS NULL THEN 0 ELSE 1 END FROM destination_outcomes
         WHERE destination = '{name}' UNION ALL SELECT 0, 1 ORDER BY 1 DESC LIMIT 1"
    );
    let (seq, finished): (i64, i32) = common::fetch_row(pool, &sql).await.expect("progress");
    let before = opt_outs.partition_point(|s| *s < seq);
    before + usize::from(finished == 1 && opt_outs.get(before) == Some(&seq))
}

/// Reads `progress` every [`POLL`] until it reaches `n`; returns when it did, and when it
/// first reached `from` (where a sustained rate starts), each with the progress read then.
async fn drained<F, Fut>(n: usize, from: usize, mut progress: F) -> [(Instant, usize); 2]
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let (mut last, mut moved) = (0, Instant::now());
    let mut reached_from = None;
    loop {
        let done = progress().await;
        let now = Instant::now();
        if done >= from && reached_from.is_none() {
            reached_from = Some((now, done));
        }
        if done >= n {
            return [reached_from.unwrap_or((now, done)), (now, done)];
        }
        if done > last {
            (last, moved) = (done, now);
        }
        assert!(
            moved.elapsed() < STALLED,
            "no progress for {STALLED:?} at {done} of {n}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// The subscriber's receiver: counts the entries it is posted.
#[derive(Default)]
struct Receiver {
    entries: AtomicUsize,
    progress: Notify,
}

async fn receive(State(receiver): State<Arc<Receiver>>, body: Bytes) -> &'static str {
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let items = body["data"]["items"].as_array().map_or(0, Vec::len);
    receiver.entries.fetch_add(items, Ordering::SeqCst);
    receiver.progress.notify_waiters();
    "ok"
}

async fn receiver() -> (String, Arc<Receiver>) {
    let receiver = Arc::new(Receiver::default());
    let router = axum::Router::new()
        .route("/hooks", axum::routing::post(receive))
        .with_state(receiver.clone());
    let url = format!("{}/hooks", common::serve_local(router).await);
    (url, receiver)
}

impl Receiver {
    async fn wait_for(&self, n: usize) {
        loop {
            let notified = self.progress.notified();
            if self.entries.load(Ordering::SeqCst) >= n {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
        }
    }
}

/// Seconds for a subscriber of `batch` to deliver the first `n` entries of the ledger.
async fn subscriber(pool: &Pool, name: &str, batch: u32, n: usize) -> f64 {
    let (url, receiver) = receiver().await;
    let mut settings = SubscriberSettings::new(name, &url, SECRET);
    settings.batch = batch;
    let started = Instant::now();
    let running = Running::start(pool, sender::configured(&[settings]));
    receiver.wait_for(n).await;
    let secs = started.elapsed().as_secs_f64();
    running.stop().await;
    secs
}

async fn run(server: Option<String>, entries: usize, limited: usize) {
    let started = Instant::now();
    let campaign = campaign(server, entries).await;
    let Campaign {
        database,
        pool,
        sandbox,
        ..
    } = &campaign;
    let head = usize::try_from(pool.ledger_head().await.expect("head")).unwrap_or(0);
    println!(
        "{}, {}",
        database.backend(),
        database.describe(pool).await.expect("describe")
    );
    println!(
        "  setup: {} leads and {entries} opt-outs ({head} ledger entries) in {:.1} s",
        entries + TRICKLE,
        started.elapsed().as_secs_f64()
    );

    // The baseline: a subscriber over the same ledger.
    let secs = subscriber(pool, "subscriber", 100, head).await;
    let baseline = head as f64 / secs;
    println!(
        "  subscriber, batch 100 (baseline):    {secs:>7.2} s for {head} entries, {baseline:>7.0} entries/s"
    );
    let per_request = PER_REQUEST_ENTRIES.min(head);
    let secs = subscriber(pool, "subscriber-1", 1, per_request).await;
    let one = per_request as f64 / secs;
    println!(
        "  subscriber, batch 1 (a request each): {secs:>7.2} s for {per_request} entries, {one:>7.0} entries/s"
    );

    // Run A: the daemon's own pace.
    let name = "van-a";
    let started = Instant::now();
    let running = Running::destination(pool, van(sandbox, name, UNLIMITED_RPS));
    let opt_outs = opt_out_seqs(pool).await;
    let [_, (finished, _)] = drained(entries, 0, || done(pool, name, &opt_outs)).await;
    let secs = finished.duration_since(started).as_secs_f64();
    let (sent, unmatched, refused) = outcomes(pool, name).await;
    let rate = entries as f64 / secs;
    println!(
        "  VAN at {UNLIMITED_RPS} requests/s (run A): {secs:>7.2} s, {rate:>7.0} entries/s, \
         {:>7.0} requests/s (sent {sent}, unmatched {unmatched}, refused {refused})",
        rate * REQUESTS_PER_ENTRY
    );
    println!(
        "    entries/s against the subscriber's: batch 100 {:.3}, batch 1 {:.2}",
        rate / baseline,
        rate / one
    );

    // Commit-to-request while the sender waits.
    let (p50, p99, max, measured) = trickle(&campaign, name, entries).await;
    println!(
        "  commit-to-request, {measured} opt-outs at {TRICKLE_PER_SEC}/s while idle: \
         p50 {p50} ms, p99 {p99} ms, max {max} ms (from recorded_at to the fake's receipt, \
         each to the millisecond)"
    );
    running.stop().await;

    // Run B: the configured rate.
    let name = "van-b";
    let running = Running::destination(pool, van(sandbox, name, LIMITED_RPS));
    // Past the limiter's first burst (a second's worth of requests).
    let warm = (LIMITED_RPS as usize).min(limited / 4);
    let [(from, first), (to, last)] = drained(limited, warm, || done(pool, name, &opt_outs)).await;
    running.stop().await;
    let secs = to.duration_since(from).as_secs_f64();
    let requests = (last - first) as f64 * REQUESTS_PER_ENTRY / secs;
    let goal = f64::from(LIMITED_RPS) * TARGET_SHARE;
    println!(
        "  VAN at {LIMITED_RPS} requests/s (run B): entries {first}..{last} in {secs:.2} s, \
         {:.0} entries/s, {requests:.0} requests/s sustained; target >= {goal:.0}: {}",
        requests / REQUESTS_PER_ENTRY,
        if requests >= goal { "met" } else { "NOT met" }
    );
    let canvassed = sandbox.van_truth().canvass_responses.len();
    println!("  the fake's canvass responses: {canvassed}\n");
    let Campaign { pool, sandbox, .. } = campaign;
    pool.close().await;
    sandbox.shutdown().await;
}

/// Records [`TRICKLE`] opt-outs at [`TRICKLE_PER_SEC`], waits for `name` to send them, and
/// returns the delays from each entry's `recorded_at` to the fake's receipt of its canvass
/// response: p50, p99, max in milliseconds, and how many were measured.
async fn trickle(campaign: &Campaign, name: &str, entries: usize) -> (i64, i64, i64, usize) {
    let pool = &campaign.pool;
    let after = pool.ledger_head().await.expect("head");
    let mut ticker = tokio::time::interval(Duration::from_micros(1_000_000 / TRICKLE_PER_SEC));
    for number in &campaign.trickle {
        ticker.tick().await;
        let change = LocalChange {
            account: outreach_sync::model::AccountId::default_account(),
            organization_id: ORGANIZATION.into(),
            phone_number: number.clone(),
            opted_out: true,
            tag_id: None,
            reason: Some("bench".into()),
            actor: "cli:bench".into(),
        };
        apply::record_local(pool, &change, Utc::now())
            .await
            .expect("an opt-out");
    }
    let opt_outs = opt_out_seqs(pool).await;
    drained(entries + TRICKLE, 0, || done(pool, name, &opt_outs)).await;
    let recorded: HashMap<u64, DateTime<Utc>> =
        outreach_sync::ledger::changes(pool, after, TRICKLE as i64 * 2)
            .await
            .expect("the trickle's entries")
            .into_iter()
            .filter_map(|e| {
                Some((
                    *campaign.van_ids.get(e.lead_id.as_deref()?)?,
                    e.recorded_at.at(),
                ))
            })
            .collect();
    let mut delays: Vec<i64> = campaign
        .sandbox
        .van_truth()
        .canvass_responses
        .iter()
        .filter_map(|r| {
            let recorded = recorded.get(&r.van_id)?;
            let at = DateTime::parse_from_rfc3339(&r.at).ok()?;
            Some((at.with_timezone(&Utc) - *recorded).num_milliseconds())
        })
        .collect();
    assert!(!delays.is_empty(), "no trickled opt-out reached the fake");
    delays.sort_unstable();
    let pick = |q: f64| delays[((delays.len() - 1) as f64 * q).round() as usize];
    (
        pick(0.5),
        pick(0.99),
        delays[delays.len() - 1],
        delays.len(),
    )
}
