//! Warehouses under faults: `serve` killed with SIGKILL in the middle of its batches and
//! started again, and a warehouse that goes down (its connections refused) and comes back:
//! every entry reaches it, and a query sees each once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::*;
use crate::common;
use crate::daemon_process::{Daemon, Signer, config_file, numbered_consent_event, open_database};

/// Consent events posted to the killed daemon.
const EVENTS: u64 = 1_500;
/// SIGKILLs while it writes, before a last run.
const KILLS: usize = 3;

/// Posts consent events `from..from + count` to `daemon`, signed; each acknowledged.
async fn post_events(daemon: &Daemon, from: u64, count: u64) {
    let http = reqwest::Client::new();
    let signer = Signer::new(crate::daemon_process::SECRET);
    let posts = (from..from + count).map(|n| {
        let (_, body) = numbered_consent_event(n, 400);
        let mut request = http.post(daemon.url("/webhooks")).body(body.clone());
        for (name, value) in signer.headers(body.as_bytes()) {
            request = request.header(name, value);
        }
        async move { request.send().await.map(|r| r.status().as_u16()) }
    });
    let mut answered = futures::stream::iter(posts).buffer_unordered(16);
    use futures::StreamExt as _;
    while let Some(status) = answered.next().await {
        assert_eq!(status.expect("an answer"), 200);
    }
}

/// A `serve` configuration writing to the warehouse `kind`, its own keys `keys` (TOML),
/// `batch` rows a request at most `rps` requests a second.
fn process_config(kind: &str, keys: &str, batch: u32, rps: u32) -> String {
    format!(
        r#"
[webhook]
secrets = ["{secret}"]
[replica]
lease_secs = 2
[reconcile]
schedule = ""
on_start = false
[[destination]]
name = "warehouse"
kind = "{kind}"
{keys}
batch = {batch}
requests_per_second = {rps}
"#,
        secret = crate::daemon_process::SECRET,
    )
}

/// Runs `serve` in `dir` [`KILLS`] times, each posted its share of [`EVENTS`] and killed
/// with SIGKILL once `written` says it wrote 50 rows more; then once more until `written`
/// is the ledger's entries. Returns the ledger.
async fn killed_while_writing(
    dir: &std::path::Path,
    written: impl AsyncFn() -> i64,
) -> sqlx::SqlitePool {
    let mut posted = 0;
    for run in 0..KILLS {
        let mut daemon = Daemon::start(dir, &format!("run-{run}"), &[]).await;
        // Before the events: the rows may be written as fast as they are posted.
        let before = written().await;
        post_events(&daemon, posted, EVENTS / KILLS as u64).await;
        posted += EVENTS / KILLS as u64;
        let moved = common::within(Duration::from_secs(30), async || {
            written().await >= before + 50
        })
        .await;
        assert!(moved.is_some(), "run {run} wrote rows: {}", daemon.logs());
        daemon.kill();
    }
    let mut daemon = Daemon::start(dir, "final", &[]).await;
    let ledger = open_database(dir).await;
    let entries = crate::daemon_process::count(&ledger, "SELECT COUNT(*) FROM ledger").await;
    assert!(
        entries >= EVENTS as i64 / 2,
        "the events are entries: {entries}"
    );
    let finished =
        common::within(Duration::from_secs(90), async || written().await == entries).await;
    assert!(
        finished.is_some(),
        "every entry reached the warehouse: {}",
        daemon.logs()
    );
    daemon.signal(libc::SIGTERM);
    let _ = daemon.exit_within(Duration::from_secs(10)).await;
    ledger
}

/// Rows in the warehouse's table (0 before it is made).
async fn table_rows(pool: &PgPool) -> i64 {
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {TABLE}"))
        .fetch_one(pool)
        .await
        .unwrap_or(0)
}

/// `serve` killed with SIGKILL while it writes batches to the warehouse, again and again,
/// and started again on the same database: the table ends with every entry of the ledger
/// once (a batch written and not yet recorded is written again, and adds nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_batches_the_warehouse_ends_with_every_entry_once() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let url_file = dir.path().join("warehouse-url");
    std::fs::write(&url_file, &database.url).expect("url file");
    // Batches of 25 at 10 a second: two seconds of writing per run, killed in the middle.
    let keys = format!("url_file = {url_file:?}");
    std::fs::write(
        config_file(dir.path()),
        process_config("postgres", &keys, 25, 10),
    )
    .expect("config");
    let warehouse = database.pool().await;
    let ledger = killed_while_writing(dir.path(), async || table_rows(&warehouse).await).await;
    let seqs: Vec<i64> =
        sqlx::query_scalar(&format!("SELECT \"seq\" FROM {TABLE} ORDER BY \"seq\""))
            .fetch_all(&warehouse)
            .await
            .expect("seqs");
    let expected: Vec<i64> = sqlx::query_scalar("SELECT seq FROM ledger ORDER BY seq")
        .fetch_all(&ledger)
        .await
        .expect("ledger");
    assert_eq!(seqs, expected, "each entry once, none lost");
    warehouse.close().await;
    database.drop().await;
}

/// The same on BigQuery's stand-in, its de-duplication off (as when a batch is sent again
/// after Google's window): a batch written before a kill and sent again is in the table
/// twice, the same row each time, so that the `_once` view (one row per `seq`) sees every
/// entry exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_batches_bigquery_holds_every_entry_once_as_its_view_sees_it() {
    use outreach_sync_sandbox::destinations::{BIGQUERY_DATASET, BIGQUERY_PROJECT};
    let sandbox = outreach_sync_sandbox::Sandbox::spawn(outreach_sync_sandbox::SandboxConfig {
        leads: 10,
        organizations: 1,
        ..Default::default()
    })
    .await
    .expect("sandbox");
    sandbox.bigquery_set_dedup_window(Duration::ZERO);
    let dir = tempfile::tempdir().expect("dir");
    let key_file = dir.path().join("bq-key.json");
    let key = outreach_sync_sandbox::bigquery_key_file(&sandbox.bigquery_token_url());
    std::fs::write(&key_file, key).expect("key file");
    let keys = format!(
        "project = \"{BIGQUERY_PROJECT}\"\ndataset = \"{BIGQUERY_DATASET}\"\n\
         credentials_file = {key_file:?}\nbase_url = \"{}\"",
        sandbox.bigquery_url()
    );
    std::fs::write(
        config_file(dir.path()),
        process_config("bigquery", &keys, 25, 10),
    )
    .expect("config");
    let seqs_of = || {
        let truth = sandbox.bigquery_truth();
        let mut by_seq: BTreeMap<i64, Vec<Value>> = BTreeMap::new();
        for row in truth
            .tables
            .iter()
            .filter(|t| t.table_id == TABLE)
            .flat_map(|t| &t.rows)
        {
            let seq = row.json["seq"].as_i64().expect("a seq");
            by_seq.entry(seq).or_default().push(row.json.clone());
        }
        by_seq
    };
    let ledger = killed_while_writing(dir.path(), async || seqs_of().len() as i64).await;
    let expected: Vec<i64> = sqlx::query_scalar("SELECT seq FROM ledger ORDER BY seq")
        .fetch_all(&ledger)
        .await
        .expect("ledger");
    let rows = seqs_of();
    assert_eq!(
        rows.keys().copied().collect::<Vec<_>>(),
        expected,
        "none lost"
    );
    for (seq, copies) in &rows {
        assert!(
            copies.iter().all(|c| c == &copies[0]),
            "seq {seq}: the same row each time"
        );
    }
    let repeated: usize = rows.values().map(|c| c.len() - 1).sum();
    assert!(
        repeated <= 25 * KILLS,
        "at most a batch in flight at each kill: {repeated}"
    );
    sandbox.shutdown().await;
}

/// A TCP proxy to the test server that can be taken down: while down, each connection is
/// closed as it is accepted (and the ones open are cut).
struct Proxy {
    addr: std::net::SocketAddr,
    up: Arc<AtomicBool>,
    stop: tokio_util::sync::CancellationToken,
}

impl Proxy {
    async fn to(server: std::net::SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let up = Arc::new(AtomicBool::new(true));
        let stop = tokio_util::sync::CancellationToken::new();
        let (flag, cancel) = (up.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = cancel.cancelled() => return,
                    accepted = listener.accept() => accepted,
                };
                let Ok((mut client, _)) = accepted else {
                    continue;
                };
                if !flag.load(Ordering::SeqCst) {
                    continue;
                }
                let (flag, cancel) = (flag.clone(), cancel.clone());
                tokio::spawn(async move {
                    let Ok(mut upstream) = tokio::net::TcpStream::connect(server).await else {
                        return;
                    };
                    let down = async {
                        while flag.load(Ordering::SeqCst) {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
                        _ = down => {}
                        _ = cancel.cancelled() => {}
                    }
                });
            }
        });
        Self { addr, up, stop }
    }

    fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The test server's address, from its URL.
fn server_addr() -> std::net::SocketAddr {
    let url = std::env::var(crate::postgres::SERVER_VARIABLE).expect("the server");
    let parsed = reqwest::Url::parse(&url).expect("a URL");
    let host = parsed.host_str().unwrap_or("127.0.0.1");
    let port = parsed.port().unwrap_or(5432);
    let ip: std::net::IpAddr = if host == "localhost" {
        std::net::Ipv4Addr::LOCALHOST.into()
    } else {
        host.parse().expect("an address")
    };
    (ip, port).into()
}

on_both_backends!(
    a_warehouse_that_is_down_is_retried_and_loses_nothing,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_warehouse_that_is_down_is_retried_and_loses_nothing(backend: Backend) {
    let Some((database, _sandbox, app)) = warehouse_campaign(backend).await else {
        return;
    };
    let proxy = Proxy::to(server_addr()).await;
    let through = {
        let mut url = reqwest::Url::parse(&database.url).expect("a URL");
        url.set_ip_host(proxy.addr.ip()).expect("host");
        url.set_port(Some(proxy.addr.port())).expect("port");
        url.to_string()
    };
    proxy.set_up(false);
    let mut warehouse = postgres_warehouse("warehouse", &through, "batch = 10");
    warehouse.timeout_secs = 2;
    let app = writing_to(app, vec![warehouse]).await;
    let settled = app.settle().await;
    assert!(
        matches!(settled[0].1, outreach_sync::sender::Attempt::Failed { .. }),
        "{settled:?}"
    );
    let shown = view(&app, "warehouse").await;
    assert_eq!(shown["state"], "retrying", "{shown}");
    assert_eq!(shown["sent"], 0, "{shown}");
    let error = shown["lastError"].as_str().unwrap_or_default();
    assert!(!error.contains(&through), "the URL is a secret: {error}");
    proxy.set_up(true);
    app.settle().await;
    let ledger = ledger_rows(&app).await;
    let pool = database.pool().await;
    let (table, copies) = warehouse_rows(&pool).await;
    assert_eq!(table, ledger, "nothing was lost while it was down");
    assert!(copies.values().all(|c| *c == 1));
    let shown = view(&app, "warehouse").await;
    assert_eq!(shown["state"], "active", "{shown}");
    pool.close().await;
    app.stop().await;
    database.drop().await;
}

/// A warehouse URL naming a database that is not there stops it (`lookup: ...`, the URL
/// never shown); the right URL put in its `url_file` and reloaded (SIGHUP) writes every
/// entry that waited, with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_url_file_ends_the_error_and_every_entry_that_waited_goes() {
    const TOKEN: &str = "reload-warehouse-token-0123";
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    let dir = tempfile::tempdir().expect("dir");
    let url_file = dir.path().join("warehouse-url");
    let missing = format!("{}_not_there", database.url);
    std::fs::write(&url_file, &missing).expect("url file");
    let keys = format!("url_file = {url_file:?}");
    let config = format!(
        "{}\n[admin]\ntokens = [\"ops:{TOKEN}\"]\n",
        process_config("postgres", &keys, 25, 100)
    );
    std::fs::write(config_file(dir.path()), config).expect("config");
    let mut daemon = Daemon::start(dir.path(), "reload", &[]).await;
    post_events(&daemon, 0, 60).await;
    let view = || daemon.first_destination(TOKEN);
    let stopped = common::within(Duration::from_secs(20), async || {
        let view = view().await;
        (view["state"] == "error").then_some(view)
    })
    .await
    .expect("stopped: its database is not there");
    let error = stopped["lastError"].as_str().expect("an error");
    assert!(
        error.starts_with("lookup: ") && error.contains("3D000"),
        "{error}"
    );
    assert!(!error.contains("127.0.0.1"), "the URL is a secret: {error}");

    std::fs::write(&url_file, &database.url).expect("url file");
    daemon.signal(libc::SIGHUP);
    let ledger = open_database(dir.path()).await;
    let entries = crate::daemon_process::count(&ledger, "SELECT COUNT(*) FROM ledger").await;
    let warehouse = database.pool().await;
    let written = common::within(Duration::from_secs(20), async || {
        table_rows(&warehouse).await == entries
    })
    .await;
    assert!(written.is_some(), "{}\n{}", view().await, daemon.logs());
    assert_eq!(view().await["state"], "active");
    assert!(
        !daemon.logs().contains(&database.url),
        "the URL is never logged"
    );
    daemon.signal(libc::SIGTERM);
    let _ = daemon.exit_within(Duration::from_secs(10)).await;
    warehouse.close().await;
    database.drop().await;
}
