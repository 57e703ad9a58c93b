//! `cargo bench --bench reconcile`: speed and memory of the leads pass.
//!
//! For 20,000 and 200,000 leads, the sandbox runs as its own process (`outreach-sync
//! sandbox`) so that its memory is not counted; each measurement runs in a fresh child
//! process of this bench, which reports its peak RSS (VmHWM). Per size: the baseline only
//! pages through `GET /leads` (1,000 per page, rate limiter off) and drops the pages; the
//! pass pages the same way and writes every page to a fresh database (`synchronous =
//! "full"`), first with every lead new to the mirror, then again over the same mirror. Read the pass/baseline throughput ratio, and the RSS of the
//! 200,000-lead pass against the 20,000-lead one (memory independent of the lead count).
//! `BENCH_QUICK=1` uses 2,000 and 20,000 leads.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use outreach_sync::client::models::{ListLeads, ListOrganizations, Paging};
use outreach_sync::client::{ClientConfig, ServiceClient};
use outreach_sync::reconcile::{PAGE_SIZE, PassRequest, Reconciler};
use outreach_sync::settings::Settings;
use secrecy::SecretString;
use tokio_util::sync::CancellationToken;

const SANDBOX: &str = env!("CARGO_BIN_EXE_outreach-sync");
const TARGET_LEADS_PER_SEC: f64 = 20_000.0;

struct Measured {
    leads: u64,
    /// The run; for the pass, its first run (every lead new to the mirror).
    secs: f64,
    /// The pass run again over the same mirror (the steady state); 0 for the baseline.
    again_secs: f64,
    peak_rss_kib: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let mode = args[i + 1].clone();
        let base = args[i + 2].clone();
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let (leads, secs, again) = runtime.block_on(child(&mode, &base));
        println!("{leads} {secs} {again} {}", peak_rss_kib());
        return;
    }
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let sizes: [usize; 2] = if quick {
        [2_000, 20_000]
    } else {
        [20_000, 200_000]
    };
    println!("reconcile: leads pass against the sandbox (separate process), rate limiter off\n");
    println!(
        "{:>8}  {:<10} {:>10} {:>9} {:>12} {:>13}",
        "leads", "run", "scanned", "seconds", "leads/s", "peak RSS MiB"
    );
    let mut pass_rss = Vec::new();
    let mut pass_rates = Vec::new();
    for size in sizes {
        let (mut sandbox, base) = start_sandbox(size);
        let baseline = measure("fetch", &base);
        let pass = measure("pass", &base);
        let _ = sandbox.kill();
        let _ = sandbox.wait();
        let runs = [
            ("fetch only", baseline.secs),
            ("first pass", pass.secs),
            ("next pass", pass.again_secs),
        ];
        for (name, secs) in runs {
            println!(
                "{:>8}  {:<10} {:>10} {:>9.2} {:>12.0} {:>13.1}",
                size,
                name,
                pass.leads,
                secs,
                pass.leads as f64 / secs,
                if name == "fetch only" {
                    baseline.peak_rss_kib
                } else {
                    pass.peak_rss_kib
                } as f64
                    / 1024.0
            );
        }
        let rate = |secs: f64| pass.leads as f64 / secs;
        println!(
            "{:>8}  throughput / fetch-only: first pass {:.2}, next pass {:.2}",
            "",
            rate(pass.secs) / rate(baseline.secs),
            rate(pass.again_secs) / rate(baseline.secs)
        );
        pass_rss.push(pass.peak_rss_kib as f64);
        pass_rates.push(rate(pass.secs).min(rate(pass.again_secs)));
    }
    let rss_ratio = pass_rss[1] / pass_rss[0];
    println!(
        "\npeak RSS of the pass, {} leads / {} leads: {rss_ratio:.2}",
        sizes[1], sizes[0]
    );
    let speed_met = pass_rates.iter().all(|r| *r >= TARGET_LEADS_PER_SEC);
    println!(
        "target >= {TARGET_LEADS_PER_SEC:.0} leads/s: {}",
        if speed_met { "met" } else { "NOT met" }
    );
    println!(
        "target: the same RSS at both sizes (ratio <= 1.25): {}",
        if rss_ratio <= 1.25 { "met" } else { "NOT met" }
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn start_sandbox(leads: usize) -> (Child, String) {
    let port = free_port();
    let child = Command::new(SANDBOX)
        .args([
            "sandbox",
            "--bind",
            &format!("127.0.0.1:{port}"),
            "--leads",
            &leads.to_string(),
        ])
        .args(["--organizations", "4", "--activity-ms", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the sandbox");
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the sandbox did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, base)
}

fn measure(mode: &str, base: &str) -> Measured {
    let exe = std::env::current_exe().expect("this bench");
    let out = Command::new(exe)
        .args(["--child", mode, base])
        .output()
        .expect("run the child");
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = text.split_whitespace().collect();
    assert!(
        fields.len() == 4,
        "child output: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Measured {
        leads: fields[0].parse().expect("leads"),
        secs: fields[1].parse().expect("secs"),
        again_secs: fields[2].parse().expect("secs"),
        peak_rss_kib: fields[3].parse().expect("rss"),
    }
}

fn client(base: &str) -> ServiceClient {
    let mut config = ClientConfig::new(
        base,
        "sandbox@example.org",
        SecretString::from("sandbox-secret"),
    );
    config.requests_per_second = 0;
    ServiceClient::new(config).expect("client")
}

async fn child(mode: &str, base: &str) -> (u64, f64, f64) {
    let client = client(base);
    let organizations: Vec<String> = client
        .organizations(ListOrganizations::default(), Some(PAGE_SIZE))
        .map_ok(|o| o.id)
        .try_collect()
        .await
        .expect("organizations");
    if mode == "fetch" {
        let started = Instant::now();
        let mut leads = 0u64;
        for org in &organizations {
            let query = ListLeads {
                organization_id: Some(org.clone()),
                ..ListLeads::default()
            };
            let mut cursor = None;
            loop {
                let paging = Paging {
                    cursor: cursor.take(),
                    limit: Some(PAGE_SIZE),
                };
                let page = client.leads_page(&query, &paging).await.expect("page");
                leads += page.items.len() as u64;
                match page.next_cursor() {
                    Some(next) => cursor = Some(next.to_owned()),
                    None => break,
                }
            }
        }
        return (leads, started.elapsed().as_secs_f64(), 0.0);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut settings = Settings::default();
    settings.database.url = format!("sqlite://{}/reconcile.db", dir.path().display());
    let pool = outreach_sync::store::pool(&settings).await.expect("pool");
    outreach_sync::store::migrate(&pool).await.expect("migrate");
    let reconciler = Reconciler::new(pool, client, &settings.reconcile);
    let request = PassRequest {
        organizations,
        leads: true,
        messages: false,
    };
    let mut secs = [0.0; 2];
    let mut scanned = 0;
    for run in &mut secs {
        let started = Instant::now();
        let summary = reconciler
            .run_pass(&request, &CancellationToken::new())
            .await
            .expect("a pass");
        assert!(summary.errors.is_empty(), "{:?}", summary.errors);
        *run = started.elapsed().as_secs_f64();
        scanned = summary.leads_scanned;
    }
    (scanned, secs[0], secs[1])
}

/// Peak resident set size of this process, in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}
