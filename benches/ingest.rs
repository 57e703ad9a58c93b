//! Ingest throughput and latency, against a no-op ceiling and a storage floor.
//!
//! What it measures: signed webhook deliveries POSTed over loopback to the real daemon,
//! started in-process (`Application::build` + `run_until_stopped`) on a fresh database: by
//! default a SQLite file in a temporary directory with `synchronous = "full"`, so every
//! `200 accepted` is a fsynced commit; with `BENCH_POSTGRES_URL` set (e.g.
//! `postgres://postgres@127.0.0.1:5432/test`), a database of its own created on that
//! PostgreSQL server for the run and dropped after it, every `200 accepted` a commit the
//! server calls durable (its own `synchronous_commit`, printed in the header). Each
//! delivery is a distinct event (unique `id`), hence a real insert. Beside it, with the
//! same client, bodies and concurrency levels, a no-op axum handler (reads the body,
//! answers a small JSON 200) gives the ceiling of HTTP + client cost on this machine. The
//! daemon runs as in production, its worker applying the outbox while deliveries arrive (on
//! SQLite in the commit that stores them, or behind it; on PostgreSQL the writer only
//! inserts into the outbox and the worker applies behind it). After each level the bench
//! waits, untimed, until the worker has applied every delivery, so no level (nor the next
//! baselines) runs beside the previous level's backlog; how long that took is printed.
//!
//! For each concurrency (1, 16, 64, 256): a short untimed warm-up, then a fixed number of
//! requests (capped by a time window) driven by that many tasks pulling from one shared
//! counter. The floors and the daemon are measured in turn, three rounds by default
//! (`BENCH_ROUNDS=N`), and the round whose daemon/ledger-floor ratio is the median is the one shown
//! and judged: on a shared machine one round's ratio swings by a third from run to run. Bodies are signed before the timed section. Latency is per request, from send
//! to the end of the response body.
//!
//! Between the two, two floors (`ingest/floor.rs`): what any implementation of the ingest
//! contract must at least do, written by hand without the daemon's layers, each verifying
//! the signature with the daemon's verifier and committing every waiting delivery in one
//! transaction on a writer of its own (SQLite: a thread owning a rusqlite connection, WAL,
//! `synchronous = FULL`; PostgreSQL: a dedicated connection, `unnest` per batch). The bare
//! floor stores the delivery and nothing else. The ledger floor also does in the same
//! transaction what the daemon's promise needs at the least: the body parsed once, a
//! hash-chained ledger row and the number's state upserted. The daemon/ledger-floor ratio
//! is the daemon's own overhead; the gap between the floors is the promise's cost.
//!
//! How to read it: `deliveries/s` is completed requests over wall time; `p50`/`p99` are
//! latency percentiles in milliseconds; `cpu us/req` is the CPU time of the whole process
//! (client, server, SQLite, worker; not the PostgreSQL server's) per request, which bounds
//! throughput on a small machine whatever the disk does; `server us/req` is the PostgreSQL
//! server's CPU time per request (its postmaster and every backend, read from `/proc`) when
//! the server runs on this machine and the bench can read its data directory's
//! `postmaster.pid`, else `NaN`: on a small machine the server shares the cores with the
//! daemon, so its work per delivery bounds throughput too; the ratios compare throughputs at
//! the same concurrency (daemon/no-op, floor/no-op, ledger/floor, daemon/floor,
//! daemon/ledger). The disk and load lines at the top say how noisy the machine was.
//! Targets, at concurrency 64, of the median round (by daemon/ledger floor): daemon/floor
//! at least 0.90 on SQLite and 0.70 on PostgreSQL; daemon/ledger floor at least 0.90 on
//! SQLite. The verdict is printed, never turned into a failure. The last lines check that
//! the outbox holds exactly as many rows as `accepted` answers were given.
//!
//! Run: `cargo bench --bench ingest`; `BENCH_QUICK=1` runs a tiny version (smoke test);
//! `BENCH_REQUESTS=N` times N requests per level instead of 5,000 (steadier figures);
//! `BENCH_ROUNDS=N` measures floor and daemon N times per level instead of 3;
//! `BENCH_CONCURRENCY=64` (a comma-separated list) measures only those levels;
//! `BENCH_POSTGRES_URL=postgres://USER@HOST:PORT/DB` runs on PostgreSQL (the URL's database
//! is only used to create and drop the bench's own);
//! `BENCH_POSTED=off` leaves out the posted sources' phases, all three kinds (a profile of
//! the webhooks alone; `BENCH_TWILIO=off`, its older name, does the same);
//! `BENCH_WORKER=off` starts the daemon without its worker (`Application::without_worker`),
//! to measure the ingest path alone: the outbox is left unapplied and nothing is waited for
//! after a level (the durability check still counts the outbox's rows);
//! `BENCH_ACCOUNTS=N` configures the daemon with N `[[account]]` sections instead of the
//! default account, each on its own path (`/webhooks/benchK`) with its own secret, and
//! spreads the same load over them in turn, each delivery signed with its account's secret
//! (the no-op and the floor serve the same paths, the floor verifying each with its
//! account's secret).
//! No tracing subscriber is installed, so logging costs (almost) nothing.
//!
//! Beside the service's webhooks, in every round right after the daemon's own, the same
//! daemon's posted sources, one `[[source]]` of each kind in the same settings, each phase in
//! turn: Twilio (`POST /sources/twilio-bench`), form-encoded posts as Twilio's messaging
//! webhook sends them, each with its own `MessageSid`, signed in `X-Twilio-Signature`
//! (HMAC-SHA1 computed here with the `hmac` and `sha1` crates); Telnyx
//! (`/sources/telnyx-bench`), a `message.received` event as Telnyx's messaging webhook posts
//! it, each with its own event id, serialized once and signed with Ed25519 over
//! `{telnyx-timestamp}|{body}` under the sandbox's test key, at the time it is prepared
//! (`telnyx-signature-ed25519`, `telnyx-timestamp`); Bandwidth (`/sources/bandwidth-bench`),
//! a JSON array of one `message-received` callback as a Bandwidth application's inbound
//! callback posts it, each with its own message id, with the sandbox's callback credentials
//! in `Authorization: Basic`. Each post is a `STOP` from a number of its own (a real opt-out
//! recorded, as each consent webhook records one), prepared right before its phase, before
//! the timed section, and apart from the daemon's verifiers: the Telnyx events, their
//! signatures and the Bandwidth callbacks are the sandbox's own senders'
//! (`outreach_sync_sandbox::{telnyx, bandwidth}`, a dev-dependency). A Telnyx post is sent at most
//! the rest of its phase's preparation and the phase's two windows (5 s each) after it is
//! signed: seconds, far within the source's tolerance of 300 s, which the bench leaves as
//! it is. The phases run at the same concurrency and durability as the webhooks, each half
//! as many as the webhooks (and half their warm-up and time window), then waited for as the
//! webhooks are. Printed after the webhooks' figures, for each kind: posts/s and
//! KIND/webhooks (the daemon's webhooks of the same round) for every round, their median at
//! each concurrency (judged at the target's), and the outbox rows and ledger entries the
//! posts became. The webhooks' own check leaves the posted sources' rows out.

mod common;
#[path = "ingest/floor.rs"]
mod floor;
#[path = "ingest/posted.rs"]
mod posted;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::post;
use bytes::Bytes;
use common::{BenchDatabase, fetch_row, outbox_states};
use floor::{Floor, FloorStore};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use outreach_sync::app::Application;
use outreach_sync::settings::{Schedule, Settings, Synchronous};
use outreach_sync::signature::{Key, SignatureFormat, sign};
use outreach_sync::store::Pool;
use posted::PostedKind;
use secrecy::{ExposeSecret as _, SecretString};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "bench-secret-0123";
const CONCURRENCY: [usize; 4] = [1, 16, 64, 256];
/// The concurrency at which the target applies.
const TARGET_CONCURRENCY: usize = 64;
/// The share of the bare floor the daemon should reach at [`TARGET_CONCURRENCY`], per
/// backend.
const FLOOR_TARGET_SQLITE: f64 = 0.9;
const FLOOR_TARGET_POSTGRES: f64 = 0.7;
/// The share of the ledger floor the daemon should reach on SQLite: what is left of the gap
/// is the daemon's own overhead, not the cost of its promise.
const LEDGER_TARGET_SQLITE: f64 = 0.9;
/// Longest untimed wait for the worker to apply a level's deliveries.
const CATCH_UP_CAP: Duration = Duration::from_secs(300);
/// A posted source's phase is this share of the webhooks' requests, warm-up and time window.
const POSTED_SHARE: usize = 2;

/// How much work each level does.
struct Plan {
    warmup: usize,
    requests: usize,
    /// Floor and daemon are measured this many times in turn per level; the table shows
    /// the round whose daemon/floor ratio is the median.
    rounds: usize,
    /// A level stops early when this much time has passed (slow disks).
    window: Duration,
}

impl Plan {
    fn from_env() -> (Self, bool) {
        let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let plan = if quick {
            Plan {
                warmup: 20,
                requests: 200,
                rounds: 1,
                window: Duration::from_secs(2),
            }
        } else {
            Plan {
                warmup: 300,
                requests: std::env::var("BENCH_REQUESTS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(5_000),
                rounds: std::env::var("BENCH_ROUNDS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .unwrap_or(3),
                window: Duration::from_secs(10),
            }
        };
        (plan, quick)
    }
}

/// One pre-signed request.
#[derive(Clone)]
struct Prepared {
    /// Which account's path it is posted to (an index into the targets' URLs).
    account: usize,
    body: Bytes,
    headers: HeaderMap,
}

/// What one level of one target produced.
struct Measured {
    completed: usize,
    accepted: usize,
    other: usize,
    elapsed: Duration,
    /// CPU time of the whole process (client, server, SQLite) over the timed section.
    cpu: Option<Duration>,
    /// CPU time of the PostgreSQL server over the timed section, when it runs on this
    /// machine and its processes can be read.
    server_cpu: Option<Duration>,
    latencies: Vec<Duration>,
}

/// One concurrency level of the three targets.
struct Level {
    concurrency: usize,
    noop: Measured,
    /// The median round's floors and daemon (see [`Plan::rounds`]).
    floor: Measured,
    ledger: Measured,
    daemon: Measured,
    /// `None` when the daemon runs without its worker (`BENCH_WORKER=off`).
    worker: Option<CatchUp>,
    /// daemon/floor and daemon/ledger floor of every round, in the order run.
    ratios: Vec<(f64, f64)>,
    /// The posted sources' phases of every round, in the order run, beside the daemon's
    /// webhooks of that round.
    posted: Vec<PostedRound>,
}

/// One round's posts to one posted source, and the daemon's webhooks of the same round.
struct PostedRound {
    kind: PostedKind,
    posts: Measured,
    /// The daemon's webhook deliveries per second in the same round.
    webhooks: f64,
    /// `None` without the worker.
    worker: Option<CatchUp>,
}

/// How far the daemon's worker was behind its ingest when a level ended.
struct CatchUp {
    /// Deliveries accepted but not yet applied when the last answer came.
    behind: i64,
    /// Still not applied when the bench stopped waiting ([`CATCH_UP_CAP`]).
    left: i64,
    /// Time from the last answer until nothing was pending.
    took: Duration,
}

impl Measured {
    /// Process CPU microseconds per completed request.
    fn cpu_us_per_request(&self) -> f64 {
        self.per_request(self.cpu)
    }

    /// The PostgreSQL server's CPU microseconds per completed request.
    fn server_cpu_us_per_request(&self) -> f64 {
        self.per_request(self.server_cpu)
    }

    fn per_request(&self, cpu: Option<Duration>) -> f64 {
        cpu.map_or(f64::NAN, |cpu| {
            cpu.as_secs_f64() * 1e6 / self.completed as f64
        })
    }

    fn per_second(&self) -> f64 {
        self.completed as f64 / self.elapsed.as_secs_f64()
    }

    /// The `q` quantile (nearest rank) in milliseconds; `latencies` is sorted.
    fn quantile_ms(&self, q: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        let rank =
            ((q * self.latencies.len() as f64).ceil() as usize).clamp(1, self.latencies.len());
        self.latencies[rank - 1].as_secs_f64() * 1e3
    }
}

fn main() -> anyhow::Result<()> {
    let (plan, quick) = Plan::from_env();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(plan, quick))
}

async fn run(plan: Plan, quick: bool) -> anyhow::Result<()> {
    let database = BenchDatabase::create("bench.db").await?;
    let dir = database.dir.path();
    let accounts: usize = std::env::var("BENCH_ACCOUNTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let settings = bench_settings(&database.url, dir, accounts)?;
    // Each account served: its ingest path, and how its deliveries are signed.
    let served = settings.accounts()?;
    let paths: Vec<&str> = served
        .iter()
        .map(|account| account.ingest_path.as_str())
        .collect();
    let urls = |addr: SocketAddr| -> Vec<String> {
        paths
            .iter()
            .map(|path| format!("http://{addr}{path}"))
            .collect()
    };
    let with_worker = std::env::var("BENCH_WORKER").as_deref() != Ok("off");
    // The posted sources' phases, unless left out (`BENCH_TWILIO`: the switch's older name).
    let off = |name: &str| std::env::var(name).as_deref() == Ok("off");
    let kinds: Vec<PostedKind> = if off("BENCH_POSTED") || off("BENCH_TWILIO") {
        Vec::new()
    } else {
        PostedKind::ALL.to_vec()
    };
    let app = Application::build(settings.clone()).await?;
    let app = if with_worker {
        app
    } else {
        app.without_worker()
    };
    // The bench's own look at the daemon's database (the backlog, the final count).
    let pool = outreach_sync::store::open(&settings).await?;
    let app_ingest_addr = app.ingest_addr();
    let daemon_urls = urls(app_ingest_addr);
    let shutdown = CancellationToken::new();
    let daemon = tokio::spawn(app.run_until_stopped(shutdown.clone()));
    let noop_urls = urls(spawn_noop(&paths, shutdown.clone()).await?);
    let store = FloorStore::open(&database, &settings, Floor::Bare).await?;
    let floor_urls = urls(floor::spawn(&served, store, shutdown.clone()).await?);
    let store = FloorStore::open(&database, &settings, Floor::Ledger).await?;
    let ledger_urls = urls(floor::spawn(&served, store, shutdown.clone()).await?);

    let levels: Vec<usize> = match std::env::var("BENCH_CONCURRENCY") {
        Ok(list) => list
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .expect("BENCH_CONCURRENCY: comma-separated numbers")
            })
            .collect(),
        Err(_) => CONCURRENCY.to_vec(),
    };
    let max_concurrency = levels.iter().copied().max().unwrap_or(1);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(max_concurrency * 2)
        .tcp_nodelay(true)
        .no_proxy()
        .build()?;

    println!(
        "ingest bench on {}{}{}{}: {} requests per level (+{} warm-up, {}s cap), floor, ledger floor and daemon {} times each, {}",
        database.backend(),
        if quick { " (BENCH_QUICK)" } else { "" },
        if with_worker {
            ""
        } else {
            " (BENCH_WORKER=off: no worker)"
        },
        if accounts > 0 {
            format!(" (BENCH_ACCOUNTS: spread over {})", paths.join(", "))
        } else {
            String::new()
        },
        plan.requests,
        plan.warmup,
        plan.window.as_secs(),
        plan.rounds,
        database.describe(&pool).await?,
    );
    let (append, overwrite) = fsync_probe(dir)?;
    println!(
        "disk: 4 KiB write + fdatasync, median {append:.2} ms appending, {overwrite:.2} ms overwriting"
    );
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let load: Vec<&str> = load.split_whitespace().take(3).collect();
        println!(
            "machine: {} CPUs, load average {} (other work on the machine skews every figure)",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            load.join(" ")
        );
    }
    println!();

    if let Some(server) = LocalServer::find(&pool).await {
        let _ = SERVER.set(server);
    }
    let signers: Vec<(SignatureFormat, Key)> = served
        .iter()
        .map(|account| {
            let format = SignatureFormat::from(&account.webhook);
            let secret = account.webhook.secrets[0].expose_secret();
            let key =
                Key::for_scheme(format.scheme, secret).expect("the bench secret is a valid key");
            (format, key)
        })
        .collect();
    let posted_urls: Vec<String> = PostedKind::ALL
        .iter()
        .map(|kind| kind.url(app_ingest_addr))
        .collect();
    let mut rows = Vec::new();
    let mut accepted_total = 0;
    // Each kind's posts' 200 answers (warm-ups included), and the next sender's number.
    let mut posted_accepted = [0; PostedKind::ALL.len()];
    let mut next_number: u64 = 0;
    // How long the bench spent on each kind (preparing, posting, waiting for the worker).
    let (began, mut posted_time) = (Instant::now(), [Duration::ZERO; PostedKind::ALL.len()]);
    for (level, &concurrency) in levels.iter().enumerate() {
        let sign_batch = |what: &str, n: usize| -> Vec<Prepared> {
            (0..n)
                .map(|i| {
                    let account = i % signers.len();
                    let (format, key) = &signers[account];
                    prepare(
                        account,
                        format,
                        key,
                        &format!("evt_bench_{level}_{what}_{i}"),
                    )
                })
                .collect()
        };
        // Each post a reply of its own: its own id, a STOP from a number of its own.
        let mut prepare_posts = |kind: PostedKind, what: &str, n: usize| -> Vec<Prepared> {
            (0..n)
                .map(|i| {
                    let number = next_number;
                    next_number += 1;
                    kind.prepare(&format!("bench{level}{what}x{i}"), number)
                })
                .collect()
        };
        let (warmup, timed) = (sign_batch("w", plan.warmup), sign_batch("t", plan.requests));
        drive(&client, &noop_urls, concurrency, warmup, plan.window).await;
        let noop = drive(&client, &noop_urls, concurrency, timed, plan.window).await;

        // Floor and daemon in turn, so that a slow spell of the machine falls on both.
        let mut rounds = Vec::with_capacity(plan.rounds);
        let mut posted = Vec::with_capacity(plan.rounds * kinds.len());
        for round in 0..plan.rounds {
            let (warmup, timed) = (
                sign_batch(&format!("w{round}"), plan.warmup),
                sign_batch(&format!("t{round}"), plan.requests),
            );
            drive(
                &client,
                &floor_urls,
                concurrency,
                warmup.clone(),
                plan.window,
            )
            .await;
            let floor = drive(
                &client,
                &floor_urls,
                concurrency,
                timed.clone(),
                plan.window,
            )
            .await;
            drive(
                &client,
                &ledger_urls,
                concurrency,
                warmup.clone(),
                plan.window,
            )
            .await;
            let ledger = drive(
                &client,
                &ledger_urls,
                concurrency,
                timed.clone(),
                plan.window,
            )
            .await;
            let warm = drive(&client, &daemon_urls, concurrency, warmup, plan.window).await;
            let live = drive(&client, &daemon_urls, concurrency, timed, plan.window).await;
            accepted_total += warm.accepted + live.accepted;
            let worker = if with_worker {
                Some(catch_up(&pool).await?)
            } else {
                None
            };
            // Each posted source of the same daemon in turn, right after its webhooks.
            for &kind in &kinds {
                let phase_began = Instant::now();
                let (warmup, timed) = (
                    prepare_posts(kind, &format!("w{round}"), plan.warmup / POSTED_SHARE),
                    prepare_posts(kind, &format!("t{round}"), plan.requests / POSTED_SHARE),
                );
                let url = std::slice::from_ref(&posted_urls[kind as usize]);
                let window = plan.window / POSTED_SHARE as u32;
                let warm = drive(&client, url, concurrency, warmup, window).await;
                let posts = drive(&client, url, concurrency, timed, window).await;
                posted_accepted[kind as usize] += warm.accepted + posts.accepted;
                posted.push(PostedRound {
                    kind,
                    webhooks: live.per_second(),
                    posts,
                    worker: if with_worker {
                        Some(catch_up(&pool).await?)
                    } else {
                        None
                    },
                });
                posted_time[kind as usize] += phase_began.elapsed();
            }
            rounds.push((floor, ledger, live, worker));
        }
        let ratios: Vec<(f64, f64)> = rounds
            .iter()
            .map(|(floor, ledger, daemon, _)| {
                (
                    daemon.per_second() / floor.per_second(),
                    daemon.per_second() / ledger.per_second(),
                )
            })
            .collect();
        // The median round by daemon/ledger floor, the figure the target is on.
        let mut order: Vec<usize> = (0..rounds.len()).collect();
        order.sort_by(|&a, &b| ratios[a].1.total_cmp(&ratios[b].1));
        let (floor, ledger, daemon, worker) = rounds.swap_remove(order[order.len() / 2]);
        rows.push(Level {
            concurrency,
            noop,
            floor,
            ledger,
            daemon,
            worker,
            ratios,
            posted,
        });
    }

    print_table(&rows, &plan, quick, &database);
    if !kinds.is_empty() {
        for &kind in &kinds {
            print_posted(&rows, &plan, kind);
        }
        let total = began.elapsed().as_secs_f64();
        let spent: Vec<String> = kinds
            .iter()
            .map(|&kind| {
                let time = posted_time[kind as usize].as_secs_f64();
                format!("{} {time:.1} s ({:.0}%)", kind.name(), 100.0 * time / total)
            })
            .collect();
        println!(
            "posted phases: {} of the levels' {total:.1} s",
            spent.join(", ")
        );
        println!();
    }

    shutdown.cancel();
    daemon.await??;
    // The webhooks' rows apart from the posted sources' (`KIND:NAME:ID`).
    let (mut outbox, mut applied, _, _) = outbox_states(&pool).await?;
    let mut posted_lines = Vec::new();
    for kind in PostedKind::ALL {
        let (posted, posted_applied, line) =
            posted_check(&pool, kind, posted_accepted[kind as usize]).await?;
        (outbox, applied) = (outbox - posted, applied - posted_applied);
        if kinds.contains(&kind) {
            posted_lines.push(line);
        }
    }
    let not_posted: String = PostedKind::ALL
        .iter()
        .map(|kind| format!(" AND dedup_key NOT LIKE '{}:%'", kind.name()))
        .collect();
    let mut by_account = Vec::new();
    if accounts > 0 {
        for account in &served {
            let name = &account.id;
            let sql =
                format!("SELECT COUNT(*) FROM outbox WHERE account_id = '{name}'{not_posted}");
            let (n,): (i64,) = fetch_row(&pool, &sql).await?;
            by_account.push(format!("{name} {n}"));
        }
    }
    pool.close().await;
    let consistent = usize::try_from(outbox).is_ok_and(|n| n == accepted_total);
    println!(
        "durability check: {outbox} outbox rows after stop ({applied} applied by the daemon), {accepted_total} `accepted` answers (warm-ups included): {}",
        if consistent { "EQUAL" } else { "MISMATCH" }
    );
    if !by_account.is_empty() {
        println!("outbox rows by account: {}", by_account.join(", "));
    }
    for line in posted_lines {
        println!("{line}");
    }
    Ok(())
}

/// A posted source's outbox rows (all, applied) and the line comparing them with the
/// `accepted` answers, and the opt-outs they recorded.
async fn posted_check(
    pool: &Pool,
    kind: PostedKind,
    accepted: usize,
) -> anyhow::Result<(i64, i64, String)> {
    let name = kind.name();
    let (posted, applied, quarantined): (i64, i64, i64) = fetch_row(
        pool,
        &format!(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE state = 'applied'),
                    COUNT(*) FILTER (WHERE state = 'quarantined')
             FROM outbox WHERE dedup_key LIKE '{name}:%'"
        ),
    )
    .await?;
    let (entries, numbers): (i64, i64) = fetch_row(
        pool,
        &format!(
            "SELECT COUNT(*), COUNT(DISTINCT phone_number) FROM ledger
             WHERE source = '{name}' AND opted_out"
        ),
    )
    .await?;
    let consistent = usize::try_from(posted).is_ok_and(|n| n == accepted);
    let line = format!(
        "{name} durability check: {posted} outbox rows of {} after stop ({applied} applied, {quarantined} quarantined), {accepted} `200 {}` answers (warm-ups included): {}; {entries} opt-out ledger entries of source {name} over {numbers} numbers",
        kind.source(),
        kind.answer(),
        if consistent { "EQUAL" } else { "MISMATCH" }
    );
    Ok((posted, applied, line))
}

/// How far behind the worker was at a round's end, and how soon it caught up.
fn worker_said(worker: &Option<CatchUp>) -> String {
    match *worker {
        None => "no worker".to_owned(),
        Some(CatchUp { behind, left, took }) if left > 0 => {
            format!(
                "{behind} behind, {left} pending after {:.2} s",
                took.as_secs_f64()
            )
        }
        Some(CatchUp { behind, took, .. }) => {
            format!("{behind} behind, applied {:.2} s later", took.as_secs_f64())
        }
    }
}

/// A level's rounds of posts to `kind`'s source, in the order run.
fn rounds_of(level: &Level, kind: PostedKind) -> impl Iterator<Item = &PostedRound> {
    level.posted.iter().filter(move |round| round.kind == kind)
}

/// The median of a level's rounds of `kind`'s posts/s over the same round's webhooks/s.
fn posted_median(level: &Level, kind: PostedKind) -> Option<f64> {
    let mut ratios: Vec<f64> = rounds_of(level, kind)
        .map(|round| round.posts.per_second() / round.webhooks)
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios.get(ratios.len() / 2).copied()
}

/// A posted source's posts of every round beside the daemon's webhooks of the same round.
fn print_posted(rows: &[Level], plan: &Plan, kind: PostedKind) {
    let name = kind.name();
    println!(
        "{name} source (POST /sources/{}, {} and a number of its own), {} posts per round (+{} warm-up, {:.0}s cap), right after the same round's webhooks:",
        kind.source(),
        kind.posts(),
        plan.requests / POSTED_SHARE,
        plan.warmup / POSTED_SHARE,
        (plan.window / POSTED_SHARE as u32).as_secs_f64()
    );
    println!(
        "{:>5}  {:>5} {:>8} {:>9} {:>10} {:>9} {:>9} {:>12} {:>14} {:>19}",
        "conc",
        "round",
        "done",
        "non-200",
        "posts/s",
        "p50 ms",
        "p99 ms",
        "cpu us/req",
        "webhooks/s",
        format!("{name}/webhooks")
    );
    for level in rows {
        for (round, phase) in rounds_of(level, kind).enumerate() {
            let posts = &phase.posts;
            let capped = if posts.completed < plan.requests / POSTED_SHARE {
                "  (stopped by the time window)"
            } else {
                ""
            };
            println!(
                "{:>5}  {:>5} {:>8} {:>9} {:>10.0} {:>9.2} {:>9.2} {:>12.0} {:>14.0} {:>19.2}{capped}",
                level.concurrency,
                round + 1,
                posts.completed,
                posts.other,
                posts.per_second(),
                posts.quantile_ms(0.50),
                posts.quantile_ms(0.99),
                posts.cpu_us_per_request(),
                phase.webhooks,
                posts.per_second() / phase.webhooks
            );
        }
    }
    println!();
    println!(
        "{name}/webhooks, median of the rounds, and the worker behind the posts at the end of each round:"
    );
    for level in rows {
        let median = posted_median(level, kind).unwrap_or(f64::NAN);
        let behind: Vec<String> = rounds_of(level, kind)
            .map(|phase| worker_said(&phase.worker))
            .collect();
        println!(
            "  c={:<4} {median:>6.2}   {}",
            level.concurrency,
            behind.join("; ")
        );
    }
    // The target: the same order as the webhooks (at least a tenth), at the same
    // concurrency and durability.
    if let Some(level) = rows.iter().find(|l| l.concurrency == TARGET_CONCURRENCY)
        && let Some(median) = posted_median(level, kind)
    {
        println!(
            "{} {}: at concurrency {TARGET_CONCURRENCY} the {name} source takes {median:.2}x the webhooks' deliveries/s (median round; the same order: >= 0.10x)",
            name.to_uppercase(),
            if median >= 0.1 { "MET" } else { "NOT MET" }
        );
    }
    let bad: usize = rows
        .iter()
        .flat_map(|level| rounds_of(level, kind))
        .map(|phase| phase.posts.other)
        .sum();
    if bad > 0 {
        println!(
            "WARNING: {bad} {name} answers were not `200 {}`",
            kind.answer()
        );
    }
    println!();
}

/// The daemon's settings: the fresh database at `url`, port 0, one secret, every commit
/// fsynced, and a backlog limit no run can reach (the worker may fall behind), so no 503.
/// With `accounts` > 0, that many `[[account]]` sections instead of the default account,
/// written to a file in `dir` and read as the daemon reads its file, each with a secret of
/// its own, and no reconciliation (an account's keys would start a pass against its
/// `base_url`, which answers nothing here).
fn bench_settings(url: &str, dir: &std::path::Path, accounts: usize) -> anyhow::Result<Settings> {
    let mut settings = if accounts > 0 {
        let file = dir.join("accounts.toml");
        let sections: String = (1..=accounts)
            .map(|n| {
                format!(
                    "[[account]]\nname = \"bench{n}\"\nbase_url = \"http://127.0.0.1:9\"\nclient_id = \"bench{n}@example.org\"\nclient_secret = \"bench-client-secret-{n}\"\n[account.webhook]\nsecrets = [\"{SECRET}-{n}\"]\n\n"
                )
            })
            .collect();
        std::fs::write(&file, sections)?;
        let mut settings = Settings::load_unvalidated(Some(&file), &[])?;
        settings.reconcile.on_start = false;
        settings.reconcile.schedule = Schedule::from("");
        settings
    } else {
        let mut settings = Settings::default();
        settings.webhook.secrets = vec![SecretString::from(SECRET)];
        settings
    };
    settings.database.url = url.to_owned();
    settings.database.synchronous = Synchronous::Full;
    settings.ingest.bind = "127.0.0.1:0".into();
    settings.ingest.max_backlog = 10_000_000;
    settings.admin.bind = "127.0.0.1:0".into();
    settings
        .source
        .extend(PostedKind::ALL.map(PostedKind::settings));
    settings.validate()?;
    Ok(settings)
}

/// Serves a baseline on a loopback port of its own until `shutdown`, the same way as the
/// daemon's listener.
async fn serve_baseline(router: Router, shutdown: CancellationToken) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await
    });
    Ok(addr)
}

/// The ceiling: a POST handler on each of `paths` that reads the body and answers a small
/// JSON 200.
async fn spawn_noop(paths: &[&str], shutdown: CancellationToken) -> anyhow::Result<SocketAddr> {
    async fn noop(body: Bytes) -> axum::Json<serde_json::Value> {
        axum::Json(serde_json::json!({"status": "accepted", "id": body.len()}))
    }
    let router = paths
        .iter()
        .fold(Router::new(), |router, path| router.route(path, post(noop)));
    serve_baseline(router, shutdown).await
}

/// A consent event with its own `id`, signed as a sender would sign it.
fn prepare(account: usize, format: &SignatureFormat, key: &Key, id: &str) -> Prepared {
    let body = serde_json::json!({
        "type": "consentUpdate-v1",
        "id": id,
        "createdAt": "2026-11-21T10:00:00Z",
        "data": {"organizationId": "org_1", "phoneNumber": "+15550001111", "globalOptedOut": true}
    })
    .to_string();
    let now = chrono::Utc::now().timestamp();
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for (name, value) in sign(format, key, body.as_bytes(), now, None) {
        headers.insert(
            HeaderName::try_from(name).expect("header name"),
            HeaderValue::try_from(value).expect("header value"),
        );
    }
    Prepared {
        account,
        body: Bytes::from(body),
        headers,
    }
}

/// Sends `work` from `concurrency` tasks sharing one counter, each request to its
/// account's URL in `urls`, until all is sent or `window` has passed.
async fn drive(
    client: &reqwest::Client,
    urls: &[String],
    concurrency: usize,
    work: Vec<Prepared>,
    window: Duration,
) -> Measured {
    let work = Arc::new(work);
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_before = process_cpu();
    let server_before = SERVER.get().and_then(|server| server.cpu());
    let start = Instant::now();
    let deadline = start + window;
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, urls, work, next) =
                (client.clone(), urls.to_vec(), work.clone(), next.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(work.len() / concurrency + 1);
                let (mut accepted, mut other) = (0, 0);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= work.len() || Instant::now() >= deadline {
                        break;
                    }
                    let request = &work[i];
                    let sent = Instant::now();
                    let response = client
                        .post(&urls[request.account])
                        .headers(request.headers.clone())
                        .body(request.body.clone())
                        .send()
                        .await
                        .expect("loopback request");
                    let status = response.status();
                    let body = response.bytes().await.expect("response body");
                    latencies.push(sent.elapsed());
                    // A posted source's posts are answered with its own answer once durable.
                    let taken = contains(&body, b"\"accepted\"")
                        || PostedKind::ALL
                            .iter()
                            .any(|kind| body == kind.answer().as_bytes());
                    if status == StatusCode::OK && taken {
                        accepted += 1;
                    } else {
                        other += 1;
                    }
                }
                (latencies, accepted, other)
            })
        })
        .collect();
    let mut measured = Measured {
        completed: 0,
        accepted: 0,
        other: 0,
        elapsed: Duration::ZERO,
        cpu: None,
        server_cpu: None,
        latencies: Vec::with_capacity(work.len()),
    };
    for task in tasks {
        let (latencies, accepted, other) = task.await.expect("bench task");
        measured.latencies.extend(latencies);
        measured.accepted += accepted;
        measured.other += other;
    }
    measured.elapsed = start.elapsed();
    measured.cpu = process_cpu()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    measured.server_cpu = SERVER
        .get()
        .and_then(|server| server.cpu())
        .zip(server_before)
        .map(|(after, before)| after.saturating_sub(before));
    measured.completed = measured.latencies.len();
    measured.latencies.sort_unstable();
    measured
}

/// User + system CPU time of this process so far, all threads (Linux; 10 ms ticks).
fn process_cpu() -> Option<Duration> {
    let stat = ProcStat::read("self")?;
    Some(ticks(stat.user + stat.system))
}

/// Clock ticks to time (Linux's `USER_HZ`).
fn ticks(n: u64) -> Duration {
    const TICKS_PER_SECOND: u64 = 100;
    Duration::from_millis(n * 1000 / TICKS_PER_SECOND)
}

/// The fields of `/proc/PID/stat` the bench reads.
struct ProcStat {
    parent: u32,
    user: u64,
    system: u64,
    /// CPU time of the children it has reaped.
    children: u64,
}

impl ProcStat {
    fn read(pid: &str) -> Option<Self> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The fields after the parenthesised command name, from the 3rd (state) on.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
        Some(Self {
            parent: u32::try_from(field(4)?).ok()?,
            user: field(14)?,
            system: field(15)?,
            children: field(16)? + field(17)?,
        })
    }
}

/// The PostgreSQL server under the bench, when it runs on this machine: its postmaster.
static SERVER: std::sync::OnceLock<LocalServer> = std::sync::OnceLock::new();

struct LocalServer {
    postmaster: u32,
}

impl LocalServer {
    /// The postmaster of the server `pool` talks to, found by its data directory's
    /// `postmaster.pid`; `None` for a server elsewhere or out of reach.
    async fn find(pool: &Pool) -> Option<Self> {
        let Pool::Postgres(pool) = pool else {
            return None;
        };
        let (directory,): (String,) = sqlx::query_as("SELECT current_setting('data_directory')")
            .fetch_one(pool)
            .await
            .ok()?;
        let pid = std::fs::read_to_string(format!("{directory}/postmaster.pid")).ok()?;
        let postmaster: u32 = pid.lines().next()?.trim().parse().ok()?;
        let server = Self { postmaster };
        server.cpu().map(|_| server)
    }

    /// CPU time of the postmaster, its live children and the children it has reaped.
    fn cpu(&self) -> Option<Duration> {
        let postmaster = ProcStat::read(&self.postmaster.to_string())?;
        let mut total = postmaster.user + postmaster.system + postmaster.children;
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
            else {
                continue;
            };
            if let Some(child) = ProcStat::read(pid).filter(|s| s.parent == self.postmaster) {
                total += child.user + child.system;
            }
        }
        Some(ticks(total))
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Waits (untimed) until the daemon's worker has applied every accepted delivery, or
/// [`CATCH_UP_CAP`] has passed.
async fn catch_up(pool: &Pool) -> Result<CatchUp, sqlx::Error> {
    async fn pending(pool: &Pool) -> Result<i64, sqlx::Error> {
        let (n,): (i64,) =
            fetch_row(pool, "SELECT COUNT(*) FROM outbox WHERE state = 'pending'").await?;
        Ok(n)
    }
    let start = Instant::now();
    let behind = pending(pool).await?;
    let mut left = behind;
    while left > 0 && start.elapsed() < CATCH_UP_CAP {
        tokio::time::sleep(Duration::from_millis(10)).await;
        left = pending(pool).await?;
    }
    Ok(CatchUp {
        behind,
        left,
        took: start.elapsed(),
    })
}

fn print_table(rows: &[Level], plan: &Plan, quick: bool, database: &BenchDatabase) {
    println!(
        "{:>5}  {:<7} {:>8} {:>9} {:>14} {:>9} {:>9} {:>12} {:>15}",
        "conc",
        "target",
        "done",
        "non-200",
        "deliveries/s",
        "p50 ms",
        "p99 ms",
        "cpu us/req",
        "server us/req"
    );
    for level in rows {
        for (name, m) in [
            ("no-op", &level.noop),
            ("floor", &level.floor),
            ("ledger", &level.ledger),
            ("daemon", &level.daemon),
        ] {
            println!(
                "{:>5}  {:<7} {:>8} {:>9} {:>14.0} {:>9.2} {:>9.2} {:>12.0} {:>15.0}",
                level.concurrency,
                name,
                m.completed,
                m.other,
                m.per_second(),
                m.quantile_ms(0.50),
                m.quantile_ms(0.99),
                m.cpu_us_per_request(),
                m.server_cpu_us_per_request(),
            );
        }
    }
    println!();
    println!(
        "throughput ratios:     daemon/no-op   floor/no-op   ledger/floor   daemon/floor   daemon/ledger"
    );
    for level in rows {
        let (noop, floor, ledger, daemon) = (
            level.noop.per_second(),
            level.floor.per_second(),
            level.ledger.per_second(),
            level.daemon.per_second(),
        );
        let capped = if level.daemon.completed < plan.requests {
            "  (stopped by the time window)"
        } else {
            ""
        };
        println!(
            "  c={:<4} {:>24.2} {:>13.2} {:>14.2} {:>14.2} {:>15.2}{capped}",
            level.concurrency,
            daemon / noop,
            floor / noop,
            ledger / floor,
            daemon / floor,
            daemon / ledger
        );
    }
    if plan.rounds > 1 {
        println!();
        println!(
            "daemon/floor and daemon/ledger floor in each of {} rounds (floor, ledger floor and daemon in turn; the table shows the median round by daemon/ledger floor):",
            plan.rounds
        );
        for level in rows {
            let ratios: Vec<String> = level
                .ratios
                .iter()
                .map(|(floor, ledger)| format!("{floor:.2}/{ledger:.2}"))
                .collect();
            println!("  c={:<4} {}", level.concurrency, ratios.join("  "));
        }
    }
    println!();
    println!("worker behind ingest at the end of each level (waited for, untimed):");
    for level in rows {
        let Some(CatchUp { behind, left, took }) = level.worker else {
            println!(
                "  c={:<4} no worker (BENCH_WORKER=off): the outbox is left unapplied",
                level.concurrency
            );
            continue;
        };
        let outcome = if left > 0 {
            format!("{left} still pending after {:.2} s", took.as_secs_f64())
        } else {
            format!("all applied {:.2} s later", took.as_secs_f64())
        };
        println!(
            "  c={:<4} {behind:>8} deliveries pending, {outcome}",
            level.concurrency
        );
    }
    println!();
    print_verdicts(rows, quick, database);
    let bad: usize = rows.iter().map(|level| level.daemon.other).sum();
    if bad > 0 {
        println!("WARNING: {bad} daemon answers were not `200 accepted`");
    }
    println!();
}

/// The target at [`TARGET_CONCURRENCY`]: the daemon's share of the floor (it replaced an
/// older share of the no-op ceiling, which the floor itself does not reach on a small
/// machine). The share is cut, not rounded, so that a miss never prints as the target.
fn print_verdicts(rows: &[Level], quick: bool, database: &BenchDatabase) {
    let Some(level) = rows
        .iter()
        .find(|level| level.concurrency == TARGET_CONCURRENCY)
    else {
        println!("TARGET: concurrency {TARGET_CONCURRENCY} was not measured");
        return;
    };
    if quick {
        println!("TARGET: no verdict from a BENCH_QUICK run (too short)");
        return;
    }
    let target = if database.is_postgres() {
        FLOOR_TARGET_POSTGRES
    } else {
        FLOOR_TARGET_SQLITE
    };
    let verdict = |what: &str, ratio: f64, target: f64| {
        let met = ratio >= target;
        println!(
            "TARGET {}: at concurrency {TARGET_CONCURRENCY} the daemon reaches {:.1}% of the {what} on {} ({} {:.0}%)",
            if met { "MET" } else { "NOT MET" },
            (ratio * 1000.0).floor() / 10.0,
            database.backend(),
            if met { ">=" } else { "<" },
            target * 100.0
        );
    };
    verdict(
        "floor",
        level.daemon.per_second() / level.floor.per_second(),
        target,
    );
    let ledger = level.daemon.per_second() / level.ledger.per_second();
    if database.is_postgres() {
        println!(
            "daemon/ledger floor on {}: {:.2} (no target: not worse than before)",
            database.backend(),
            ledger
        );
    } else {
        verdict("ledger floor", ledger, LEDGER_TARGET_SQLITE);
    }
}

/// Median milliseconds to write 4 KiB and `fdatasync`, in `dir`: appending (the file grows,
/// as a young WAL does) and overwriting in place (a WAL reused after a checkpoint). One
/// durable commit costs at least this on this disk.
fn fsync_probe(dir: &std::path::Path) -> std::io::Result<(f64, f64)> {
    use std::io::{Seek as _, SeekFrom, Write as _};
    let path = dir.join("fsync-probe");
    let mut file = std::fs::File::create(&path)?;
    let block = [0u8; 4096];
    let mut median = |overwrite: bool| -> std::io::Result<f64> {
        let mut times = Vec::with_capacity(30);
        for _ in 0..30 {
            if overwrite {
                file.seek(SeekFrom::Start(0))?;
            }
            let start = Instant::now();
            file.write_all(&block)?;
            file.sync_data()?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    };
    let append = median(false)?;
    let overwrite = median(true)?;
    drop(file);
    std::fs::remove_file(path)?;
    Ok((append, overwrite))
}
