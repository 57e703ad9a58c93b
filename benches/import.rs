//! `cargo bench --bench import`: an opt-out list read, then recorded.
//!
//! A list of 1,000,000 rows in the formats exports come in (`(555) 123-4567`,
//! `555.123.4567`, `+1 555 123 4567`, `5551234567`, a quoted field with the delimiter in it),
//! written to a file; its numbers repeat past row 490,000, so it holds 490,000 distinct
//! numbers. The baseline splits the same file into records with the same CSV reader and
//! touches the phone field, nothing else. Then, each beside it:
//!
//! - `read`: the list reader tells the delimiter, finds the column, normalizes every number
//!   to E.164, tells repeats and hashes the file (nothing is recorded). Target: 200,000
//!   rows/s.
//! - `record`: the whole import (`import::import`: the list read, then its distinct numbers
//!   recorded a batch per transaction) for one organization, into a fresh SQLite file
//!   (`synchronous = "full"`) and into a fresh PostgreSQL database; and, at the larger size,
//!   for the whole account (`--account`: an entry per number for the account, and the number
//!   suppressed) on SQLite. Its rate is ledger entries recorded per second of the whole
//!   import, reading included. Target: 20,000 entries/s on both backends.
//!
//! Each runs in a child process of this bench, which reports its peak RSS (VmHWM), at
//! 100,000 and 1,000,000 rows: memory that grows with the distinct numbers (a few dozen
//! bytes each at the peak), not with the file (target: under 150 MB). Each rate is also given as a ratio to the split's rows/s at the same size, in
//! the same run.
//!
//! The PostgreSQL runs need `BENCH_POSTGRES_URL` (e.g. `postgres://postgres@127.0.0.1:5432/test`),
//! where each creates a database of its own and drops it after; when it is not set or the
//! server does not answer, they are skipped (and said to be). `BENCH_QUICK=1`: 10,000 and
//! 100,000 rows. Verdicts are printed, never turned into a failure.

#[allow(dead_code)] // The helpers other benches use.
mod common;

use std::io::{BufWriter, Write as _};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{BenchDatabase, POSTGRES_VARIABLE, fetch_row};
use outreach_sync::apply::imported::Scope;
use outreach_sync::import::{ListOptions, ListReader, Numbers, Request, Row, import};
use sqlx::Connection as _;

const TARGET_ROWS_PER_SEC: f64 = 200_000.0;
const TARGET_ENTRIES_PER_SEC: f64 = 20_000.0;
const TARGET_PEAK_RSS_BYTES: f64 = 150e6;
/// How long the PostgreSQL server is given to answer before its runs are skipped.
const POSTGRES_PROBE: Duration = Duration::from_secs(5);

/// What a child run measured.
#[derive(Debug, Clone, Copy, Default)]
struct Outcome {
    rows: u64,
    secs: f64,
    peak_rss_kib: u64,
    /// Distinct numbers in the list (0 for the split, which does not tell them).
    distinct: u64,
    /// Ledger entries recorded, and numbers suppressed (`record` only).
    recorded: u64,
    suppressed: u64,
}

impl Outcome {
    fn mib(&self) -> f64 {
        self.peak_rss_kib as f64 / 1024.0
    }
    /// Rows/s for `split` and `read`, entries recorded/s for `record`.
    fn rate(&self, mode: Mode) -> f64 {
        match mode {
            Mode::Record(..) => self.recorded as f64 / self.secs,
            _ => self.rows as f64 / self.secs,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Split,
    Read,
    Record(Backend, Whom),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Whom {
    Org,
    Account,
}

impl Mode {
    fn label(self) -> String {
        match self {
            Mode::Split => "split".into(),
            Mode::Read => "read".into(),
            Mode::Record(backend, whom) => format!(
                "record {} {}",
                match whom {
                    Whom::Org => "org",
                    Whom::Account => "account",
                },
                match backend {
                    Backend::Sqlite => "SQLite",
                    Backend::Postgres => "PostgreSQL",
                }
            ),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let path = Path::new(&args[i + 2]);
        let began = Instant::now();
        let mut outcome = match args[i + 1].as_str() {
            "split" => split(path),
            "read" => read(path),
            "record-org" => record(path, Scope::Organizations(vec!["org_1".into()])),
            "record-account" => record(path, Scope::Account),
            other => panic!("no mode {other}"),
        };
        if outcome.secs == 0.0 {
            outcome.secs = began.elapsed().as_secs_f64();
        }
        println!(
            "{} {} {} {} {} {}",
            outcome.rows,
            outcome.secs,
            peak_rss_kib(),
            outcome.distinct,
            outcome.recorded,
            outcome.suppressed
        );
        return;
    }
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let sizes: [u64; 2] = if quick {
        [10_000, 100_000]
    } else {
        [100_000, 1_000_000]
    };
    println!("import: reading and recording a list of mixed formats (each run a child process)\n");
    let postgres = postgres_server();
    match &postgres {
        Ok((_, about)) => println!("PostgreSQL: {about}; a database of its own per run"),
        Err(why) => println!("PostgreSQL figures skipped: {why}"),
    }
    println!(
        "SQLite: synchronous = full, a file of its own per run\n\
         rate: rows/s for split and read; for record, ledger entries recorded per second of \
         the whole import (reading included)\n"
    );
    println!(
        "{:>9}  {:<25} {:>9} {:>10} {:>8} {:>9} {:>9} {:>13}",
        "rows", "run", "seconds", "rate", "/split", "distinct", "recorded", "peak RSS MiB"
    );
    let dir = tempfile::tempdir().expect("a temporary directory");
    // Every run, by size.
    let mut runs: Vec<Vec<(Mode, Outcome)>> = Vec::new();
    for (s, rows) in sizes.into_iter().enumerate() {
        let path = dir.path().join(format!("list-{rows}.csv"));
        write_list(&path, rows);
        let mut modes = vec![
            Mode::Split,
            Mode::Read,
            Mode::Record(Backend::Sqlite, Whom::Org),
        ];
        if postgres.is_ok() {
            modes.push(Mode::Record(Backend::Postgres, Whom::Org));
        }
        if s == 1 {
            modes.push(Mode::Record(Backend::Sqlite, Whom::Account));
        }
        let mut at_size = Vec::new();
        let mut split_rate = 0.0;
        for mode in modes {
            let url = postgres.as_ref().ok().map(|(url, _)| url.as_str());
            let outcome = child(mode, &path, url);
            assert_eq!(outcome.rows, rows, "{} counted every row", mode.label());
            let rate = outcome.rate(mode);
            if mode == Mode::Split {
                split_rate = rate;
            }
            println!(
                "{rows:>9}  {:<25} {:>9.4} {rate:>10.0} {:>8.4} {:>9} {:>9} {:>13.1}",
                mode.label(),
                outcome.secs,
                rate / split_rate,
                if mode == Mode::Split {
                    "-".to_owned()
                } else {
                    outcome.distinct.to_string()
                },
                match mode {
                    Mode::Record(..) => outcome.recorded.to_string(),
                    _ => "-".to_owned(),
                },
                outcome.mib()
            );
            at_size.push((mode, outcome));
        }
        runs.push(at_size);
    }
    println!();
    verdicts(&sizes, &runs, postgres.is_ok());
}

/// The verdicts at the larger size, and how each run's peak RSS grew from the smaller.
fn verdicts(sizes: &[u64; 2], runs: &[Vec<(Mode, Outcome)>], postgres: bool) {
    let find = |s: usize, mode: Mode| runs[s].iter().find(|(m, _)| *m == mode).map(|(_, o)| *o);
    let split = find(1, Mode::Split).expect("the split");
    let read = find(1, Mode::Read).expect("the read");
    let met = |ok: bool| if ok { "met" } else { "NOT MET" };
    let read_rate = read.rate(Mode::Read);
    println!(
        "read/split at {}: {:.2}; {read_rate:.0} rows/s: target {TARGET_ROWS_PER_SEC:.0}: {}",
        sizes[1],
        read_rate / split.rate(Mode::Split),
        met(read_rate >= TARGET_ROWS_PER_SEC)
    );
    let mut modes = vec![Mode::Read, Mode::Record(Backend::Sqlite, Whom::Org)];
    if postgres {
        modes.push(Mode::Record(Backend::Postgres, Whom::Org));
    }
    for mode in modes
        .iter()
        .skip(1)
        .copied()
        .chain([Mode::Record(Backend::Sqlite, Whom::Account)])
    {
        let outcome = find(1, mode).expect("a record run");
        let rate = outcome.rate(mode);
        println!(
            "{} at {}: {rate:.0} entries/s ({:.4} of the split's rows/s): target \
             {TARGET_ENTRIES_PER_SEC:.0}: {}; peak RSS {:.1} MiB: target 150 MB: {}",
            mode.label(),
            sizes[1],
            rate / split.rate(Mode::Split),
            met(rate >= TARGET_ENTRIES_PER_SEC),
            outcome.mib(),
            met(outcome.peak_rss_kib as f64 * 1024.0 < TARGET_PEAK_RSS_BYTES)
        );
    }
    if !postgres {
        println!("record org PostgreSQL: skipped (see above)");
    }
    for mode in modes {
        let (small, large) = (find(0, mode).expect("a run"), find(1, mode).expect("a run"));
        let grown_kib = large.peak_rss_kib as f64 - small.peak_rss_kib as f64;
        println!(
            "peak RSS of {} at {} rows / at {} rows: {:.2} ({:.1} → {:.1} MiB, {:+.1} MiB for \
             {} more distinct numbers: {:.0} bytes each)",
            mode.label(),
            sizes[1],
            sizes[0],
            large.mib() / small.mib(),
            small.mib(),
            large.mib(),
            grown_kib / 1024.0,
            large.distinct - small.distinct,
            grown_kib * 1024.0 / (large.distinct - small.distinct) as f64
        );
    }
    println!(
        "(split's peak RSS at {} rows: {:.1} MiB)",
        sizes[1],
        split.mib()
    );
}

/// The PostgreSQL server's URL and a line about it, or why its runs are skipped.
fn postgres_server() -> Result<(String, String), String> {
    let url = std::env::var(POSTGRES_VARIABLE).map_err(|_| {
        format!("{POSTGRES_VARIABLE} is not set (e.g. postgres://postgres@127.0.0.1:5432/test)")
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let probe = async {
            let mut connection = sqlx::PgConnection::connect(&url).await?;
            let (version, synchronous_commit): (String, String) = sqlx::query_as(
                "SELECT current_setting('server_version'), current_setting('synchronous_commit')",
            )
            .fetch_one(&mut connection)
            .await?;
            connection.close().await?;
            Ok::<_, sqlx::Error>(format!(
                "server {version} (synchronous_commit = {synchronous_commit})"
            ))
        };
        match tokio::time::timeout(POSTGRES_PROBE, probe).await {
            Ok(Ok(about)) => Ok((url.clone(), about)),
            Ok(Err(error)) => Err(format!("cannot reach {POSTGRES_VARIABLE}: {error}")),
            Err(_) => Err(format!(
                "{POSTGRES_VARIABLE} did not answer within {} s",
                POSTGRES_PROBE.as_secs()
            )),
        }
    })
}

/// A list of `rows` rows: a header, a name, the number in one of five formats, a note.
fn write_list(path: &Path, rows: u64) {
    let mut out = BufWriter::new(std::fs::File::create(path).expect("the list"));
    writeln!(out, "\u{feff}Name,Phone Number,Notes").expect("write");
    for n in 0..rows {
        let (area, exchange, line) = (200 + n % 700, 200 + (n / 700) % 700, n % 10_000);
        let number = match n % 5 {
            0 => format!("({area}) {exchange}-{line:04}"),
            1 => format!("{area}.{exchange}.{line:04}"),
            2 => format!("+1 {area} {exchange} {line:04}"),
            3 => format!("{area}{exchange}{line:04}"),
            _ => format!("\"1-{area}-{exchange}-{line:04}\""),
        };
        writeln!(out, "\"Person, {n}\",{number},imported").expect("write");
    }
    out.flush().expect("flush");
}

fn split(path: &Path) -> Outcome {
    let mut records = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_path(path)
        .expect("the list");
    let mut record = csv::ByteRecord::new();
    let (mut rows, mut bytes) = (0u64, 0usize);
    while records.read_byte_record(&mut record).expect("a record") {
        rows += 1;
        bytes += record.get(1).map_or(0, <[u8]>::len);
    }
    std::hint::black_box(bytes);
    Outcome {
        rows,
        ..Outcome::default()
    }
}

fn read(path: &Path) -> Outcome {
    let file = std::fs::File::open(path).expect("the list");
    let mut reader = ListReader::new(file, &ListOptions::default()).expect("a list");
    let mut numbers = Numbers::default();
    for row in reader.by_ref() {
        if let Row::Number { line, number } = row.expect("a row") {
            numbers.push(&number, line);
        }
    }
    let summary = reader.finish().expect("a summary");
    assert_eq!(summary.invalid, 0, "every generated number is possible");
    let (distinct, _) = numbers.finish();
    Outcome {
        rows: summary.rows,
        distinct: distinct.len() as u64,
        ..Outcome::default()
    }
}

/// The whole import of the list for `scope` into a fresh database (SQLite, or PostgreSQL
/// when the parent set `BENCH_POSTGRES_URL`), opened and migrated untimed; then checks that
/// the ledger holds what the report says.
fn record(path: &Path, scope: Scope) -> Outcome {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let (database, pool) = BenchDatabase::open("import.db").await;
        let account = scope == Scope::Account;
        let request = Request {
            account: outreach_sync::model::AccountId::default_account(),
            scope,
            options: ListOptions::default(),
            file: path.display().to_string(),
            actor: "cli:bench".into(),
            reason: Some("bench".into()),
            skip_invalid: false,
            dry_run: false,
            outside_the_daemon: false,
        };
        let file = std::fs::File::open(path).expect("the list");
        let began = Instant::now();
        let report = import(&pool, file, &request).await.expect("the import");
        let secs = began.elapsed().as_secs_f64();
        let distinct = report.valid - report.duplicates_in_file;
        assert_eq!(report.invalid, 0, "every generated number is possible");
        // A fresh database: every distinct number is new, held by no organization.
        assert_eq!(report.recorded, distinct, "an entry per distinct number");
        assert_eq!(report.already_opted_out, 0);
        assert_eq!(report.suppressed, if account { distinct } else { 0 });
        let (entries,): (i64,) = fetch_row(&pool, "SELECT COUNT(*) FROM ledger")
            .await
            .expect("count the ledger");
        assert_eq!(
            entries as u64, report.recorded,
            "the ledger holds every entry"
        );
        pool.close().await;
        drop(database);
        Outcome {
            rows: report.rows,
            secs,
            peak_rss_kib: 0,
            distinct,
            recorded: report.recorded,
            suppressed: report.suppressed,
        }
    })
}

/// Runs `mode` over the list at `path` in a child process: on PostgreSQL when `mode` says so
/// (with `postgres`, the server's URL), else on SQLite.
fn child(mode: Mode, path: &Path, postgres: Option<&str>) -> Outcome {
    let name = match mode {
        Mode::Split => "split",
        Mode::Read => "read",
        Mode::Record(_, Whom::Org) => "record-org",
        Mode::Record(_, Whom::Account) => "record-account",
    };
    let mut command = Command::new(std::env::current_exe().expect("this bench"));
    command.args(["--child", name, path.to_str().expect("a path")]);
    match (mode, postgres) {
        (Mode::Record(Backend::Postgres, _), Some(url)) => command.env(POSTGRES_VARIABLE, url),
        _ => command.env_remove(POSTGRES_VARIABLE),
    };
    let out = command.output().expect("a child run");
    assert!(
        out.status.success(),
        "{}: {}",
        mode.label(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace();
    let mut next = || fields.next().expect("a figure").to_owned();
    Outcome {
        rows: next().parse().expect("rows"),
        secs: next().parse().expect("seconds"),
        peak_rss_kib: next().parse().expect("RSS"),
        distinct: next().parse().expect("distinct"),
        recorded: next().parse().expect("recorded"),
        suppressed: next().parse().expect("suppressed"),
    }
}

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
