//! `cargo bench --bench sources`: opt-outs read back from VAN, and how long a phone banker's
//! "Do Not Text" takes to reach the service.
//!
//! Per backend (SQLite, then PostgreSQL):
//!
//! 1. **Rows read back per second**: the sandbox's VAN fake (answering at once) holds `N`
//!    seeded "Do Not Text" canvass responses (`BENCH_SOURCE_ROWS`, default 100,000), each
//!    of a number the mirror does not hold; one `Reader::run_once` of a fresh VAN source on a
//!    fresh database reads and records them all (an account-wide opt-out each). The export
//!    jobs complete at their first poll (`polls_before_complete = 0`): the run still waits
//!    its first poll interval (250 ms) once per resource, VAN's time rather than the
//!    daemon's. Baseline, in the same round: the same job's files downloaded and split into
//!    CSV records by this bench alone, nothing recorded. 3 rounds, median and spread; then
//!    one run with the mirror holding a lead of each number (an entry per organization too).
//!    Target: >= 20,000 rows/s on SQLite.
//!
//!    Then **listings read back**: the sandbox's Mobilize fake lists `N` people opted out
//!    (the same `BENCH_SOURCE_ROWS`), 100 a page by `next`, and its Mobile Commons fake `N`
//!    profiles that texted STOP, 1,000 a page, numbered, in XML; one `run_once` of a fresh
//!    source reads and records them all. Baseline, in the same round: the same pages fetched
//!    by this bench alone and parsed (JSON, or XML with `quick-xml`), nothing recorded. 3
//!    rounds each; rows/s printed beside VAN's of the same run (`BENCH_SOURCE_LISTINGS=off`
//!    skips them).
//! 2. **A change's way to the service**: the daemon (`Application`) on a sandbox, its mirror
//!    filled at its start, reading VAN every `BENCH_SOURCE_EVERY_SECS` (default 20, so that
//!    the bench stays short; VAN sources default to 300 in production, 60 is common); a
//!    phone banker marks a mirrored lead's VAN person "Do Not Text" at a random moment, and
//!    the bench polls the sandbox until that lead is opted out at the service. Seconds and
//!    intervals, for `BENCH_SOURCE_SAMPLES` marks (default 3; 0 skips this part, for a run
//!    of part 1 alone). Target: under 2 intervals.
//!
//! PostgreSQL: the server at `BENCH_POSTGRES_URL`, else postgres://postgres@127.0.0.1:5432/test,
//! a database of its own per run, dropped after; skipped with a printed line if the server
//! does not answer. Verdicts are printed, never turned into a failure.

#[allow(dead_code)] // The helpers other benches use.
mod common;

use std::time::{Duration, Instant};

use chrono::Utc;
use common::BenchDatabase;
use outreach_sync::model::{AccountId, Lead};
use outreach_sync::settings::{Settings, SourceSettings, SourceSystem};
use outreach_sync::sources::{Reader, RunReport};
use outreach_sync::store::Pool;
use outreach_sync_sandbox::destinations::{Fake, VanExportSettings, VanMark, VanTarget};
use outreach_sync_sandbox::{
    DEFAULT_MOBILE_COMMONS_PASSWORD, DEFAULT_MOBILE_COMMONS_USERNAME, DEFAULT_MOBILIZE_KEY,
    DEFAULT_VAN_KEY, MOBILIZE_ORGANIZATION_ID, RunningSandbox, Sandbox, SandboxConfig,
};
use rand::Rng as _;
use secrecy::SecretString;
use sqlx::Connection as _;
use tokio_util::sync::CancellationToken;

const ORGANIZATION: &str = "org_0";
const ROUNDS: usize = 3;
/// The target of part 1 (SQLite) and of part 2 (in intervals).
const TARGET_ROWS_PER_SEC: f64 = 20_000.0;
const TARGET_INTERVALS: f64 = 2.0;
/// The first number the sandbox's VAN seeds (national, after the dialing prefix 1).
const FIRST_SEEDED_NUMBER: u64 = 2_012_000_000;
/// Leads recorded per transaction while setting up the mirror.
const PAGE: usize = 1_000;
/// Leads of the sandbox in part 2.
const SERVICE_LEADS: usize = 300;
/// How often the service's view of the marked lead is read.
const POLL: Duration = Duration::from_millis(50);

#[tokio::main]
async fn main() {
    let rows = common::env_number("BENCH_SOURCE_ROWS", 100_000);
    let every = common::env_number("BENCH_SOURCE_EVERY_SECS", 20).max(1);
    let samples = usize::try_from(common::env_number("BENCH_SOURCE_SAMPLES", 3)).unwrap_or(3);
    println!(
        "sources: {rows} seeded \"Do Not Text\" rows read back from VAN ({ROUNDS} rounds); \
         {samples} marks carried to the service with every_secs = {every}\n"
    );
    run(None, rows, every, samples).await;
    if let Some(server) = common::answering_postgres().await {
        run(Some(server), rows, every, samples).await;
    }
}

async fn run(server: Option<String>, rows: u64, every: u64, samples: usize) {
    let mut rates = Vec::new();
    let mut ratios = Vec::new();
    let mut backend = "";
    for round in 1..=ROUNDS {
        let (database, pool) = BenchDatabase::open_on("sources.db", server.clone()).await;
        if round == 1 {
            backend = database.backend();
            let described = database.describe(&pool).await.expect("describe");
            println!("{backend}, {described}");
        }
        let read = read_round(&pool, rows).await;
        let rate = rows as f64 / read.secs;
        let baseline = rows as f64 / read.baseline_secs;
        println!(
            "  round {round}: run_once {:.2} s, {rate:.0} rows/s (read {}, opt-outs {}); \
             baseline (download + CSV split) {:.2} s, {baseline:.0} rows/s; ratio {:.3}",
            read.secs,
            read.report.counts.read,
            read.report.counts.opt_outs,
            read.baseline_secs,
            rate / baseline
        );
        rates.push(rate);
        ratios.push(rate / baseline);
        pool.close().await;
    }
    let (median, low, high) = spread(&mut rates);
    let (ratio, ratio_low, ratio_high) = spread(&mut ratios);
    let verdict = if backend != "SQLite" {
        "(the target is SQLite's)"
    } else if median >= TARGET_ROWS_PER_SEC {
        "met"
    } else {
        "NOT met"
    };
    println!(
        "  rows read back: median {median:.0} rows/s (min {low:.0}, max {high:.0}); \
         ratio to the baseline {ratio:.3} ({ratio_low:.3}..{ratio_high:.3}); \
         target >= {TARGET_ROWS_PER_SEC:.0} rows/s: {verdict}"
    );

    if std::env::var("BENCH_SOURCE_LISTINGS").as_deref() != Ok("off") {
        for listing in [Listing::Mobilize, Listing::MobileCommons] {
            listings(server.clone(), listing, rows, median).await;
        }
    }

    let started = Instant::now();
    let (database, pool) = BenchDatabase::open_on("sources.db", server.clone()).await;
    mirror_leads(&pool, rows).await;
    let setup = started.elapsed().as_secs_f64();
    let read = read_round(&pool, rows).await;
    println!(
        "  with a lead of each number in the mirror (set up in {setup:.1} s): run_once {:.2} s, \
         {:.0} rows/s (read {}, opt-outs {}), ratio to its baseline {:.3}",
        read.secs,
        rows as f64 / read.secs,
        read.report.counts.read,
        read.report.counts.opt_outs,
        read.baseline_secs / read.secs
    );
    pool.close().await;
    drop(database);

    if samples > 0 {
        way_to_the_service(server, every, samples).await;
    }
    println!();
}

/// A listing part 1b reads: Mobilize's people (pages of 100 by `next`) or Mobile Commons'
/// profiles (pages of 1,000, numbered until an empty one, XML).
#[derive(Debug, Clone, Copy)]
enum Listing {
    Mobilize,
    MobileCommons,
}

impl Listing {
    fn name(self) -> &'static str {
        match self {
            Self::Mobilize => "Mobilize",
            Self::MobileCommons => "Mobile Commons",
        }
    }

    /// `rows` more opted out on the sandbox's fake.
    fn seed(self, sandbox: &RunningSandbox, rows: u64) {
        match self {
            Self::Mobilize => sandbox.mobilize_seed(rows),
            Self::MobileCommons => sandbox.mobile_commons_seed(rows),
        }
    }

    /// A fresh source of it.
    fn source(self, sandbox: &RunningSandbox) -> SourceSettings {
        use outreach_sync::settings::kinds::{mobile_commons, mobilize};
        let mut settings = match self {
            Self::Mobilize => SourceSettings::new(
                "mobilize-bench",
                SourceSystem::Mobilize(mobilize::MobilizeSettings {
                    organization_id: Some(MOBILIZE_ORGANIZATION_ID),
                }),
                &sandbox.mobilize_url(),
                DEFAULT_MOBILIZE_KEY,
            ),
            Self::MobileCommons => {
                let mut settings = SourceSettings::new(
                    "mc-bench",
                    SourceSystem::MobileCommons(mobile_commons::MobileCommonsSettings {
                        username: DEFAULT_MOBILE_COMMONS_USERNAME.to_owned(),
                        password: Some(DEFAULT_MOBILE_COMMONS_PASSWORD.to_owned().into()),
                        ..Default::default()
                    }),
                    &sandbox.mobile_commons_url(),
                    "",
                );
                settings.api_key = None;
                settings
            }
        };
        settings.requests_per_second = 10_000;
        settings
    }

    /// Seconds to fetch every page of the fake's listing and parse it (JSON, or XML with
    /// `quick-xml`), as the source asks for them: the part of a read that is not the
    /// daemon's. The items read.
    async fn baseline(self, sandbox: &RunningSandbox) -> anyhow::Result<(f64, u64)> {
        let http = reqwest::Client::new();
        let started = Instant::now();
        let mut items = 0_u64;
        match self {
            Self::Mobilize => {
                let mut next = Some(format!(
                    "{}/organizations/{MOBILIZE_ORGANIZATION_ID}/people?updated_since=0&per_page=100",
                    sandbox.mobilize_url()
                ));
                while let Some(url) = next.take() {
                    let page: serde_json::Value = http
                        .get(&url)
                        .bearer_auth(DEFAULT_MOBILIZE_KEY)
                        .send()
                        .await?
                        .error_for_status()?
                        .json()
                        .await?;
                    items += page["data"].as_array().map_or(0, |d| d.len() as u64);
                    next = page["next"].as_str().map(str::to_owned);
                }
            }
            Self::MobileCommons => {
                #[derive(serde::Deserialize)]
                struct Response {
                    profiles: Profiles,
                }
                #[derive(serde::Deserialize)]
                struct Profiles {
                    #[serde(rename = "profile", default)]
                    profile: Vec<Profile>,
                }
                #[derive(serde::Deserialize)]
                struct Profile {
                    #[allow(dead_code)]
                    phone_number: String,
                }
                for page in 1.. {
                    let url = format!(
                        "{}/profiles?from=2000-01-01T00:00:00Z&limit=1000&page={page}",
                        sandbox.mobile_commons_url()
                    );
                    let text = http
                        .get(&url)
                        .basic_auth(
                            DEFAULT_MOBILE_COMMONS_USERNAME,
                            Some(DEFAULT_MOBILE_COMMONS_PASSWORD),
                        )
                        .send()
                        .await?
                        .error_for_status()?
                        .text()
                        .await?;
                    let read: Response = quick_xml::de::from_str(&text)?;
                    if read.profiles.profile.is_empty() {
                        break;
                    }
                    items += read.profiles.profile.len() as u64;
                }
            }
        }
        Ok((started.elapsed().as_secs_f64(), items))
    }
}

/// Part 1b: `listing` of `rows` people opted out, [`ROUNDS`] times, beside VAN's median
/// rate of the same run (`van_rate`).
async fn listings(server: Option<String>, listing: Listing, rows: u64, van_rate: f64) {
    let name = listing.name();
    let mut rates = Vec::new();
    let mut ratios = Vec::new();
    for round in 1..=ROUNDS {
        let (_database, pool) = BenchDatabase::open_on("sources.db", server.clone()).await;
        let sandbox = Sandbox::spawn(SandboxConfig {
            leads: 1,
            organizations: 1,
            ..SandboxConfig::default()
        })
        .await
        .expect("sandbox");
        listing.seed(&sandbox, rows);
        let (baseline_secs, items) = listing.baseline(&sandbox).await.expect("the baseline");
        assert!(items >= rows, "the baseline read {items} of {rows}");
        let settings = listing.source(&sandbox);
        let reader = Reader::new(&settings, &[AccountId::default_account()]).expect("a reader");
        let started = Instant::now();
        let report = reader.run_once(&pool).await.expect("a run");
        let secs = started.elapsed().as_secs_f64();
        sandbox.shutdown().await;
        pool.close().await;
        let (rate, baseline) = (rows as f64 / secs, rows as f64 / baseline_secs);
        println!(
            "  {name} round {round}: run_once {secs:.2} s, {rate:.0} rows/s (read {}, opt-outs {}); \
             baseline (pages fetched and parsed) {baseline_secs:.2} s, {baseline:.0} rows/s; ratio {:.3}",
            report.counts.read,
            report.counts.opt_outs,
            rate / baseline
        );
        rates.push(rate);
        ratios.push(rate / baseline);
    }
    let (median, low, high) = spread(&mut rates);
    let (ratio, ratio_low, ratio_high) = spread(&mut ratios);
    println!(
        "  {name}'s listing read back: median {median:.0} rows/s (min {low:.0}, max {high:.0}); \
         ratio to its baseline {ratio:.3} ({ratio_low:.3}..{ratio_high:.3}); \
         {:.2}x VAN's median of this run",
        median / van_rate
    );
}

/// The median, min and max of `values`.
fn spread(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    (median, values[0], values[n - 1])
}

/// What one round measured.
struct Read {
    report: RunReport,
    secs: f64,
    baseline_secs: f64,
}

/// A fresh sandbox with `rows` seeded "Do Not Text" responses; the baseline over its files,
/// then one `run_once` of a fresh source into `pool`.
async fn read_round(pool: &Pool, rows: u64) -> Read {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 1,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    sandbox.fake_latency(Fake::Van, Duration::ZERO);
    let export = VanExportSettings {
        polls_before_complete: 0,
        ..VanExportSettings::default()
    };
    assert!(sandbox.van_set_export(DEFAULT_VAN_KEY, export));
    sandbox
        .van_seed_changes(DEFAULT_VAN_KEY, rows, true)
        .expect("the committee of the key");
    let baseline_secs = baseline(&sandbox, rows).await.expect("the baseline");
    let settings = van_source(&sandbox, 3_600);
    let reader = Reader::new(&settings, &[AccountId::default_account()]).expect("a reader");
    let started = Instant::now();
    let report = reader.run_once(pool).await.expect("a run");
    let secs = started.elapsed().as_secs_f64();
    sandbox.shutdown().await;
    Read {
        report,
        secs,
        baseline_secs,
    }
}

fn van_source(sandbox: &RunningSandbox, every_secs: u64) -> SourceSettings {
    let mut source = SourceSettings::new(
        "van-bench",
        SourceSystem::Van(Default::default()),
        &sandbox.van_url(),
        DEFAULT_VAN_KEY,
    );
    source.requests_per_second = 1_000;
    source.every_secs = every_secs;
    source
}

/// Seconds to download the files of a `ContactHistory` job over the seeded rows and split
/// them into CSV records (their VAN IDs parsed), as fast as this bench can: the part of a
/// read that is not the daemon's. The job's making and polling are not counted.
async fn baseline(sandbox: &RunningSandbox, rows: u64) -> anyhow::Result<f64> {
    let http = reqwest::Client::new();
    let base = sandbox.van_url();
    let auth = |request: reqwest::RequestBuilder| {
        request.basic_auth("outreach-sync-bench", Some(format!("{DEFAULT_VAN_KEY}|1")))
    };
    let now = Utc::now();
    let body = serde_json::json!({
        "dateChangedFrom": (now - chrono::Duration::days(1)).to_rfc3339(),
        "dateChangedTo": now.to_rfc3339(),
        "resourceType": "ContactHistory",
        "requestedFields": ["VanID", "ResultID", "Phone", "PhoneDialingPrefix"],
        "excludeChangesFromSelf": true,
    });
    let url = format!("{}/changedEntityExportJobs", base.trim_end_matches('/'));
    let mut job: serde_json::Value = auth(http.post(&url).json(&body))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    while job["jobStatus"] != "Complete" {
        let status = format!("{url}/{}", job["exportJobId"]);
        job = auth(http.get(&status))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
    }
    let files: Vec<String> = job["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .filter_map(|f| f["downloadUrl"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let started = Instant::now();
    let mut records = 0_u64;
    for file in files {
        let bytes = http
            .get(&file)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        records += tokio::task::spawn_blocking(move || split(&bytes)).await??;
    }
    let secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        records == rows,
        "the baseline split {records} of {rows} rows"
    );
    Ok(secs)
}

/// The records of one CSV file, each VAN ID parsed.
fn split(bytes: &[u8]) -> anyhow::Result<u64> {
    let mut reader = csv::Reader::from_reader(bytes);
    let column = reader
        .headers()?
        .iter()
        .position(|h| h == "VanID")
        .ok_or_else(|| anyhow::anyhow!("no VanID column"))?;
    let mut record = csv::StringRecord::new();
    let mut n = 0;
    while reader.read_record(&mut record)? {
        let _: u64 = record.get(column).unwrap_or_default().parse()?;
        n += 1;
    }
    Ok(n)
}

/// The mirror holds a lead of each of the `rows` seeded numbers, as the reconciler records
/// them.
async fn mirror_leads(pool: &Pool, rows: u64) {
    let rows = usize::try_from(rows).unwrap_or(usize::MAX);
    for start in (0..rows).step_by(PAGE) {
        let leads: Vec<Lead> = (start..(start + PAGE).min(rows))
            .map(|i| {
                serde_json::from_value(serde_json::json!({
                    "id": format!("lead_{i}"),
                    "phoneNumber": format!("+1{}", FIRST_SEEDED_NUMBER + i as u64),
                    "organizationId": ORGANIZATION, "globalOptedOut": false,
                    "firstName": "Bench",
                }))
                .expect("a lead")
            })
            .collect();
        apply_page(pool, &leads).await;
    }
}

/// One page of leads, as the reconciler applies it.
async fn apply_page(pool: &Pool, leads: &[Lead]) {
    let account = AccountId::default_account();
    let fetched_at = Utc::now();
    match pool {
        Pool::Sqlite(pool) => {
            let mut connection = pool.acquire().await.expect("a connection");
            let mut tx = connection
                .begin_with("BEGIN IMMEDIATE")
                .await
                .expect("begin");
            outreach_sync::apply::lead_page(&mut *tx, &account, "pass_bench", leads, fetched_at)
                .await
                .expect("a page");
            tx.commit().await.expect("commit");
        }
        Pool::Postgres(pool) => {
            let mut tx = pool.begin().await.expect("begin");
            outreach_sync::apply::lead_page(&mut *tx, &account, "pass_bench", leads, fetched_at)
                .await
                .expect("a page");
            tx.commit().await.expect("commit");
        }
    }
}

/// The daemon's settings: a fresh database, the service at the sandbox (its mirror filled
/// at start), one VAN source read every `every` seconds.
fn daemon_settings(database: &BenchDatabase, sandbox: &RunningSandbox, every: u64) -> Settings {
    let mut settings = Settings::default();
    settings.database.url = database.url.clone();
    settings.ingest.bind = "127.0.0.1:0".into();
    settings.admin.bind = "127.0.0.1:0".into();
    settings.webhook.secrets = vec![SecretString::from("bench")];
    settings.service.base_url = sandbox.base_url();
    settings.service.client_id = sandbox.config().client_id.clone();
    settings.service.client_secret =
        Some(SecretString::from(sandbox.config().client_secret.clone()));
    settings.service.requests_per_second = 1_000;
    settings.reconcile.schedule = "".into();
    settings.reconcile.on_start = true;
    settings.source = vec![van_source(sandbox, every)];
    settings
}

/// Part 2: `samples` marks in VAN, each at a random moment of the source's interval, timed
/// until the service has the lead opted out.
async fn way_to_the_service(server: Option<String>, every: u64, samples: usize) {
    let database = BenchDatabase::create_on("daemon.db", server)
        .await
        .expect("bench database");
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: SERVICE_LEADS,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    sandbox.fake_latency(Fake::Van, Duration::ZERO);
    let settings = daemon_settings(&database, &sandbox, every);
    settings.validate().expect("valid settings");
    let app = outreach_sync::app::Application::build(settings.clone())
        .await
        .expect("the daemon");
    let shutdown = CancellationToken::new();
    let daemon = tokio::spawn(app.run_until_stopped(shutdown.clone()));
    let pool = outreach_sync::store::open(&settings)
        .await
        .expect("the daemon's database");
    let mut targets = texting(&sandbox, &pool).await.into_iter();
    let mut seconds = Vec::new();
    for _ in 0..samples {
        let Some((lead, van_id)) = targets.next() else {
            break;
        };
        let pause = rand::thread_rng().gen_range(0.0..every as f64);
        tokio::time::sleep(Duration::from_secs_f64(pause)).await;
        sandbox
            .van_mark(
                DEFAULT_VAN_KEY,
                &VanTarget::VanId(van_id),
                VanMark::DoNotText,
                "phone banker",
            )
            .expect("marked");
        let marked = Instant::now();
        let limit = Duration::from_secs(every * 4 + 60);
        while !opted_out_at_service(&sandbox, &lead) {
            if marked.elapsed() > limit {
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        let secs = marked.elapsed().as_secs_f64();
        if secs > limit.as_secs_f64() {
            println!("  mark {lead}: not at the service after {secs:.0} s");
            continue;
        }
        println!(
            "  mark {lead} (after {pause:.1} s): at the service in {secs:.2} s = {:.2} intervals",
            secs / every as f64
        );
        seconds.push(secs);
    }
    let (median, low, high) = spread(&mut seconds);
    let intervals = median / every as f64;
    println!(
        "  VAN to the service's PATCH at every_secs = {every}: median {median:.2} s \
         (min {low:.2}, max {high:.2}) over {} marks = {intervals:.2} intervals \
         (max {:.2}); target under {TARGET_INTERVALS:.0} intervals: {}",
        seconds.len(),
        high / every as f64,
        if !seconds.is_empty() && high / (every as f64) < TARGET_INTERVALS {
            "met"
        } else {
            "NOT met"
        }
    );
    shutdown.cancel();
    let _ = daemon.await;
    pool.close().await;
    sandbox.shutdown().await;
    drop(database);
}

/// Leads opted in at the service, in the daemon's mirror, with a VAN person: (lead id, VAN
/// ID). Waits for the mirror to be filled at the daemon's start.
async fn texting(sandbox: &RunningSandbox, pool: &Pool) -> Vec<(String, u64)> {
    let started = Instant::now();
    loop {
        let (mirrored,): (i64,) = common::fetch_row(pool, "SELECT COUNT(*) FROM leads")
            .await
            .unwrap_or((0,));
        if usize::try_from(mirrored).unwrap_or(0) >= SERVICE_LEADS {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the mirror holds {mirrored} leads"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ids: std::collections::HashMap<String, u64> = sandbox
        .van_truth()
        .people
        .into_iter()
        .filter_map(|p| Some((p.lead_id?, p.van_id)))
        .collect();
    sandbox
        .leads()
        .into_iter()
        .filter(|l| !l.global_opted_out)
        .filter_map(|l| Some((l.id.clone(), *ids.get(&l.id)?)))
        .collect()
}

fn opted_out_at_service(sandbox: &RunningSandbox, lead: &str) -> bool {
    sandbox
        .leads()
        .into_iter()
        .any(|l| l.id == lead && l.global_opted_out)
}
