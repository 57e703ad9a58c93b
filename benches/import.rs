//! `cargo bench --bench import`: reading an opt-out list, the part of an import before
//! anything is recorded.
//!
//! A list of 1,000,000 rows in the formats exports come in (`(555) 123-4567`,
//! `555.123.4567`, `+1 555 123 4567`, `5551234567`, a quoted field with the delimiter in it),
//! written to a file. The baseline splits the same file into records with the same CSV
//! reader and touches the phone field, nothing else; the list reader then tells the
//! delimiter, finds the column, normalizes every number to E.164, tells repeats and hashes
//! the file. Each runs in a child process of this bench, which reports its peak RSS
//! (VmHWM), at 100,000 and 1,000,000 rows: memory independent of the file's size.
//! Recording the numbers is not measured here yet. `BENCH_QUICK=1`: 10,000 and 100,000.

use std::io::{BufWriter, Write as _};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use outreach_sync::import::{ListOptions, ListReader, Row};

const TARGET_ROWS_PER_SEC: f64 = 200_000.0;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let (mode, path) = (&args[i + 1], Path::new(&args[i + 2]));
        let began = Instant::now();
        let rows = match mode.as_str() {
            "split" => split(path),
            _ => read(path),
        };
        println!(
            "{rows} {} {}",
            began.elapsed().as_secs_f64(),
            peak_rss_kib()
        );
        return;
    }
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let sizes: [u64; 2] = if quick {
        [10_000, 100_000]
    } else {
        [100_000, 1_000_000]
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    println!("import: reading a list of mixed formats (each run a child process)\n");
    println!(
        "{:>9}  {:<6} {:>9} {:>12} {:>13}",
        "rows", "run", "seconds", "rows/s", "peak RSS MiB"
    );
    let mut peaks = Vec::new();
    let mut ratio = 0.0;
    let mut rate = 0.0;
    for rows in sizes {
        let path = dir.path().join(format!("list-{rows}.csv"));
        write_list(&path, rows);
        let mut rates = [0.0; 2];
        for (k, mode) in ["split", "read"].into_iter().enumerate() {
            let (counted, secs, rss_kib) = child(mode, &path);
            assert_eq!(counted, rows, "{mode} counted every row");
            rates[k] = rows as f64 / secs;
            println!(
                "{rows:>9}  {mode:<6} {secs:>9.3} {:>12.0} {:>13.1}",
                rates[k],
                rss_kib as f64 / 1024.0
            );
            if mode == "read" {
                peaks.push(rss_kib as f64);
            }
        }
        ratio = rates[1] / rates[0];
        rate = rates[1];
    }
    println!();
    println!(
        "read/split at {}: {ratio:.2}; {rate:.0} rows/s: target {TARGET_ROWS_PER_SEC:.0}: {}",
        sizes[1],
        if rate >= TARGET_ROWS_PER_SEC {
            "met"
        } else {
            "NOT MET"
        }
    );
    println!(
        "peak RSS of the read at {} rows / at {} rows: {:.2}",
        sizes[1],
        sizes[0],
        peaks[1] / peaks[0]
    );
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

fn split(path: &Path) -> u64 {
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
    rows
}

fn read(path: &Path) -> u64 {
    let file = std::fs::File::open(path).expect("the list");
    let mut reader = ListReader::new(file, &ListOptions::default()).expect("a list");
    let mut numbers = 0u64;
    for row in reader.by_ref() {
        if let Row::Number { .. } | Row::Repeat { .. } = row.expect("a row") {
            numbers += 1;
        }
    }
    let summary = reader.finish().expect("a summary");
    assert_eq!(summary.invalid, 0, "every generated number is possible");
    std::hint::black_box(numbers);
    summary.rows
}

fn child(mode: &str, path: &Path) -> (u64, f64, u64) {
    let out = Command::new(std::env::current_exe().expect("this bench"))
        .args(["--child", mode, path.to_str().expect("a path")])
        .output()
        .expect("a child run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.split_whitespace();
    let mut next = || fields.next().expect("a figure").to_owned();
    (
        next().parse().expect("rows"),
        next().parse().expect("seconds"),
        next().parse().expect("RSS"),
    )
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
