//! Streamed exports of 100,000 ledger entries: CSV with a header and quoting, JSON lines,
//! `--since`, and the command writing a file.

use crate::common;

use std::io::{BufRead, BufReader, BufWriter};

use outreach_sync::export::{self, Dataset, Format};
use sqlx::SqlitePool;

const ROWS: i64 = 100_000;

/// 100,000 ledger entries (and the consent state of every 10th), in one statement each.
async fn prefilled(dir: &std::path::Path) -> SqlitePool {
    let settings = common::test_settings(dir);
    let pool = outreach_sync::store::pool(&settings).await.unwrap();
    outreach_sync::store::migrate(&pool).await.unwrap();
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
         INSERT INTO ledger (organization_id, lead_id, phone_number, opted_out, occurred_at,
                             recorded_at, source, event_ref, superseded, reason)
         SELECT CASE WHEN i = 7 THEN 'org \"seven\", x' ELSE 'org_' || (i % 3) END, 'lead_' || i, printf('+1555%07d', i), i % 2,
                '2026-11-21T10:00:00.000Z', '2026-11-21T10:00:01.000Z', 'webhook', 'event:' || i,
                0, NULL
         FROM n",
    )
    .bind(ROWS)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO consent_state (organization_id, phone_number, lead_id, opted_out, changed_at, source, seq)
         SELECT organization_id, phone_number, lead_id, opted_out, occurred_at, source, seq
         FROM ledger WHERE seq % 10 = 0",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool
}

fn lines(path: &std::path::Path) -> Vec<String> {
    BufReader::new(std::fs::File::open(path).unwrap())
        .lines()
        .map(Result::unwrap)
        .collect()
}

#[tokio::test]
async fn a_ledger_of_100_000_entries_exports_as_csv_and_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let pool = prefilled(dir.path()).await;

    let csv = dir.path().join("ledger.csv");
    let mut out = BufWriter::new(std::fs::File::create(&csv).unwrap());
    let written = export::export(&pool, Dataset::Ledger, Format::Csv, None, &mut out)
        .await
        .unwrap();
    drop(out);
    assert_eq!(written, ROWS as u64);
    let rows = lines(&csv);
    assert_eq!(rows.len(), ROWS as usize + 1);
    assert_eq!(
        rows[0].trim_end(),
        "seq,organization_id,lead_id,phone_number,opted_out,occurred_at,recorded_at,source,event_ref,superseded,push,echo_of"
    );
    assert!(rows[1].starts_with("1,org_1,lead_1,+15550000001,true,"));
    assert!(rows[ROWS as usize].starts_with(&format!("{ROWS},")));

    let jsonl = dir.path().join("ledger.jsonl");
    let mut out = BufWriter::new(std::fs::File::create(&jsonl).unwrap());
    let written = export::export(
        &pool,
        Dataset::Ledger,
        Format::Jsonl,
        Some(99_990),
        &mut out,
    )
    .await
    .unwrap();
    drop(out);
    assert_eq!(written, 10);
    let records: Vec<serde_json::Value> = lines(&jsonl)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records[0]["seq"], 99_991);
    assert_eq!(records[0]["phoneNumber"], "+15550099991");
    assert_eq!(records[0]["source"], "webhook");

    let mut consent = Vec::new();
    let written = export::export(&pool, Dataset::Consent, Format::Csv, None, &mut consent)
        .await
        .unwrap();
    assert_eq!(written, ROWS as u64 / 10);
    let text = String::from_utf8(consent).unwrap();
    assert!(
        text.starts_with("organization_id,lead_id,phone_number,opted_out,changed_at,source\r\n")
    );
}

#[test]
fn the_export_command_writes_a_file_and_quotes_fields_that_need_it() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        prefilled(dir.path()).await.close().await;
    });
    let output = dir.path().join("out.csv");
    let done = std::process::Command::new(env!("CARGO_BIN_EXE_outreach-sync"))
        .args([
            "export", "ledger", "--format", "csv", "--since", "5", "--output",
        ])
        .arg(&output)
        .env(
            "OUTREACH_SYNC__DATABASE__URL",
            format!("sqlite://{}", dir.path().join("outreach-sync.db").display()),
        )
        .env("OUTREACH_SYNC__WEBHOOK__SECRETS", common::SECRET)
        .output()
        .unwrap();
    assert_eq!(
        done.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let rows = lines(&output);
    assert_eq!(rows.len(), (ROWS - 5) as usize + 1);
    assert!(rows[1].starts_with("6,"));
    assert!(
        rows[2].starts_with(r#"7,"org ""seven"", x",lead_7,"#),
        "{}",
        rows[2]
    );
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_outreach-sync"))
        .args(["export", "everything"])
        .env("OUTREACH_SYNC__WEBHOOK__SECRETS", common::SECRET)
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
