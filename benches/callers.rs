//! `cargo bench --bench callers`: a caller's opt-outs held in its other members while
//! webhooks arrive.
//!
//! Three accounts, one caller of all three with the revoke-all rule in force. 100,000
//! opt-outs are imported into one organization of the first account (untimed, before the
//! daemon starts); the daemon then holds each in the first account whole and in the other
//! two (account-wide: an entry for organization `*`, which suppresses the number), as it
//! would after a campaign's first day under the rule. Meanwhile signed consent webhooks
//! are posted to the first account's path at a steady rate, one at a time, and each
//! acknowledgement's latency is kept. When the sharer's cursor has passed every imported
//! opt-out, the same webhooks go on for as long again with nothing left to spread: the
//! baseline, measured in the same run.
//!
//! Printed: the opt-outs spread per second and the entries recorded; the acknowledgement
//! latency (p50, p99, max) while spreading and after, and their ratio. The target: every
//! acknowledgement under 1 s while spreading. SQLite (synchronous = full), a file of its
//! own; PostgreSQL with `BENCH_POSTGRES_URL`, a database of its own. `BENCH_QUICK=1`
//! spreads 10,000. Verdicts are printed, never turned into a failure.

#[allow(dead_code)] // The helpers other benches use.
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{BenchDatabase, POSTGRES_VARIABLE, fetch_row};
use outreach_sync::app::Application;
use outreach_sync::apply::imported::Scope;
use outreach_sync::import::{ListOptions, Request, import};
use outreach_sync::settings::{CallerSettings, Schedule, Settings, Synchronous};
use outreach_sync::signature::{Key, SignatureFormat, sign};
use secrecy::ExposeSecret as _;
use tokio_util::sync::CancellationToken;

const ACCOUNTS: [&str; 3] = ["party", "candidate", "coalition"];
/// Webhooks posted per second, one at a time.
const WEBHOOKS_PER_SEC: u64 = 50;
/// The target: the slowest acknowledgement while spreading.
const TARGET_MAX_ACK: Duration = Duration::from_secs(1);
/// Longest the bench waits for the spreading to end.
const LIMIT: Duration = Duration::from_secs(1800);

fn main() {
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let opt_outs: u64 = if quick { 10_000 } else { 100_000 };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    println!(
        "callers: {opt_outs} opt-outs of one organization of `party` held in the caller's \
         three accounts (party whole, candidate, coalition) while {WEBHOOKS_PER_SEC} signed \
         webhooks a second arrive at `party`\n"
    );
    runtime.block_on(async {
        run("sqlite", None, opt_outs).await;
        match std::env::var(POSTGRES_VARIABLE) {
            Ok(url) => run("postgres", Some(url), opt_outs).await,
            Err(_) => println!("\nPostgreSQL figures skipped: {POSTGRES_VARIABLE} is not set"),
        }
    });
}

async fn run(backend: &str, server: Option<String>, opt_outs: u64) {
    let database = BenchDatabase::create_on("callers.db", server)
        .await
        .expect("a database");
    let settings = settings(&database.url, database.dir.path());
    let pool = outreach_sync::store::open(&settings)
        .await
        .expect("open and migrate");
    populate(&pool, database.dir.path(), opt_outs).await;
    let (last,): (i64,) = fetch_row(&pool, "SELECT COALESCE(MAX(seq), 0) FROM ledger")
        .await
        .expect("the last entry");

    let app = Application::build(settings.clone()).await.expect("build");
    let url = format!("http://{}/webhooks/party", app.ingest_addr());
    let shutdown = CancellationToken::new();
    let daemon = tokio::spawn(app.run_until_stopped(shutdown.clone()));
    let account = settings.accounts().expect("accounts").remove(0);
    let format = SignatureFormat::from(&account.webhook);
    let key = Arc::new(
        Key::for_scheme(format.scheme, account.webhook.secrets[0].expose_secret()).expect("a key"),
    );

    // While spreading.
    let began = Instant::now();
    let spreading = Arc::new(AtomicBool::new(true));
    let poster = tokio::spawn(post_while(
        url.clone(),
        format.clone(),
        key.clone(),
        spreading.clone(),
        "during",
    ));
    loop {
        let cursor = cursor(&pool).await;
        if cursor >= last || began.elapsed() > LIMIT {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let spread_secs = began.elapsed().as_secs_f64();
    spreading.store(false, Ordering::Relaxed);
    let during = poster.await.expect("the poster");
    let (held,): (i64,) = fetch_row(
        &pool,
        "SELECT COUNT(*) FROM ledger WHERE event_ref LIKE 'shared:%'",
    )
    .await
    .expect("count");

    // After: as long again, nothing left to spread (capped at a minute).
    let after_for = Duration::from_secs_f64(spread_secs.min(60.0));
    let idle = Arc::new(AtomicBool::new(true));
    let poster = tokio::spawn(post_while(url, format, key, idle.clone(), "after"));
    tokio::time::sleep(after_for).await;
    idle.store(false, Ordering::Relaxed);
    let after = poster.await.expect("the poster");
    shutdown.cancel();
    let _ = daemon.await;
    pool.close().await;

    let done = cursor_done(last, spread_secs);
    println!("\n{backend}: {}", database_about(&database));
    println!(
        "  spread {opt_outs} opt-outs in {spread_secs:.1} s{done}: {:.0} opt-outs/s, {held} entries recorded in the members ({:.0}/s)",
        opt_outs as f64 / spread_secs,
        held as f64 / spread_secs
    );
    println!(
        "  acknowledgements while spreading: {} (p50 {}, p99 {}, max {})",
        during.len(),
        ms(percentile(&during, 0.5)),
        ms(percentile(&during, 0.99)),
        ms(percentile(&during, 1.0))
    );
    println!(
        "  acknowledgements after:           {} (p50 {}, p99 {}, max {})",
        after.len(),
        ms(percentile(&after, 0.5)),
        ms(percentile(&after, 0.99)),
        ms(percentile(&after, 1.0))
    );
    let ratio = |q| percentile(&during, q).as_secs_f64() / percentile(&after, q).as_secs_f64();
    println!(
        "  while spreading / after: p50 {:.2}, p99 {:.2}",
        ratio(0.5),
        ratio(0.99)
    );
    let max = percentile(&during, 1.0);
    println!(
        "  target: every acknowledgement under {} ms while spreading: {}",
        TARGET_MAX_ACK.as_millis(),
        if max < TARGET_MAX_ACK {
            "met"
        } else {
            "MISSED"
        }
    );
}

fn cursor_done(last: i64, secs: f64) -> String {
    if secs >= LIMIT.as_secs_f64() {
        format!(
            " (NOT DONE: stopped at the {}-s limit, last entry {last})",
            LIMIT.as_secs()
        )
    } else {
        String::new()
    }
}

fn database_about(database: &BenchDatabase) -> String {
    if database.is_postgres() {
        "a database of its own".to_owned()
    } else {
        "a file of its own, synchronous = full".to_owned()
    }
}

/// The daemon of the three accounts and their caller.
fn settings(url: &str, dir: &std::path::Path) -> Settings {
    let file = dir.join("accounts.toml");
    let sections: String = ACCOUNTS
        .iter()
        .map(|name| {
            format!(
                "[[account]]\nname = \"{name}\"\nbase_url = \"http://127.0.0.1:9\"\nclient_id = \"{name}@example.org\"\nclient_secret = \"bench-client-secret-{name}\"\n[account.webhook]\nsecrets = [\"bench-webhook-secret-{name}\"]\n\n"
            )
        })
        .collect();
    std::fs::write(&file, sections).expect("the accounts");
    let mut settings = Settings::load_unvalidated(Some(&file), &[]).expect("the accounts");
    settings.reconcile.on_start = false;
    settings.reconcile.schedule = Schedule::from("");
    settings.database.url = url.to_owned();
    settings.database.synchronous = Synchronous::Full;
    settings.ingest.bind = "127.0.0.1:0".into();
    settings.admin.bind = "127.0.0.1:0".into();
    settings.consent.revoke_all_from = "2020-01-01".into();
    settings.caller = vec![CallerSettings {
        name: "bench".into(),
        members: ACCOUNTS.iter().map(|a| (*a).to_owned()).collect(),
    }];
    settings.validate().expect("valid settings");
    settings
}

/// `count` opt-outs imported into `party`'s `org_1`, as `import` records them.
async fn populate(pool: &outreach_sync::store::Pool, dir: &std::path::Path, count: u64) {
    let path = dir.join("list.csv");
    let mut text = String::from("phone\n");
    for n in 0..count {
        text.push_str(&format!("+1202{:07}\n", 5_000_000 + n));
    }
    std::fs::write(&path, text).expect("the list");
    let request = Request {
        account: outreach_sync::model::AccountId::new("party").expect("an account"),
        scope: Scope::Organizations(vec!["org_1".into()]),
        options: ListOptions::default(),
        file: path.display().to_string(),
        actor: "cli:bench".into(),
        reason: Some("bench".into()),
        skip_invalid: false,
        dry_run: false,
        outside_the_daemon: false,
    };
    let file = std::fs::File::open(&path).expect("the list");
    let report = import(pool, file, &request).await.expect("the import");
    assert_eq!(report.recorded, count, "an entry per number");
}

async fn cursor(pool: &outreach_sync::store::Pool) -> i64 {
    let row: Result<(String,), _> = fetch_row(
        pool,
        "SELECT value FROM daemon_state WHERE key = 'share_cursor'",
    )
    .await;
    row.ok().and_then(|(v,)| v.parse().ok()).unwrap_or(0)
}

/// Posts a signed consent webhook every 1/[`WEBHOOKS_PER_SEC`] s while `on`; each
/// acknowledgement's latency.
async fn post_while(
    url: String,
    format: SignatureFormat,
    key: Arc<Key>,
    on: Arc<AtomicBool>,
    label: &'static str,
) -> Vec<Duration> {
    let http = reqwest::Client::new();
    let mut latencies = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / WEBHOOKS_PER_SEC));
    let mut n = 0u64;
    while on.load(Ordering::Relaxed) {
        tick.tick().await;
        n += 1;
        let body = serde_json::json!({
            "type": "consentUpdate-v1",
            "id": format!("evt-{label}-{n}"),
            "createdAt": chrono::Utc::now().to_rfc3339(),
            "data": {"organizationId": "org_2", "phoneNumber": format!("+1303{:07}", 5_000_000 + n), "globalOptedOut": true}
        })
        .to_string();
        let now = chrono::Utc::now().timestamp();
        let mut request = http
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone());
        for (name, value) in sign(&format, &key, body.as_bytes(), now, None) {
            request = request.header(name, value);
        }
        let sent = Instant::now();
        match request.send().await {
            Ok(answer) if answer.status().is_success() => latencies.push(sent.elapsed()),
            Ok(answer) => println!("  a webhook was answered {}", answer.status()),
            Err(error) => println!("  a webhook failed: {error}"),
        }
    }
    latencies
}

fn percentile(latencies: &[Duration], q: f64) -> Duration {
    if latencies.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}
