//! `cargo bench --bench attack`: the ingest listener of the release binary under the attack
//! suite's two floods and hostile posts to a Twilio source, then while the admin side makes
//! reports and takes a large import, on loopback, with signed deliveries flowing throughout.
//!
//! The daemon (`outreach-sync serve`, default limits, SQLite) runs as its own process; this
//! bench is the attacker, the service and an admin client at once. Per phase it prints the
//! acknowledgement latency of signed deliveries (each on a fresh connection) against the
//! same figure measured with no flood at the start of the run, the admin API's slowest
//! answer, and the daemon's resident memory (sampled every 50 ms) against its memory at rest.
//!
//! 1. **Connections**: 10,000 idle connections and 1,000 sending a head a byte every 5 s,
//!    from another address than the deliveries' (127.0.0.2) and from the same one
//!    (127.0.0.1); held as long as the daemon keeps them, then again each opened anew a
//!    second after the daemon closes it (a flood that never stops coming back).
//! 2. **Unsigned bodies**: 6,000 unsigned 1 MiB POSTs, 16 at a time; also the growth of the
//!    database files.
//! 3. **Hostile posts to a Twilio source**, right after, on the same daemon (its config file
//!    has one `[[source]]` of kind `twilio`, `twilio-bench`): as many posts as bodies above,
//!    16 at a time, to `/sources/twilio-bench`, five kinds in turn: a form of the most a
//!    source takes (64 KiB) unsigned (expected 403), an unsigned 1 MiB form (over it: 413),
//!    a 64 KiB form signed with the source's token for another URL (403), a reply signed for the source's
//!    URL then changed (another `From`: a replay; 403), and a reply signed for the source's
//!    URL with a parameter the record rests on given twice (200: kept, then quarantined).
//!    Their answers counted by status, the growth of the database files, the quarantined
//!    rows and the daemon's counts of source posts.
//! 4. **8 reports + a 256 MiB import during deliveries**: a second daemon, on a database of
//!    its own whose ledger the CLI's `import` seeded with 400,000 opt-outs before it started
//!    (the first daemon's figures stay those of an empty ledger). 8 clients ask for the
//!    compliance report since 2000-01-01 again and again, reading each body to its end
//!    (the daemon makes 2 at a time and answers the others 429; such a client waits
//!    200 ms), while one client uploads a 256 MiB opt-out list (generated as it is sent:
//!    20.6 million rows over 1,000,000 distinct numbers) to `POST /v1/consent/import`. The
//!    phase lasts until the import has answered, at least 20 s, at most 10 minutes. Also the
//!    reports made whole and refused, the import's answer and its duration.
//!
//! `BENCH_QUICK=1` makes it 2,000 + 200 connections, 600 bodies (and 600 hostile posts) and
//! 40,000 seeded opt-outs (the list uploaded is 256 MiB either way).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use outreach_sync::settings::WebhookSettings;
use outreach_sync::signature::{Key, SignatureFormat, sign};
use outreach_sync_sandbox::twilio::{inbound, signature as twilio_signature};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpSocket;

const BIN: &str = env!("CARGO_BIN_EXE_outreach-sync");
const SECRET: &str = "attack-bench-secret";
const TOKEN: &str = "bench:attack-bench-token";
/// The daemon's Twilio source, its auth token and the URL given at Twilio (what is signed).
const TWILIO_SOURCE: &str = "twilio-bench";
const TWILIO_TOKEN: &str = "attack-bench-twilio-token";
const TWILIO_PUBLIC_URL: &str = "https://sync.example.org/sources/twilio-bench";
/// The most a source's form may be (`systems::twilio::MAX_FORM_BYTES`, 64 KiB): forms of this size
/// are read and verified; the over-cap ones (1 MiB) are refused unread.
const FORM_CAP: usize = outreach_sync::systems::twilio::MAX_FORM_BYTES;
const OVER_CAP: usize = 1024 * 1024;
/// How long signed deliveries flow in each phase, and how often.
const PHASE: Duration = Duration::from_secs(20);
const DELIVERY_EVERY: Duration = Duration::from_millis(50);
/// Compliance reports asked for at once (and again as each ends) in the reports phase.
const REPORT_CLIENTS: usize = 8;
/// How long a report client told 429 waits before it asks again.
const BUSY_PAUSE: Duration = Duration::from_millis(200);
/// The opt-out list uploaded in the reports phase: the admin API's largest (256 MiB),
/// less the part of a row that would not fit.
const LIST_BYTES: u64 = 256 * 1024 * 1024;
/// Distinct numbers in that list: its rows go round them (each about 20 times).
const LIST_DISTINCT: u64 = 1_000_000;
/// The longest the reports phase lasts, whether or not the import has answered.
const PHASE_CAP: Duration = Duration::from_secs(600);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run());
}

async fn run() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let (idle, slow, bodies, seeded) = if quick {
        (2_000, 200, 600, 40_000)
    } else {
        (10_000, 1_000, 6_000, 400_000)
    };
    let limit = rlimit::increase_nofile_limit(u64::MAX).expect("the open-file limit");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut daemon = Daemon::start(dir.path());
    let memory = Memory::watch(daemon.pid());
    println!(
        "attack: release daemon (pid {}), default limits, SQLite; this process may open {limit} files\n",
        daemon.pid()
    );
    let deliveries = Deliveries::new(daemon.ingest);
    let quiet = deliveries.flow(Duration::from_secs(5), &daemon).await;
    let at_rest = memory.take_peak();
    println!("no flood:        {}", quiet.line(&quiet));
    println!(
        "                 daemon RSS at rest {:.0} MiB\n",
        mib(at_rest)
    );

    let back = Some(Duration::from_secs(1));
    let phases = [
        ("another address", [127, 0, 0, 2], None),
        ("the same address", [127, 0, 0, 1], None),
        (
            "another address, each back 1 s after it is closed",
            [127, 0, 0, 2],
            back,
        ),
        (
            "the same address, each back 1 s after it is closed",
            [127, 0, 0, 1],
            back,
        ),
    ];
    for (label, from, again) in phases {
        let flood = ConnectionFlood::start(daemon.ingest, from, idle, slow, again).await;
        let during = deliveries.flow(PHASE, &daemon).await;
        let held = daemon
            .metric("outreach_sync_connections_open{listener=\"ingest\"}")
            .await;
        let opened = flood.stop().await;
        println!(
            "{idle} idle + {slow} slow-head connections from {label} ({opened} opened, the daemon holding {held:.0}):"
        );
        println!("                 {}", during.line(&quiet));
        println!(
            "                 peak RSS {:.0} MiB ({:.2}x at rest)\n",
            mib(memory.take_peak()),
            memory.last_peak() as f64 / at_rest as f64
        );
    }
    for reason in ["idle", "header_timeout", "evicted", "refused"] {
        let series = format!(
            "outreach_sync_connections_closed_total{{listener=\"ingest\",reason=\"{reason}\"}}"
        );
        println!(
            "closed by the daemon, {reason}: {:.0}",
            daemon.metric(&series).await
        );
    }
    println!();

    let before = database_bytes(dir.path());
    memory.take_peak();
    let unsigned = UnsignedFlood::start(daemon.ingest, bodies);
    let during = deliveries.flow_while(&daemon, || !unsigned.done()).await;
    let (answered, refused) = unsigned.finish().await;
    let grown = database_bytes(dir.path()).saturating_sub(before);
    println!(
        "{bodies} unsigned 1 MiB bodies, 16 at a time ({answered} answered, {refused} with 401):"
    );
    println!("                 {}", during.line(&quiet));
    println!(
        "                 peak RSS {:.0} MiB ({:.2}x at rest); database files grew {:.2} MiB",
        mib(memory.take_peak()),
        memory.last_peak() as f64 / at_rest as f64,
        grown as f64 / 1_048_576.0
    );
    println!();

    hostile_posts(
        &daemon,
        &deliveries,
        &memory,
        dir.path(),
        bodies,
        &quiet,
        at_rest,
    )
    .await;
    daemon.stop();
    drop(dir);
    println!();

    reports_and_import(&quiet, seeded).await;
}

/// The third phase: `posts` hostile posts to the Twilio source, 16 at a time, while
/// deliveries flow.
async fn hostile_posts(
    daemon: &Daemon,
    deliveries: &Deliveries,
    memory: &Memory,
    dir: &Path,
    posts: u64,
    quiet: &Flow,
    at_rest: u64,
) {
    let before = database_bytes(dir);
    let quarantined = "outreach_sync_events_quarantined_total";
    let quarantined_before = daemon.metric(quarantined).await;
    memory.take_peak();
    let flood = HostileFlood::start(daemon.ingest, posts);
    let during = deliveries.flow_while(daemon, || !flood.done()).await;
    let (counts, failed) = flood.finish().await;
    let peak = memory.take_peak();
    let grown = database_bytes(dir).saturating_sub(before);
    println!(
        "{posts} hostile posts to /sources/{TWILIO_SOURCE}, 16 at a time, five kinds in turn:"
    );
    println!("                 {}", during.line(quiet));
    println!(
        "                 peak RSS {:.0} MiB ({:.2}x at rest); database files grew {:.2} MiB",
        mib(peak),
        peak as f64 / at_rest as f64,
        grown as f64 / 1_048_576.0
    );
    let unexpected = print_answers(&counts);
    // The verified posts with a parameter twice are kept and then quarantined by the worker.
    let kept = counts[Hostile::Duplicated as usize]
        .get(&200)
        .copied()
        .unwrap_or(0);
    let began = Instant::now();
    let mut quarantined_now = daemon.metric(quarantined).await - quarantined_before;
    while quarantined_now < kept as f64 && began.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        quarantined_now = daemon.metric(quarantined).await - quarantined_before;
    }
    println!(
        "                 outbox rows quarantined by the worker during the phase: {quarantined_now:.0} (of {kept} verified posts with a parameter twice)"
    );
    for line in daemon
        .metrics_matching(&format!(
            "outreach_sync_source_posts_total{{source=\"{TWILIO_SOURCE}\""
        ))
        .await
    {
        println!("                 {line}");
    }
    if unexpected > 0 {
        println!("WARNING: {unexpected} hostile posts were not answered as expected");
    }
    for error in failed.iter().take(5) {
        println!("                 no answer: {error}");
    }
}

/// Each kind of hostile post's answers by status, a line each; how many were not answered
/// as expected.
fn print_answers(counts: &[Answers]) -> u64 {
    let mut unexpected = 0;
    for (kind, answers) in Hostile::ALL.iter().zip(counts) {
        let mut statuses: Vec<(u16, u64)> = answers.iter().map(|(s, n)| (*s, *n)).collect();
        statuses.sort_unstable();
        let sent: u64 = statuses.iter().map(|(_, n)| n).sum();
        let other: u64 = statuses
            .iter()
            .filter(|(status, _)| *status != kind.expected())
            .map(|(_, n)| n)
            .sum();
        unexpected += other;
        let listed: Vec<String> = statuses
            .iter()
            .map(|(status, n)| match status {
                0 => format!("{n} no answer"),
                status => format!("{n} {status}"),
            })
            .collect();
        println!(
            "                 {:<48} {sent:>5} sent: {} (expected {}){}",
            kind.label(),
            listed.join(", "),
            kind.expected(),
            if other > 0 { "  UNEXPECTED" } else { "" }
        );
    }
    unexpected
}

/// The kinds of hostile post, in the order they are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hostile {
    /// A form of the most a source takes, with no signature.
    Unsigned,
    /// An unsigned 1 MiB form, over the cap.
    OverCap,
    /// A form of the most a source takes, signed with its token for another URL.
    OtherUrl,
    /// A reply signed for the source's URL, then changed (another `From`).
    Replayed,
    /// A reply signed for the source's URL with `From`, `Body` or `MessageSid` given twice.
    Duplicated,
}

impl Hostile {
    const ALL: [Hostile; 5] = [
        Hostile::Unsigned,
        Hostile::OverCap,
        Hostile::OtherUrl,
        Hostile::Replayed,
        Hostile::Duplicated,
    ];

    fn label(self) -> &'static str {
        match self {
            Hostile::Unsigned => "64 KiB form (the cap), unsigned:",
            Hostile::OverCap => "1 MiB form (over the cap), unsigned:",
            Hostile::OtherUrl => "64 KiB form signed for another URL:",
            Hostile::Replayed => "signed reply, From changed (replay):",
            Hostile::Duplicated => "signed reply with a parameter twice:",
        }
    }

    fn expected(self) -> u16 {
        match self {
            Hostile::Unsigned | Hostile::OtherUrl | Hostile::Replayed => 403,
            Hostile::OverCap => 413,
            Hostile::Duplicated => 200,
        }
    }
}

/// `params` form-encoded (`application/x-www-form-urlencoded`), in order.
fn form(params: &[(String, String)]) -> String {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                    char::from(b).to_string()
                }
                b' ' => "+".to_owned(),
                b => format!("%{b:02X}"),
            })
            .collect()
    };
    params
        .iter()
        .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A STOP reply's parameters with a `Body` of `x`s that makes the form exactly `bytes` long.
fn padded(sid: &str, bytes: usize) -> Vec<(String, String)> {
    let mut params = inbound(sid, "+14155550100", "+15005550006", "");
    let short = form(&params).len();
    let body = params
        .iter_mut()
        .find(|(name, _)| name == "Body")
        .expect("a Body");
    body.1 = "x".repeat(bytes - short);
    assert_eq!(form(&params).len(), bytes);
    params
}

/// The hostile posts' forms: the large ones made once and shared, the small ones signed as
/// each is sent ([`HostileForms::post`]).
struct HostileForms {
    unsigned: bytes::Bytes,
    over_cap: bytes::Bytes,
    other_url: (bytes::Bytes, String),
}

impl HostileForms {
    fn new() -> Self {
        let other = padded("SMattackother", FORM_CAP);
        let other_url = (
            bytes::Bytes::from(form(&other)),
            twilio_signature(
                TWILIO_TOKEN,
                "https://attacker.example.org/sources/twilio-bench",
                &other,
            ),
        );
        Self {
            unsigned: bytes::Bytes::from(form(&padded("SMattackunsigned", FORM_CAP))),
            over_cap: bytes::Bytes::from(form(&padded("SMattackover", OVER_CAP))),
            other_url,
        }
    }

    /// The `n`th hostile post: its kind, its form and its `X-Twilio-Signature` (if any).
    fn post(&self, n: u64) -> (Hostile, bytes::Bytes, Option<String>) {
        let kind = Hostile::ALL[(n % Hostile::ALL.len() as u64) as usize];
        let sid = format!("SMattack{n}");
        match kind {
            Hostile::Unsigned => (kind, self.unsigned.clone(), None),
            Hostile::OverCap => (kind, self.over_cap.clone(), None),
            Hostile::OtherUrl => (
                kind,
                self.other_url.0.clone(),
                Some(self.other_url.1.clone()),
            ),
            Hostile::Replayed => {
                let from = format!("+1415{}", 2_000_000 + n);
                let mut params = inbound(&sid, &from, "+15005550006", "STOP");
                let signed = twilio_signature(TWILIO_TOKEN, TWILIO_PUBLIC_URL, &params);
                let other = format!("+1415{}", 3_000_000 + n);
                for (name, value) in &mut params {
                    if name == "From" {
                        value.clone_from(&other);
                    }
                }
                (kind, bytes::Bytes::from(form(&params)), Some(signed))
            }
            Hostile::Duplicated => {
                let from = format!("+1415{}", 2_000_000 + n);
                let mut params = inbound(&sid, &from, "+15005550006", "STOP");
                let (name, value) = match (n / Hostile::ALL.len() as u64) % 3 {
                    0 => ("From", format!("+1415{}", 3_000_000 + n)),
                    1 => ("Body", "START".to_owned()),
                    _ => ("MessageSid", format!("SMattackagain{n}")),
                };
                params.push((name.to_owned(), value));
                let signed = twilio_signature(TWILIO_TOKEN, TWILIO_PUBLIC_URL, &params);
                (kind, bytes::Bytes::from(form(&params)), Some(signed))
            }
        }
    }
}

/// Hostile posts to the Twilio source, 16 at a time; each kind's answers by status (0: no
/// answer).
struct HostileFlood {
    left: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<(Vec<Answers>, Vec<String>)>>,
}

/// One kind's answers by status (0: no answer).
type Answers = std::collections::HashMap<u16, u64>;

impl HostileFlood {
    fn start(to: SocketAddr, posts: u64) -> Self {
        let left = Arc::new(AtomicU64::new(posts));
        let forms = Arc::new(HostileForms::new());
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client");
        // The daemon closes a connection after a 413 (the rest of the body unread) without
        // saying `Connection: close`: a post over the cap on a pooled connection would make
        // the next post on it fail. Those go on a connection of their own each.
        let fresh = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(0)
            .build()
            .expect("client");
        let url = format!("http://{to}/sources/{TWILIO_SOURCE}");
        let tasks = (0..16)
            .map(|_| {
                let (left, forms, url) = (left.clone(), forms.clone(), url.clone());
                let (http, fresh) = (http.clone(), fresh.clone());
                tokio::spawn(async move {
                    let mut counts = vec![Answers::new(); Hostile::ALL.len()];
                    let mut failures = Vec::new();
                    while let Ok(before) =
                        left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                            n.checked_sub(1)
                        })
                    {
                        let (kind, body, signed) = forms.post(posts - before);
                        let client = if kind == Hostile::OverCap {
                            &fresh
                        } else {
                            &http
                        };
                        let mut request = client
                            .post(&url)
                            .header("content-type", "application/x-www-form-urlencoded")
                            .body(body);
                        if let Some(signed) = signed {
                            request = request.header("x-twilio-signature", signed);
                        }
                        let status = match request.send().await {
                            Ok(response) => {
                                let status = response.status().as_u16();
                                let _ = response.bytes().await;
                                status
                            }
                            Err(error) => {
                                if failures.len() < 3 {
                                    failures.push(format!("{kind:?}: {error:?}"));
                                }
                                0
                            }
                        };
                        *counts[kind as usize].entry(status).or_insert(0) += 1;
                    }
                    (counts, failures)
                })
            })
            .collect();
        Self { left, tasks }
    }

    fn done(&self) -> bool {
        self.left.load(Ordering::Relaxed) == 0 && self.tasks.iter().all(|t| t.is_finished())
    }

    /// Each kind's answers, and the first failed requests' errors (a few per task).
    async fn finish(self) -> (Vec<Answers>, Vec<String>) {
        let mut all = vec![Answers::new(); Hostile::ALL.len()];
        let mut failed = Vec::new();
        for task in self.tasks {
            let Ok((counts, failures)) = task.await else {
                continue;
            };
            for (all, counts) in all.iter_mut().zip(counts) {
                for (status, n) in counts {
                    *all.entry(status).or_insert(0) += n;
                }
            }
            failed.extend(failures);
        }
        (all, failed)
    }
}

/// The fourth phase: a second daemon on a ledger of `seeded` opt-outs (recorded by the CLI
/// before it starts), 8 report clients and a 256 MiB import while deliveries flow.
async fn reports_and_import(quiet: &Flow, seeded: u64) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let list = dir.path().join("seed.csv");
    {
        let mut text = String::with_capacity(6 + 13 * seeded as usize);
        text.push_str("phone\n");
        for n in 0..seeded {
            text.push_str(&format!("+1555{:07}\n", n % 10_000_000));
        }
        std::fs::write(&list, text).expect("the seed list");
    }
    let began = Instant::now();
    let output = command(
        dir.path(),
        &["import", list.to_str().expect("a path"), "--org", "org_1"],
    )
    .stdin(Stdio::null())
    .output()
    .expect("run the import");
    assert!(
        output.status.success(),
        "the seed import failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seeding = began.elapsed();
    let mut daemon = Daemon::start(dir.path());
    let memory = Memory::watch(daemon.pid());
    let deliveries = Deliveries::new(daemon.ingest);
    let rest = deliveries.flow(Duration::from_secs(5), &daemon).await;
    let at_rest = memory.take_peak();
    println!(
        "{REPORT_CLIENTS} reports + a 256 MiB import during deliveries (a second daemon, pid {}, its ledger seeded with {seeded} opt-outs by the CLI's import in {:.1} s):",
        daemon.pid(),
        seeding.as_secs_f64()
    );
    println!("   no load:      {}", rest.line(quiet));
    println!(
        "                 daemon RSS at rest {:.0} MiB",
        mib(at_rest)
    );

    let stop = Arc::new(AtomicBool::new(false));
    let reports = Reports::start(daemon.admin, stop.clone());
    let import = tokio::spawn(import_list(daemon.admin));
    let began = Instant::now();
    let during = deliveries
        .flow_while(&daemon, || {
            let elapsed = began.elapsed();
            elapsed < PHASE_CAP && (elapsed < PHASE || !import.is_finished())
        })
        .await;
    let phase = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    let imported = if import.is_finished() {
        import.await.ok()
    } else {
        import.abort();
        None
    };
    let reports = reports.finish().await;
    println!("   loaded:       {}", during.line(quiet));
    let other = if reports.other.is_empty() {
        String::new()
    } else {
        format!(" {:?}", reports.other)
    };
    println!(
        "                 reports: {} whole (the largest {:.1} MiB), {} refused 429, {} otherwise{other}; the phase {:.1} s",
        reports.whole,
        mib(reports.bytes),
        reports.busy,
        reports.other.len(),
        phase.as_secs_f64()
    );
    match imported {
        Some(import) => println!(
            "                 import of {} bytes ({} rows, {LIST_DISTINCT} distinct numbers): {} in {:.1} s, recorded {}{}",
            import.sent,
            list_rows(),
            import.status,
            import.took.as_secs_f64(),
            import
                .recorded
                .map_or_else(|| "nothing".to_owned(), |n| n.to_string()),
            import.message
        ),
        None => println!(
            "                 import: no answer within {} s",
            PHASE_CAP.as_secs()
        ),
    }
    println!(
        "                 peak RSS {:.0} MiB ({:.2}x at rest)",
        mib(memory.take_peak()),
        memory.last_peak() as f64 / at_rest as f64
    );
    daemon.stop();
}

/// What the report clients saw.
struct ReportCounts {
    whole: u64,
    busy: u64,
    /// Any other status, 0 for a failed request.
    other: Vec<u16>,
    /// The size of the largest whole report (they grow as the import records).
    bytes: u64,
}

/// [`REPORT_CLIENTS`] clients asking for the compliance report until `stop`.
struct Reports {
    tasks: Vec<tokio::task::JoinHandle<ReportCounts>>,
}

impl Reports {
    fn start(admin: SocketAddr, stop: Arc<AtomicBool>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(300))
            .build()
            .expect("client");
        let url = format!("http://{admin}/v1/compliance?since=2000-01-01");
        let tasks = (0..REPORT_CLIENTS)
            .map(|_| {
                let (http, url, stop) = (http.clone(), url.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut counts = ReportCounts {
                        whole: 0,
                        busy: 0,
                        other: Vec::new(),
                        bytes: 0,
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let sent = http.get(&url).bearer_auth(admin_token()).send().await;
                        let mut response = match sent {
                            Ok(response) => response,
                            Err(_) => {
                                counts.other.push(0);
                                continue;
                            }
                        };
                        match response.status().as_u16() {
                            200 => {
                                // Read to its end, not parsed: this client costs the
                                // machine little beside the daemon.
                                let mut bytes = 0;
                                loop {
                                    match response.chunk().await {
                                        Ok(Some(chunk)) => bytes += chunk.len() as u64,
                                        Ok(None) => {
                                            counts.whole += 1;
                                            counts.bytes = counts.bytes.max(bytes);
                                            break;
                                        }
                                        Err(_) => {
                                            counts.other.push(0);
                                            break;
                                        }
                                    }
                                }
                            }
                            429 => {
                                counts.busy += 1;
                                tokio::time::sleep(BUSY_PAUSE).await;
                            }
                            status => counts.other.push(status),
                        }
                    }
                    counts
                })
            })
            .collect();
        Self { tasks }
    }

    async fn finish(self) -> ReportCounts {
        let mut all = ReportCounts {
            whole: 0,
            busy: 0,
            other: Vec::new(),
            bytes: 0,
        };
        for task in self.tasks {
            let counts = task.await.expect("a report client");
            all.whole += counts.whole;
            all.busy += counts.busy;
            all.other.extend(counts.other);
            all.bytes = all.bytes.max(counts.bytes);
        }
        all
    }
}

/// The import's answer.
struct Imported {
    status: u16,
    recorded: Option<u64>,
    /// The message of a refusal (its start), with a leading `; `.
    message: String,
    took: Duration,
    /// Bytes of the list.
    sent: u64,
}

/// The list's header, `phone\n`; every row after it is `+1` and 10 digits, and `\n`.
const LIST_HEADER: &[u8] = b"phone\n";
const ROW_BYTES: u64 = 13;
/// Rows per chunk of the body (about 64 KiB).
const CHUNK_ROWS: u64 = 5_000;

fn list_rows() -> u64 {
    (LIST_BYTES - LIST_HEADER.len() as u64) / ROW_BYTES
}

/// The `row`th number of the list: 10 digits, the first 2-9, going round
/// [`LIST_DISTINCT`] numbers spread over the whole range (a multiplier prime to the range's
/// size maps distinct indexes to distinct numbers).
fn list_number(row: u64) -> u64 {
    2_000_000_000 + (row % LIST_DISTINCT) * 2_654_435_761 % 8_000_000_000
}

/// Rows `first..first + count` of the list.
fn list_chunk(first: u64, count: u64) -> bytes::Bytes {
    let mut chunk = Vec::with_capacity((count * ROW_BYTES) as usize);
    for row in first..first + count {
        let mut digits = [0u8; 10];
        let mut n = list_number(row);
        for digit in digits.iter_mut().rev() {
            *digit = b'0' + (n % 10) as u8;
            n /= 10;
        }
        chunk.extend_from_slice(b"+1");
        chunk.extend_from_slice(&digits);
        chunk.push(b'\n');
    }
    bytes::Bytes::from(chunk)
}

/// Uploads the list to `POST /v1/consent/import?org=org_2`, made as it is sent.
async fn import_list(admin: SocketAddr) -> Imported {
    let rows = list_rows();
    let sent = LIST_HEADER.len() as u64 + rows * ROW_BYTES;
    let chunks = std::iter::once(bytes::Bytes::from_static(LIST_HEADER)).chain(
        (0..rows)
            .step_by(CHUNK_ROWS as usize)
            .map(move |first| list_chunk(first, CHUNK_ROWS.min(rows - first))),
    );
    let body =
        reqwest::Body::wrap_stream(futures::stream::iter(chunks.map(Ok::<_, std::io::Error>)));
    let http = reqwest::Client::builder()
        .timeout(PHASE_CAP)
        .build()
        .expect("client");
    let began = Instant::now();
    let answer = http
        .post(format!("http://{admin}/v1/consent/import?org=org_2"))
        .bearer_auth(admin_token())
        .header("content-type", "text/csv")
        .body(body)
        .send()
        .await;
    let (status, text) = match answer {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.text().await.unwrap_or_default())
        }
        Err(error) => (0, error.to_string()),
    };
    let took = began.elapsed();
    let answer: Option<serde_json::Value> = serde_json::from_str(&text).ok();
    let recorded = answer
        .as_ref()
        .and_then(|a| a.get("recorded"))
        .and_then(serde_json::Value::as_u64);
    let message = if status == 200 {
        String::new()
    } else {
        let message = answer
            .as_ref()
            .and_then(|a| a.get("message"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or(&text);
        format!("; {}", message.chars().take(300).collect::<String>())
    };
    Imported {
        status,
        recorded,
        message,
        took,
        sent,
    }
}

/// The admin token's secret part (`TOKEN` is `name:secret`).
fn admin_token() -> &'static str {
    TOKEN.split_once(':').map_or(TOKEN, |(_, t)| t)
}

/// `outreach-sync --config DIR/config.toml ARGS` with the environment every run of the
/// binary here gets (the database in `dir`, the secret, the admin token, no reconcile).
fn command(dir: &Path, args: &[&str]) -> Command {
    let config = dir.join("config.toml");
    if !config.exists() {
        // A Twilio source, posted to at /sources/twilio-bench (the hostile posts' target).
        let source = format!(
            "[[source]]\nname = \"{TWILIO_SOURCE}\"\nkind = \"twilio\"\nauth_token = \"{TWILIO_TOKEN}\"\npublic_url = \"{TWILIO_PUBLIC_URL}\"\n"
        );
        std::fs::write(&config, source).expect("config");
    }
    let mut command = Command::new(BIN);
    command
        .args(["--config", config.to_str().expect("a path")])
        .args(args)
        .env(
            "OUTREACH_SYNC__DATABASE__URL",
            format!("sqlite://{}", dir.join("db.sqlite").display()),
        )
        .env("OUTREACH_SYNC__WEBHOOK__SECRETS", SECRET)
        .env("OUTREACH_SYNC__ADMIN__TOKENS", TOKEN)
        .env("OUTREACH_SYNC__RECONCILE__ON_START", "false")
        .env("OUTREACH_SYNC__RECONCILE__SCHEDULE", "")
        .env("OUTREACH_SYNC__LOG__LEVEL", "warn");
    command
}

/// The daemon under attack.
struct Daemon {
    child: Child,
    ingest: SocketAddr,
    admin: SocketAddr,
    http: reqwest::Client,
}

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        let port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
        };
        let (ingest, admin) = (port(), port());
        let child = command(dir, &["serve"])
            .env("OUTREACH_SYNC__INGEST__BIND", ingest.to_string())
            .env("OUTREACH_SYNC__ADMIN__BIND", admin.to_string())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.join("daemon.log")).expect("log"))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the daemon");
        let daemon = Daemon {
            child,
            ingest,
            admin,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .expect("client"),
        };
        let began = Instant::now();
        while began.elapsed() < Duration::from_secs(30) {
            if std::net::TcpStream::connect(ingest).is_ok()
                && std::net::TcpStream::connect(admin).is_ok()
            {
                return daemon;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the daemon did not start listening");
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One series of `/metrics`.
    async fn metric(&self, series: &str) -> f64 {
        let text = self
            .http
            .get(format!("http://{}/metrics", self.admin))
            .send()
            .await
            .expect("/metrics")
            .text()
            .await
            .expect("/metrics text");
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(f64::NAN)
    }

    /// Every line of `/metrics` that starts with `prefix`.
    async fn metrics_matching(&self, prefix: &str) -> Vec<String> {
        let text = self
            .http
            .get(format!("http://{}/metrics", self.admin))
            .send()
            .await
            .expect("/metrics")
            .text()
            .await
            .expect("/metrics text");
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Signed deliveries, each on a fresh connection, with an admin request beside each.
struct Deliveries {
    ingest: SocketAddr,
    format: SignatureFormat,
    key: Key,
    next: AtomicU64,
}

/// What one flow of deliveries saw.
struct Flow {
    acks: Vec<Duration>,
    failed: u64,
    admin_slowest: Duration,
    admin_failed: u64,
}

impl Flow {
    fn line(&self, quiet: &Flow) -> String {
        let p = |flow: &Flow, q: f64| percentile(&flow.acks, q);
        format!(
            "{} signed deliveries, {} not acknowledged; ack p50 {:.1} ms ({:.2}x quiet), p99 {:.1} ms ({:.2}x), max {:.1} ms; admin slowest {:.1} ms, {} failed",
            self.acks.len(),
            self.failed,
            ms(p(self, 0.5)),
            ratio(p(self, 0.5), p(quiet, 0.5)),
            ms(p(self, 0.99)),
            ratio(p(self, 0.99), p(quiet, 0.99)),
            ms(p(self, 1.0)),
            ms(self.admin_slowest),
            self.admin_failed
        )
    }
}

impl Deliveries {
    fn new(ingest: SocketAddr) -> Self {
        let format = SignatureFormat::from(&WebhookSettings::default());
        let key = Key::for_scheme(format.scheme, SECRET).expect("key");
        Self {
            ingest,
            format,
            key,
            next: AtomicU64::new(0),
        }
    }

    async fn flow(&self, length: Duration, daemon: &Daemon) -> Flow {
        let began = Instant::now();
        self.flow_while(daemon, || began.elapsed() < length).await
    }

    async fn flow_while(&self, daemon: &Daemon, mut go_on: impl FnMut() -> bool) -> Flow {
        let fresh = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client");
        let mut flow = Flow {
            acks: Vec::new(),
            failed: 0,
            admin_slowest: Duration::ZERO,
            admin_failed: 0,
        };
        let mut ticker = tokio::time::interval(DELIVERY_EVERY);
        while go_on() {
            ticker.tick().await;
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let body = format!(
                r#"{{"type":"consentUpdate-v1","id":"evt_attack_{n}","createdAt":"2026-11-25T10:00:00Z","data":{{"organizationId":"org_1","phoneNumber":"+1555{:07}","globalOptedOut":true}}}}"#,
                n % 10_000_000
            );
            let now = chrono::Utc::now().timestamp();
            let mut request = fresh
                .post(format!("http://{}/webhooks", self.ingest))
                .body(body.clone());
            for (name, value) in sign(&self.format, &self.key, body.as_bytes(), now, None) {
                request = request.header(name, value);
            }
            let started = Instant::now();
            match request.send().await {
                Ok(response) if response.status() == 200 => flow.acks.push(started.elapsed()),
                _ => flow.failed += 1,
            }
            if n.is_multiple_of(5) {
                let started = Instant::now();
                let status = fresh
                    .get(format!("http://{}/v1/status", daemon.admin))
                    .bearer_auth(admin_token())
                    .send()
                    .await;
                match status {
                    Ok(response) if response.status() == 200 => {
                        flow.admin_slowest = flow.admin_slowest.max(started.elapsed());
                    }
                    _ => flow.admin_failed += 1,
                }
            }
        }
        flow
    }
}

/// Idle and slow-head connections, each opened again `again` after it is closed (when
/// given).
struct ConnectionFlood {
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ConnectionFlood {
    async fn start(
        to: SocketAddr,
        from: [u8; 4],
        idle: usize,
        slow: usize,
        again: Option<Duration>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let opened = Arc::new(AtomicU64::new(0));
        let tasks = (0..idle + slow)
            .map(|n| {
                let (stop, opened) = (stop.clone(), opened.clone());
                tokio::spawn(hold(to, from, n >= idle, again, stop, opened))
            })
            .collect();
        // Let the flood build up before deliveries start.
        tokio::time::sleep(Duration::from_secs(3)).await;
        Self {
            stop,
            opened,
            tasks,
        }
    }

    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.abort();
            let _ = task.await;
        }
        // The daemon closes what it held.
        tokio::time::sleep(Duration::from_secs(2)).await;
        self.opened.load(Ordering::Relaxed)
    }
}

/// One attacker's connection, opened again `again` after the daemon closes it (when given).
async fn hold(
    to: SocketAddr,
    from: [u8; 4],
    slow: bool,
    again: Option<Duration>,
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicU64>,
) {
    while !stop.load(Ordering::Relaxed) {
        let connected = async {
            let socket = TcpSocket::new_v4()?;
            socket.bind(SocketAddr::from((from, 0)))?;
            socket.connect(to).await
        };
        if let Ok(mut stream) = connected.await {
            opened.fetch_add(1, Ordering::Relaxed);
            let mut buffer = [0u8; 256];
            if slow {
                let _ = stream.write_all(b"POST /webhooks HTTP/1.1\r\n").await;
            }
            loop {
                tokio::select! {
                    read = stream.read(&mut buffer) => if matches!(read, Ok(0) | Err(_)) { break },
                    () = tokio::time::sleep(Duration::from_secs(5)), if slow => {
                        if stream.write_all(b"x").await.is_err() { break }
                    }
                }
            }
        }
        match again {
            Some(pause) => tokio::time::sleep(pause).await,
            None => return,
        }
    }
}

/// Unsigned 1 MiB POSTs, 16 at a time.
struct UnsignedFlood {
    left: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
    answered: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl UnsignedFlood {
    fn start(to: SocketAddr, bodies: u64) -> Self {
        let left = Arc::new(AtomicU64::new(bodies));
        let refused = Arc::new(AtomicU64::new(0));
        let answered = Arc::new(AtomicU64::new(0));
        let body = bytes::Bytes::from(vec![b'x'; 1024 * 1024]);
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client");
        let tasks = (0..16)
            .map(|_| {
                let (left, refused, answered) = (left.clone(), refused.clone(), answered.clone());
                let (http, body) = (http.clone(), body.clone());
                tokio::spawn(async move {
                    while left
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                        .is_ok()
                    {
                        let sent = http
                            .post(format!("http://{to}/webhooks"))
                            .header("x-signature", "00")
                            .body(body.clone())
                            .send()
                            .await;
                        if let Ok(response) = sent {
                            answered.fetch_add(1, Ordering::Relaxed);
                            if response.status() == 401 {
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        Self {
            left,
            refused,
            answered,
            tasks,
        }
    }

    fn done(&self) -> bool {
        self.left.load(Ordering::Relaxed) == 0 && self.tasks.iter().all(|t| t.is_finished())
    }

    async fn finish(self) -> (u64, u64) {
        for task in self.tasks {
            let _ = task.await;
        }
        (
            self.answered.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }
}

/// The daemon's resident memory, sampled every 50 ms; the peak since the last take.
struct Memory {
    peak: Arc<AtomicU64>,
    last: AtomicU64,
}

impl Memory {
    fn watch(pid: u32) -> Self {
        let peak = Arc::new(AtomicU64::new(0));
        let path = PathBuf::from(format!("/proc/{pid}/status"));
        let sampled = peak.clone();
        std::thread::spawn(move || {
            while let Ok(status) = std::fs::read_to_string(&path) {
                if let Some(kib) = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                {
                    sampled.fetch_max(kib * 1024, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Self {
            peak,
            last: AtomicU64::new(0),
        }
    }

    /// The peak since the last call, in bytes; sampling starts afresh.
    fn take_peak(&self) -> u64 {
        let peak = self.peak.swap(0, Ordering::Relaxed);
        self.last.store(peak, Ordering::Relaxed);
        peak
    }

    fn last_peak(&self) -> u64 {
        self.last.load(Ordering::Relaxed)
    }
}

fn database_bytes(dir: &Path) -> u64 {
    ["db.sqlite", "db.sqlite-wal", "db.sqlite-shm"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

fn percentile(values: &[Duration], q: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = values.to_vec();
    sorted.sort();
    let index = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[index]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}
