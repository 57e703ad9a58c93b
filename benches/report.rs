//! `cargo bench --bench report`: the compliance report over a large ledger.
//!
//! A database of 1,000,000 ledger entries spread evenly over 300 days (over 100,000 leads
//! `lead_N`, 3 organizations; each lead opted out once in those days, so 10% of the entries
//! are opt-outs; 1% of the opt-outs made here, source `local`, with their `pushes` rows, the
//! last day's still pending; 10% from reconciliation, the rest webhooks), the mirror's
//! `leads` and `consent_state` row of each, 5,000,000 mirrored messages spread evenly over
//! the leads and the 300 days, and 3 subscribers whose acknowledgements cover every batch of
//! 100 entries (`subscriber_acks`, as their senders write them; the third is the last 0.5%
//! of them behind). It is written directly with SQL in bulk, untimed (on SQLite in one
//! transaction with `synchronous = OFF` on the populating connection only; on PostgreSQL
//! with `INSERT ... SELECT` from `generate_series`, then `VACUUM ANALYZE` standing in for
//! autovacuum). SQLite gets no `ANALYZE`: the daemon never runs one.
//!
//! Then, each in a child process of its own that opens the database as the daemon does and
//! reports its peak RSS (VmHWM), twice in turn:
//!
//! - the baseline: the report's reads alone (`opt_outs` of the window a page of 1,000 at a
//!   time, `ack_spans` of each subscriber, `messages_of_leads` for the leads of those rows
//!   in chunks of 1,000), nothing built from them;
//! - the report: the last 30 days read a page at a time and written as JSON as it is read
//!   (`compliance::write`, as `GET /v1/compliance` streams it) into a sink that counts the
//!   bytes.
//!
//! Targets: the report, JSON included, in under 5 s with a peak RSS under 200 MB, on both
//! backends. Read the report/baseline ratio beside them.
//!
//! SQLite always; PostgreSQL with `BENCH_POSTGRES_URL` (e.g.
//! `postgres://postgres@127.0.0.1:5432/test`), where the run creates a database of its own
//! and drops it after; when it is not set, or the run on it fails, its figures are skipped
//! (and said to be). `BENCH_QUICK=1` runs a tenth of the size. `BENCH_KEEP=1` keeps each
//! database after its run and prints where it is (to look at the plans). Verdicts are
//! printed, never turned into a failure.

#[allow(dead_code)] // The helpers other benches use.
mod common;

use std::process::Command;
use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};
use common::{BenchDatabase, POSTGRES_VARIABLE};
use outreach_sync::compliance::{self, Rules, Window};
use outreach_sync::model::Timestamp;
use outreach_sync::settings::{Settings, SubscriberSettings};
use outreach_sync::store::{ComplianceStore as _, Pool, SubscriberStore as _};
use secrecy::SecretString;

const TARGET_SECS: f64 = 5.0;
const TARGET_PEAK_RSS_BYTES: f64 = 200e6;
/// Baseline and report, each measured this many times in turn.
const ROUNDS: usize = 2;
/// The first entry's time: 2026-01-01T00:00:00Z, in Unix milliseconds.
const START_MS: i64 = 1_767_225_600_000;
const DAY_MS: i64 = 86_400_000;
/// The days the entries and the messages are spread over, ending at the report's `now`.
const SPAN_DAYS: i64 = 300;
/// The report's window: the last days of the span.
const WINDOW_DAYS: i64 = 30;
const SUBSCRIBERS: [&str; 3] = ["crm", "warehouse", "archive"];
const SECRET: &str = "whsec_YmVuY2gtc3Vic2NyaWJlci1zZWNyZXQ=";
/// Entries per request a subscriber acknowledged.
const ACK_BATCH: i64 = 100;
/// The share of the requests (the last ones) the third subscriber has not had acknowledged
/// yet: 1 in this many (50 requests of 100 entries in 1,000,000).
const LAGGING_SHARE: i64 = 200;
/// Opt-outs whose messages are read in one statement, as the report reads them.
const MESSAGES_CHUNK: usize = 1000;
/// Rows per statement while populating SQLite.
const CHUNK: i64 = 250_000;

#[derive(Debug, Clone, Copy)]
struct Size {
    entries: i64,
    leads: i64,
    messages: i64,
}

impl Size {
    fn from_env() -> Self {
        let scale = if std::env::var_os("BENCH_QUICK").is_some() {
            10
        } else {
            1
        };
        Self {
            entries: 1_000_000 / scale,
            leads: 100_000 / scale,
            messages: 5_000_000 / scale,
        }
    }

    /// The last requests the third subscriber has not had acknowledged.
    fn lagging_batches(self) -> i64 {
        self.entries / ACK_BATCH / LAGGING_SHARE
    }

    /// Milliseconds between two entries, and between two messages.
    fn entry_step_ms(self) -> i64 {
        SPAN_DAYS * DAY_MS / self.entries
    }

    fn message_step_ms(self) -> i64 {
        SPAN_DAYS * DAY_MS / self.messages
    }
}

/// The report's `now` (the end of the span) and its window, the last [`WINDOW_DAYS`].
fn window() -> (Window, DateTime<Utc>) {
    let now = DateTime::from_timestamp_millis(START_MS + SPAN_DAYS * DAY_MS).expect("a time");
    let window = Window {
        since: now - TimeDelta::days(WINDOW_DAYS),
        until: now,
        organization: None,
        account: None,
    };
    (window, now)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--measure") {
        measure_child(&args[i + 1], &args[i + 2]);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--backend") {
        backend_run(&args[i + 1]);
        return;
    }
    let size = Size::from_env();
    println!(
        "report: the compliance report over {} ledger entries (10% opt-outs) over {SPAN_DAYS} \
         days, {} leads, {} mirrored messages, {} subscribers; window: the last {WINDOW_DAYS} \
         days; each measurement a child process (peak RSS from VmHWM); {} cores\n",
        size.entries,
        size.leads,
        size.messages,
        SUBSCRIBERS.len(),
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    let exe = std::env::current_exe().expect("this bench");
    let sqlite = Command::new(&exe)
        .args(["--backend", "sqlite"])
        .env_remove(POSTGRES_VARIABLE)
        .status()
        .expect("the SQLite run");
    if !sqlite.success() {
        println!("SQLite: the run failed ({sqlite}; see above)");
    }
    println!();
    if std::env::var_os(POSTGRES_VARIABLE).is_none() {
        println!(
            "PostgreSQL figures skipped: {POSTGRES_VARIABLE} is not set \
             (e.g. postgres://postgres@127.0.0.1:5432/test)"
        );
        return;
    }
    let postgres = Command::new(&exe)
        .args(["--backend", "postgres"])
        .status()
        .expect("the PostgreSQL run");
    if !postgres.success() {
        println!("PostgreSQL figures skipped: the run failed ({postgres}; see above)");
    }
}

/// One backend's run (the environment names it): a fresh database populated, the
/// measurements in child processes, the verdicts; the database dropped after.
fn backend_run(backend: &str) {
    let size = Size::from_env();
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let (database, pool) = BenchDatabase::open("report.db").await;
        assert_eq!(database.is_postgres(), backend == "postgres");
        let name = database.backend();
        println!(
            "{name}: {}",
            database.describe(&pool).await.expect("describe")
        );
        let began = Instant::now();
        let steps = match &pool {
            Pool::Sqlite(p) => populate_sqlite(p, size).await,
            Pool::Postgres(p) => populate_postgres(p, size).await,
        };
        let populated = began.elapsed().as_secs_f64();
        let steps: Vec<String> = steps
            .iter()
            .map(|(what, secs)| format!("{what} {secs:.1} s"))
            .collect();
        println!(
            "  populated in {populated:.1} s ({}); database {:.0} MiB",
            steps.join(", "),
            database_bytes(&pool).await as f64 / (1024.0 * 1024.0)
        );
        pool.close().await;
        let (window, now) = window();
        println!(
            "  window {} .. {}, now {}",
            Timestamp(window.since),
            Timestamp(window.until),
            Timestamp(now)
        );
        println!(
            "  {:>5}  {:<8} {:>8} {:>13} {:>9} {:>9} {:>11}  detail",
            "round", "run", "seconds", "peak RSS MiB", "opt-outs", "messages", "JSON bytes"
        );
        let mut reports = Vec::new();
        for round in 1..=ROUNDS {
            let base = child("baseline", &database.url);
            println!(
                "  {round:>5}  {:<8} {:>8.3} {:>13.1} {:>9} {:>9} {:>11}  opt_outs {:.3} s, \
                 ack_spans {:.3} s ({} spans), messages_of_leads {:.3} s",
                "baseline",
                base.secs,
                base.mib(),
                base.opt_outs,
                base.messages,
                "-",
                base.first_secs,
                base.second_secs,
                base.spans,
                base.third_secs
            );
            let report = child("report", &database.url);
            println!(
                "  {round:>5}  {:<8} {:>8.3} {:>13.1} {:>9} {:>9} {:>11}  built {:.3} s, \
                 JSON {:.3} s",
                "report",
                report.secs,
                report.mib(),
                report.opt_outs,
                "-",
                report.json_bytes,
                report.first_secs,
                report.second_secs
            );
            println!(
                "  {:>5}  report/baseline: time {:.2}, peak RSS {:.2}",
                "",
                report.secs / base.secs,
                report.mib() / base.mib()
            );
            assert_eq!(report.opt_outs, base.opt_outs, "the same opt-outs");
            reports.push(report);
        }
        let last = reports.last().expect("a report");
        println!(
            "  the report's totals: {} opt-outs: {} honoured, {} honoured late, {} pending, {} \
             overdue; {} messages sent after an opt-out",
            last.opt_outs,
            last.honoured,
            last.honoured_late,
            last.pending,
            last.overdue,
            last.sent_after
        );
        let met = |ok: bool| if ok { "met" } else { "NOT met" };
        let secs: Vec<String> = reports.iter().map(|r| format!("{:.2} s", r.secs)).collect();
        let rss: Vec<String> = reports
            .iter()
            .map(|r| format!("{:.1} MiB", r.mib()))
            .collect();
        let fast = reports.iter().filter(|r| r.secs < TARGET_SECS).count();
        let small = reports
            .iter()
            .filter(|r| r.peak_rss_kib as f64 * 1024.0 < TARGET_PEAK_RSS_BYTES)
            .count();
        println!(
            "  {name}: target < {TARGET_SECS} s: {} in {fast} of {ROUNDS} rounds ({}); peak RSS \
             < 200 MB: {} in {small} of {ROUNDS} rounds ({})",
            met(fast == ROUNDS),
            secs.join(", "),
            met(small == ROUNDS),
            rss.join(", ")
        );
        if std::env::var_os("BENCH_KEEP").is_some() {
            println!("  kept: {}", database.url);
            std::mem::forget(database);
        }
    });
}

/// Database size in bytes.
async fn database_bytes(pool: &Pool) -> i64 {
    match pool {
        Pool::Sqlite(p) => sqlx::query_scalar(
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
        )
        .fetch_one(p)
        .await
        .expect("size"),
        Pool::Postgres(p) => sqlx::query_scalar("SELECT pg_database_size(current_database())")
            .fetch_one(p)
            .await
            .expect("size"),
    }
}

/// What a child measured; the fields a run has no use for stay 0.
#[derive(Debug, Default)]
struct Measured {
    secs: f64,
    /// Baseline: `opt_outs`, `ack_spans`, `messages_of_leads`; report: built, JSON, 0.
    first_secs: f64,
    second_secs: f64,
    third_secs: f64,
    opt_outs: u64,
    spans: u64,
    messages: u64,
    json_bytes: u64,
    honoured: u64,
    honoured_late: u64,
    pending: u64,
    overdue: u64,
    sent_after: u64,
    peak_rss_kib: u64,
}

impl Measured {
    fn mib(&self) -> f64 {
        self.peak_rss_kib as f64 / 1024.0
    }

    fn line(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {} {} {} {} {} {} {}",
            self.secs,
            self.first_secs,
            self.second_secs,
            self.third_secs,
            self.opt_outs,
            self.spans,
            self.messages,
            self.json_bytes,
            self.honoured,
            self.honoured_late,
            self.pending,
            self.overdue,
            self.sent_after,
            self.peak_rss_kib
        )
    }

    fn parse(text: &str) -> Self {
        let mut fields = text.split_whitespace();
        let mut float = || -> f64 { fields.next().expect("a figure").parse().expect("a number") };
        let secs = float();
        let first_secs = float();
        let second_secs = float();
        let third_secs = float();
        let mut count = || float() as u64;
        Self {
            secs,
            first_secs,
            second_secs,
            third_secs,
            opt_outs: count(),
            spans: count(),
            messages: count(),
            json_bytes: count(),
            honoured: count(),
            honoured_late: count(),
            pending: count(),
            overdue: count(),
            sent_after: count(),
            peak_rss_kib: count(),
        }
    }
}

/// Runs `mode` on the database at `url` in a child process (the environment passed on).
fn child(mode: &str, url: &str) -> Measured {
    let out = Command::new(std::env::current_exe().expect("this bench"))
        .args(["--measure", mode, url])
        .output()
        .expect("a child run");
    assert!(
        out.status.success(),
        "{mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Measured::parse(&String::from_utf8_lossy(&out.stdout))
}

/// A child: opens the database as the daemon does (untimed), measures `mode`, prints the
/// figures and its peak RSS.
fn measure_child(mode: &str, url: &str) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let mut measured = runtime.block_on(async {
        let mut settings = Settings::default();
        settings.database.url = url.to_owned();
        settings.webhook.secrets = vec![SecretString::from("bench")];
        settings.subscriber = SUBSCRIBERS
            .iter()
            .map(|name| {
                SubscriberSettings::new(name, &format!("http://127.0.0.1:9/{name}"), SECRET)
            })
            .collect();
        let pool = outreach_sync::store::open(&settings)
            .await
            .expect("open the database");
        let rules = std::sync::Arc::new(Rules::of(&settings).expect("the rules"));
        assert_eq!(rules.subscribers.len(), SUBSCRIBERS.len());
        let (window, now) = window();
        let measured = match mode {
            "baseline" => reads_only(&pool, &rules, &window).await,
            "report" => report_json(&pool, &rules, &window, now).await,
            other => panic!("no mode {other}"),
        };
        pool.close().await;
        measured
    });
    measured.peak_rss_kib = peak_rss_kib();
    println!("{}", measured.line());
}

/// The report's reads, in its order, with nothing built from them: the rows of the
/// window; each subscriber's acknowledged spans over them; the messages of their leads (a
/// row's own and the mirror's for its pair), a chunk of opt-outs at a time.
async fn reads_only(pool: &Pool, rules: &Rules, window: &Window) -> Measured {
    let began = Instant::now();
    // A page at a time, as the report reads them.
    let mut rows = Vec::new();
    loop {
        let after = rows
            .last()
            .map_or(0, |row: &outreach_sync::model::OptOutRow| row.seq);
        let page = pool
            .opt_outs(
                window.since,
                window.until,
                window.scope(),
                after,
                compliance::PAGE as i64,
            )
            .await
            .expect("opt_outs");
        let last_page = page.len() < compliance::PAGE;
        rows.extend(page);
        if last_page {
            break;
        }
    }
    let rows_secs = began.elapsed().as_secs_f64();
    let mut spans = 0;
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        for subscriber in &rules.subscribers {
            let found = pool
                .ack_spans(&subscriber.name, first.seq, last.seq)
                .await
                .expect("ack_spans");
            spans += found.len() as u64;
            std::hint::black_box(found);
        }
    }
    let spans_secs = began.elapsed().as_secs_f64() - rows_secs;
    let mut messages = 0;
    for chunk in rows.chunks(MESSAGES_CHUNK) {
        let mut leads: Vec<&str> = chunk
            .iter()
            .flat_map(outreach_sync::model::OptOutRow::leads)
            .collect();
        leads.sort_unstable();
        leads.dedup();
        let found = pool
            .messages_of_leads(&leads)
            .await
            .expect("messages_of_leads");
        messages += found.len() as u64;
        std::hint::black_box(found);
    }
    let secs = began.elapsed().as_secs_f64();
    std::hint::black_box(&rows);
    Measured {
        secs,
        first_secs: rows_secs,
        second_secs: spans_secs,
        third_secs: secs - rows_secs - spans_secs,
        opt_outs: rows.len() as u64,
        spans,
        messages,
        ..Measured::default()
    }
}

/// Counts the bytes written to it, and keeps none.
struct Counted(u64);

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The report, read a page at a time and written as JSON (as `GET /v1/compliance` does).
async fn report_json(
    pool: &Pool,
    rules: &std::sync::Arc<Rules>,
    window: &Window,
    now: DateTime<Utc>,
) -> Measured {
    let began = Instant::now();
    let items = compliance::Items::new(pool.clone(), rules.clone(), window.clone(), now);
    let mut sink = compliance::Blocking(Counted(0));
    let summary = compliance::write(items, rules, window, compliance::Listing::Json, &mut sink)
        .await
        .expect("the report");
    let secs = began.elapsed().as_secs_f64();
    let totals = &summary.totals;
    Measured {
        secs,
        first_secs: secs,
        second_secs: 0.0,
        opt_outs: totals.opt_outs,
        json_bytes: sink.0.0,
        honoured: totals.honoured,
        honoured_late: totals.honoured_late,
        pending: totals.pending,
        overdue: totals.overdue,
        sent_after: totals.sent_after_opt_out,
        ..Measured::default()
    }
}

/// The source of entry `j`'s opt-out, by its lead `l` (SQL, both dialects): 1% made here,
/// 10% from reconciliation, the rest webhooks; an opt-in is a webhook's.
const SOURCE: &str = "CASE WHEN (l + r) % 10 <> 0 THEN 'webhook' WHEN (l / 10) % 100 = 0 \
                      THEN 'local' WHEN (l / 10) % 10 = 5 THEN 'reconcile' ELSE 'webhook' END";

/// SQLite: `ms` (Unix milliseconds) as the ledger stores times.
fn sqlite_time(ms: &str) -> String {
    format!(
        "strftime('%Y-%m-%dT%H:%M:%S', ({ms}) / 1000, 'unixepoch') \
         || printf('.%03dZ', ({ms}) % 1000)"
    )
}

/// Populates SQLite in one transaction on one connection with `synchronous = OFF`; each
/// step and its seconds.
async fn populate_sqlite(pool: &sqlx::SqlitePool, size: Size) -> Vec<(String, f64)> {
    let mut conn = pool.acquire().await.expect("a connection");
    for pragma in ["PRAGMA synchronous = OFF", "PRAGMA cache_size = -524288"] {
        sqlx::query(pragma)
            .execute(&mut *conn)
            .await
            .expect("pragma");
    }
    let mut tx = sqlx::Connection::begin(&mut *conn).await.expect("begin");
    let mut steps = Vec::new();
    let mut began = Instant::now();
    let mut step = |what: String, began: &mut Instant| {
        steps.push((what, began.elapsed().as_secs_f64()));
        *began = Instant::now();
    };

    let ledger = format!(
        "WITH RECURSIVE n(j) AS (SELECT ?1 UNION ALL SELECT j + 1 FROM n WHERE j < ?2),
              e AS (SELECT j, j % ?3 AS l, j / ?3 AS r, ?4 + j * ?5 AS ms FROM n)
         INSERT INTO ledger (seq, organization_id, lead_id, phone_number, opted_out, occurred_at,
                             recorded_at, source, event_ref, superseded, hash)
         SELECT j + 1, 'org_' || (l % 3), 'lead_' || l, printf('+1555%07d', l),
                (l + r) % 10 = 0, {}, {}, {SOURCE}, 'event:evt_' || j, 0,
                printf('%064x', j + 1)
         FROM e",
        sqlite_time("ms"),
        sqlite_time("ms + 1000")
    );
    let mut start = 0;
    while start < size.entries {
        let end = (start + CHUNK).min(size.entries);
        sqlx::query(&ledger)
            .bind(start)
            .bind(end - 1)
            .bind(size.leads)
            .bind(START_MS)
            .bind(size.entry_step_ms())
            .execute(&mut *tx)
            .await
            .expect("the ledger");
        start = end;
    }
    step(format!("ledger {}", size.entries), &mut began);

    sqlx::query(
        "WITH RECURSIVE n(l) AS (SELECT 0 UNION ALL SELECT l + 1 FROM n WHERE l < ?1 - 1)
         INSERT INTO leads (id, organization_id, phone_number, first_name, created_at,
                            observed_at, updated_at)
         SELECT 'lead_' || l, 'org_' || (l % 3), printf('+1555%07d', l), 'Ada',
                '2025-12-01T00:00:00Z', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'
         FROM n",
    )
    .bind(size.leads)
    .execute(&mut *tx)
    .await
    .expect("the leads");
    // Each lead's last entry is its state.
    sqlx::query(
        "INSERT INTO consent_state (organization_id, phone_number, lead_id, opted_out,
                                    changed_at, source, seq)
         SELECT organization_id, phone_number, lead_id, opted_out, occurred_at, source, seq
         FROM ledger WHERE seq > ?1",
    )
    .bind(size.entries - size.leads)
    .execute(&mut *tx)
    .await
    .expect("the consent state");
    step(
        format!("leads and consent_state {}", size.leads),
        &mut began,
    );

    let messages = format!(
        "WITH RECURSIVE n(m) AS (SELECT ?1 UNION ALL SELECT m + 1 FROM n WHERE m < ?2),
              e AS (SELECT m, m % ?3 AS l, ?4 + m * ?5 AS ms FROM n),
              t AS (SELECT m, l, ms, {} AS at FROM e)
         INSERT INTO messages (id, thread_id, status, type, created_at, lead_id,
                               organization_id, terminal, status_at, source, first_seen_at,
                               updated_at)
         SELECT 'msg_' || m, 'th_' || l,
                CASE m % 20 WHEN 0 THEN 'failed' WHEN 1 THEN 'sent' ELSE 'delivered' END,
                'SMS', strftime('%Y-%m-%dT%H:%M:%SZ', ms / 1000, 'unixepoch'), 'lead_' || l,
                'org_' || (l % 3), m % 20 <> 1, at, 'webhook', at, at
         FROM t",
        sqlite_time("ms + 5000")
    );
    let mut start = 0;
    while start < size.messages {
        let end = (start + CHUNK).min(size.messages);
        sqlx::query(&messages)
            .bind(start)
            .bind(end - 1)
            .bind(size.leads)
            .bind(START_MS)
            .bind(size.message_step_ms())
            .execute(&mut *tx)
            .await
            .expect("the messages");
        start = end;
    }
    step(format!("messages {}", size.messages), &mut began);

    let acks = format!(
        "WITH RECURSIVE b(b) AS (SELECT 0 UNION ALL SELECT b + 1 FROM b WHERE b < ?1 - 1),
              s(k, name) AS (VALUES (0, 'crm'), (1, 'warehouse'), (2, 'archive'))
         INSERT INTO subscriber_acks (subscriber, first_seq, last_seq, acked_at)
         SELECT name, b * ?2 + 1, b * ?2 + ?2, {}
         FROM b, s WHERE k < 2 OR b < ?1 - ?5",
        sqlite_time("?3 + (b * ?2 + ?2 - 1) * ?4 + (2 + k) * 1000")
    );
    let acked = sqlx::query(&acks)
        .bind(size.entries / ACK_BATCH)
        .bind(ACK_BATCH)
        .bind(START_MS)
        .bind(size.entry_step_ms())
        .bind(size.lagging_batches())
        .execute(&mut *tx)
        .await
        .expect("the acknowledgements")
        .rows_affected();
    let lagging = size.entries - size.lagging_batches() * ACK_BATCH;
    sqlx::query(
        "INSERT INTO subscribers (name, cursor, last_success_ms)
         VALUES ('crm', ?1, 0), ('warehouse', ?1, 0), ('archive', ?2, 0)",
    )
    .bind(size.entries)
    .bind(lagging)
    .execute(&mut *tx)
    .await
    .expect("the subscribers");
    // Opt-outs made here: sent 3 s after, but those of the last day, still pending.
    let pending_from = Timestamp(window().1 - TimeDelta::days(1));
    let pushes = sqlx::query(
        "INSERT INTO pushes (seq, organization_id, phone_number, opted_out, state, attempts,
                             next_attempt_at, first_attempt_at, last_attempt_at, lead_id,
                             created_at, finished_at)
         SELECT seq, organization_id, phone_number, opted_out,
                CASE WHEN occurred_at >= ?1 THEN 'pending' ELSE 'sent' END, 1, occurred_at,
                occurred_at, occurred_at, lead_id, occurred_at,
                CASE WHEN occurred_at >= ?1 THEN NULL
                     ELSE strftime('%Y-%m-%dT%H:%M:%fZ', occurred_at, '+3 seconds') END
         FROM ledger WHERE source = 'local'",
    )
    .bind(pending_from)
    .execute(&mut *tx)
    .await
    .expect("the pushes")
    .rows_affected();
    step(
        format!("subscriber_acks {acked} and pushes {pushes}"),
        &mut began,
    );
    tx.commit().await.expect("commit");
    step("commit".into(), &mut began);
    steps
}

/// Populates PostgreSQL with `INSERT ... SELECT` from `generate_series`, then `VACUUM
/// ANALYZE` (autovacuum's work, done at once); each step and its seconds.
async fn populate_postgres(pool: &sqlx::PgPool, size: Size) -> Vec<(String, f64)> {
    let mut steps = Vec::new();
    let mut began = Instant::now();
    let mut step = |what: String, began: &mut Instant| {
        steps.push((what, began.elapsed().as_secs_f64()));
        *began = Instant::now();
    };
    sqlx::query(&format!(
        "INSERT INTO ledger (seq, organization_id, lead_id, phone_number, opted_out,
                             occurred_at, recorded_at, source, event_ref, superseded, hash)
         SELECT j + 1, 'org_' || (l % 3), 'lead_' || l, '+1555' || lpad(l::text, 7, '0'),
                (l + r) % 10 = 0, at, at + interval '1 second', {SOURCE}, 'event:evt_' || j,
                FALSE, lpad(to_hex(j + 1), 64, '0')
         FROM (SELECT j, j % $2 AS l, j / $2 AS r,
                      timestamptz 'epoch' + ($3 + j * $4) * interval '1 millisecond' AS at
               FROM generate_series(0, $1 - 1) AS j) AS e"
    ))
    .bind(size.entries)
    .bind(size.leads)
    .bind(START_MS)
    .bind(size.entry_step_ms())
    .execute(pool)
    .await
    .expect("the ledger");
    sqlx::query("UPDATE ledger_head SET seq = $1")
        .bind(size.entries)
        .execute(pool)
        .await
        .expect("the ledger's head");
    step(format!("ledger {}", size.entries), &mut began);

    sqlx::query(
        "INSERT INTO leads (id, organization_id, phone_number, first_name, created_at,
                            observed_at, updated_at)
         SELECT 'lead_' || l, 'org_' || (l % 3), '+1555' || lpad(l::text, 7, '0'), 'Ada',
                '2025-12-01T00:00:00Z', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'
         FROM generate_series(0, $1 - 1) AS l",
    )
    .bind(size.leads)
    .execute(pool)
    .await
    .expect("the leads");
    sqlx::query(
        "INSERT INTO consent_state (organization_id, phone_number, lead_id, opted_out,
                                    changed_at, source, seq)
         SELECT organization_id, phone_number, lead_id, opted_out, occurred_at, source, seq
         FROM ledger WHERE seq > $1",
    )
    .bind(size.entries - size.leads)
    .execute(pool)
    .await
    .expect("the consent state");
    step(
        format!("leads and consent_state {}", size.leads),
        &mut began,
    );

    sqlx::query(
        "INSERT INTO messages (id, thread_id, status, type, created_at, lead_id,
                               organization_id, terminal, status_at, source, first_seen_at,
                               updated_at)
         SELECT 'msg_' || m, 'th_' || l,
                CASE m % 20 WHEN 0 THEN 'failed' WHEN 1 THEN 'sent' ELSE 'delivered' END,
                'SMS', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                'lead_' || l, 'org_' || (l % 3), m % 20 <> 1, at + interval '5 seconds',
                'webhook', at + interval '5 seconds', at + interval '5 seconds'
         FROM (SELECT m, m % $2 AS l,
                      timestamptz 'epoch' + ($3 + m * $4) * interval '1 millisecond' AS at
               FROM generate_series(0, $1 - 1) AS m) AS e",
    )
    .bind(size.messages)
    .bind(size.leads)
    .bind(START_MS)
    .bind(size.message_step_ms())
    .execute(pool)
    .await
    .expect("the messages");
    step(format!("messages {}", size.messages), &mut began);

    let acked = sqlx::query(
        "INSERT INTO subscriber_acks (subscriber, first_seq, last_seq, acked_at)
         SELECT s.name, b * $2 + 1, b * $2 + $2,
                timestamptz 'epoch'
                + ($3 + (b * $2 + $2 - 1) * $4 + (2 + s.k) * 1000) * interval '1 millisecond'
         FROM generate_series(0, $1 - 1) AS b,
              (VALUES (0, 'crm'), (1, 'warehouse'), (2, 'archive')) AS s (k, name)
         WHERE s.k < 2 OR b < $1 - $5",
    )
    .bind(size.entries / ACK_BATCH)
    .bind(ACK_BATCH)
    .bind(START_MS)
    .bind(size.entry_step_ms())
    .bind(size.lagging_batches())
    .execute(pool)
    .await
    .expect("the acknowledgements")
    .rows_affected();
    let lagging = size.entries - size.lagging_batches() * ACK_BATCH;
    sqlx::query(
        "INSERT INTO subscribers (name, cursor, last_success_ms)
         VALUES ('crm', $1, 0), ('warehouse', $1, 0), ('archive', $2, 0)",
    )
    .bind(size.entries)
    .bind(lagging)
    .execute(pool)
    .await
    .expect("the subscribers");
    let pending_from = Timestamp(window().1 - TimeDelta::days(1));
    let pushes = sqlx::query(
        "INSERT INTO pushes (seq, organization_id, phone_number, opted_out, state, attempts,
                             next_attempt_at, first_attempt_at, last_attempt_at, lead_id,
                             created_at, finished_at)
         SELECT seq, organization_id, phone_number, opted_out,
                CASE WHEN occurred_at >= $1 THEN 'pending' ELSE 'sent' END, 1, occurred_at,
                occurred_at, occurred_at, lead_id, occurred_at,
                CASE WHEN occurred_at >= $1 THEN NULL
                     ELSE occurred_at + interval '3 seconds' END
         FROM ledger WHERE source = 'local'",
    )
    .bind(pending_from)
    .execute(pool)
    .await
    .expect("the pushes")
    .rows_affected();
    step(
        format!("subscriber_acks {acked} and pushes {pushes}"),
        &mut began,
    );
    sqlx::query("VACUUM ANALYZE")
        .execute(pool)
        .await
        .expect("vacuum");
    step("VACUUM ANALYZE".into(), &mut began);
    steps
}

/// Peak resident set size of this process, in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
