//! `cargo bench --bench lookup`: consent lookups over the admin API on real loopback HTTP.
//!
//! A ledger of 1,000,000 entries over 300,000 numbers (3 organizations), with the current
//! state of every number, then: single `GET /v1/consent` lookups at a few concurrencies
//! (requests/s and p50/p99 latency) beside `GET /healthz` on the same listener and the same
//! client (the floor: HTTP, routing and the runtime without the database), and the time of a
//! 10,000-number `POST /v1/consent/lookup`. Targets: p99 of a single lookup under 2 ms, a
//! 10,000-number batch under 100 ms. `BENCH_QUICK=1` runs a tenth of the size.

use std::sync::Arc;
use std::time::{Duration, Instant};

use outreach_sync::admin::{self, AdminState};
use outreach_sync::settings::Settings;
use secrecy::SecretString;
use sqlx::SqlitePool;
use tokio::sync::Notify;

const TOKEN: &str = "bench-token";
const P99_TARGET: Duration = Duration::from_millis(2);
const BATCH_TARGET: Duration = Duration::from_millis(100);
const CONCURRENCIES: [usize; 3] = [1, 4, 16];
/// Ledger entries written per transaction while prefilling.
const CHUNK: i64 = 250_000;

async fn prefill(pool: &SqlitePool, entries: i64, numbers: i64) {
    let mut start = 0;
    while start < entries {
        let end = (start + CHUNK).min(entries);
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
             INSERT INTO ledger (organization_id, lead_id, phone_number, opted_out, occurred_at,
                                 recorded_at, source, event_ref, superseded)
             SELECT 'org_' || (i % 3), 'lead_' || (i % ?3), printf('+1555%07d', i % ?3), i % 2,
                    strftime('%Y-%m-%dT%H:%M:%fZ', '2026-01-01', '+' || i || ' seconds'),
                    '2026-11-21T10:00:00.000Z', 'webhook', 'event:' || i, 0
             FROM n",
        )
        .bind(start + 1)
        .bind(end)
        .bind(numbers)
        .execute(pool)
        .await
        .expect("prefill the ledger");
        start = end;
    }
    // The current state of each (organization, number): its latest entry.
    sqlx::query(
        "INSERT INTO consent_state (organization_id, phone_number, lead_id, opted_out, changed_at, source, seq)
         SELECT organization_id, phone_number, lead_id, opted_out, occurred_at, source, MAX(seq)
         FROM ledger GROUP BY organization_id, phone_number",
    )
    .execute(pool)
    .await
    .expect("prefill the consent state");
    sqlx::query("ANALYZE").execute(pool).await.expect("analyze");
}

struct Run {
    per_sec: f64,
    p50: Duration,
    p99: Duration,
}

/// `requests` GETs of `path(i)` from `concurrency` tasks sharing one client.
async fn measure(
    http: &reqwest::Client,
    base: &str,
    path: fn(usize, usize) -> String,
    numbers: usize,
    concurrency: usize,
    requests: usize,
) -> Run {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let (http, base) = (http.clone(), base.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(requests / concurrency);
            for i in (worker..requests).step_by(concurrency) {
                let t = Instant::now();
                let response = http
                    .get(format!("{base}{}", path(i, numbers)))
                    .bearer_auth(TOKEN)
                    .send()
                    .await
                    .expect("request");
                assert!(response.status().is_success());
                response.bytes().await.expect("body");
                latencies.push(t.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::with_capacity(requests);
    for task in tasks {
        all.extend(task.await.expect("task"));
    }
    let elapsed = started.elapsed();
    all.sort();
    let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
    Run {
        per_sec: all.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn consent_path(i: usize, numbers: usize) -> String {
    // A multiplicative hash spreads the lookups over the whole table.
    let n = (i.wrapping_mul(2_654_435_761)) % numbers;
    format!("/v1/consent?phoneNumber=%2B1555{n:07}")
}

fn health_path(_: usize, _: usize) -> String {
    "/healthz".into()
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| v == "1");
    let scale = if quick { 10 } else { 1 };
    let (entries, numbers) = (1_000_000 / scale, 300_000 / scale);
    let requests = 20_000 / scale as usize;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut settings = Settings::default();
    settings.database.url = format!("sqlite://{}", dir.path().join("bench.db").display());
    settings.webhook.secrets = vec![SecretString::from("bench")];
    let pool = outreach_sync::store::pool(&settings).await.expect("pool");
    outreach_sync::store::migrate(&pool).await.expect("migrate");
    let t = Instant::now();
    prefill(&pool, entries, numbers).await;
    println!(
        "prefilled {entries} ledger entries over {numbers} numbers in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let router = admin::router(AdminState::new(
        pool.clone(),
        vec![SecretString::from(TOKEN)],
        Arc::new(Notify::new()),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .expect("client");
    // Warm the connections and the page cache.
    measure(
        &http,
        &base,
        consent_path,
        numbers as usize,
        16,
        2_000 / scale as usize,
    )
    .await;

    let mut p99_met = true;
    let mut p99_single = Duration::ZERO;
    println!("\nsingle lookups, {requests} requests per row (loopback HTTP, keep-alive)");
    println!(
        "{:>11} {:>14} {:>12} {:>12} {:>14} {:>12} {:>10}",
        "concurrency", "lookups/s", "p50", "p99", "healthz/s", "healthz p99", "ratio/s"
    );
    for concurrency in CONCURRENCIES {
        let base_run = measure(&http, &base, health_path, 0, concurrency, requests).await;
        let run = measure(
            &http,
            &base,
            consent_path,
            numbers as usize,
            concurrency,
            requests,
        )
        .await;
        p99_met &= run.p99 < P99_TARGET;
        if concurrency == 1 {
            p99_single = run.p99;
        }
        println!(
            "{concurrency:>11} {:>14.0} {:>12} {:>12} {:>14.0} {:>12} {:>10.2}",
            run.per_sec,
            ms(run.p50),
            ms(run.p99),
            base_run.per_sec,
            ms(base_run.p99),
            run.per_sec / base_run.per_sec
        );
    }

    let phones: Vec<String> = (0..10_000)
        .map(|i| format!("+1555{:07}", (i * 29) % numbers))
        .collect();
    let body = serde_json::json!({"phoneNumbers": phones});
    let mut batch_times = Vec::new();
    let mut records = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let response = http
            .post(format!("{base}/v1/consent/lookup"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .expect("batch");
        let value: serde_json::Value = response.json().await.expect("batch body");
        batch_times.push(t.elapsed());
        records = value["items"].as_array().map_or(0, Vec::len);
    }
    batch_times.sort();
    let batch = batch_times[batch_times.len() / 2];
    println!(
        "\nbatch lookup of 10,000 numbers ({records} records): median {} of 5 (min {}, max {})",
        ms(batch),
        ms(batch_times[0]),
        ms(batch_times[batch_times.len() - 1])
    );
    println!(
        "\ntarget p99 < {} with one client: {} ({}); at every concurrency: {}",
        ms(P99_TARGET),
        if p99_single < P99_TARGET {
            "met"
        } else {
            "NOT met"
        },
        ms(p99_single),
        if p99_met { "met" } else { "NOT met" }
    );
    println!(
        "target batch < {}: {}",
        ms(BATCH_TARGET),
        if batch < BATCH_TARGET {
            "met"
        } else {
            "NOT met"
        }
    );
}
