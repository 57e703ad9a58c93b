//! Clean shutdown of the real process: SIGTERM or SIGINT under load ends with exit 0 within
//! 10 seconds (on either backend), every acknowledged delivery committed, and systemd told
//! READY, WATCHDOG and STOPPING along the way.

use crate::daemon_process;

use std::time::{Duration, Instant};

use crate::common::within;
use daemon_process::{Daemon, Load, LoadPlan, missing_from_outbox, open_database};
use outreach_sync::store::Pool;

use crate::common::{Backend, on_both_backends};
use crate::postgres::TestDatabase;

/// The promise: a stop request is done with within this long (systemd's TimeoutStopSec=15).
const STOP_WITHIN: Duration = Duration::from_secs(10);

on_both_backends!(
    sigterm_under_load_exits_0_within_10_seconds_with_every_acknowledged_delivery_stored,
    flavor = "multi_thread",
    worker_threads = 4
);
async fn sigterm_under_load_exits_0_within_10_seconds_with_every_acknowledged_delivery_stored(
    backend: Backend,
) {
    let dir = tempfile::tempdir().unwrap();
    let database = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => match TestDatabase::create().await {
            Some(database) => Some(database),
            None => return,
        },
    };
    let env: Vec<(String, String)> = database
        .iter()
        .map(|d| ("OUTREACH_SYNC__DATABASE__URL".to_owned(), d.url.clone()))
        .collect();
    let mut daemon = Daemon::start(dir.path(), "serve", &env).await;
    let plan = LoadPlan {
        clients: 6,
        phones: 300,
        events_per_client: 100_000,
        attempts_per_event: 1,
        max_duration: Duration::from_secs(40),
    };
    let (load, clients) = Load::start(plan, Some(daemon.url("/webhooks")));
    assert!(
        within(Duration::from_secs(20), async || load.acked_count() >= 300)
            .await
            .is_some(),
        "the daemon takes load before the stop: {}",
        daemon.logs()
    );

    let asked = Instant::now();
    let acked_before = load.acked_count();
    daemon.signal(libc::SIGTERM);
    let status = daemon.exit_within(STOP_WITHIN).await;
    let took = asked.elapsed();
    load.stop();
    for client in clients {
        client.await.unwrap();
    }

    let status = status.unwrap_or_else(|| panic!("still running after {STOP_WITHIN:?}"));
    assert!(status.success(), "{status}: {}", daemon.logs());
    let acked = load.acked();
    println!(
        "stopped in {} ms; {} acknowledged ({} after SIGTERM), statuses {:?}, {} transport errors",
        took.as_millis(),
        acked.len(),
        acked.len() - acked_before,
        load.statuses(),
        load.transport_errors()
    );
    assert!(
        load.statuses().keys().all(|s| [200, 503].contains(s)),
        "every delivery is committed and acknowledged, or refused: {:?}",
        load.statuses()
    );
    let pool = match &database {
        None => Pool::Sqlite(open_database(dir.path()).await),
        Some(database) => Pool::Postgres(database.pool().await),
    };
    let missing = missing_from_outbox(&pool, &acked).await;
    assert!(
        missing.is_empty(),
        "acknowledged but not stored: {missing:?}"
    );
    const APPLIED_WITHOUT_ENTRY: &str = "SELECT COUNT(*) FROM outbox WHERE state = 'applied'
         AND dedup_key NOT IN (SELECT event_ref FROM ledger)";
    let applied_without_entry: i64 = match &pool {
        Pool::Sqlite(pool) => {
            sqlx::query_scalar(APPLIED_WITHOUT_ENTRY)
                .fetch_one(pool)
                .await
        }
        Pool::Postgres(pool) => {
            sqlx::query_scalar(APPLIED_WITHOUT_ENTRY)
                .fetch_one(pool)
                .await
        }
    }
    .unwrap();
    assert_eq!(
        applied_without_entry, 0,
        "the workers' last batches are whole"
    );
    if let Pool::Sqlite(pool) = &pool {
        let integrity: String = sqlx::query_scalar("PRAGMA integrity_check")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(integrity, "ok");
    }
    let logs = daemon.logs();
    for line in [
        "stop requested",
        "ingest listener stopped",
        "worker stopped",
    ] {
        assert!(logs.contains(line), "`{line}` in the log: {logs}");
    }
    pool.close().await;
    if let Some(database) = database {
        database.drop().await;
    }
}

#[tokio::test]
async fn systemd_hears_ready_then_watchdog_pings_then_stopping_and_sigint_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify.sock");
    let socket = tokio::net::UnixDatagram::bind(&socket_path).unwrap();
    let env = [
        (
            "NOTIFY_SOCKET".to_string(),
            socket_path.display().to_string(),
        ),
        // Pings every 100 ms.
        ("WATCHDOG_USEC".to_string(), "200000".to_string()),
    ];
    let mut daemon = Daemon::start(dir.path(), "serve", &env).await;
    let mut heard = Vec::new();
    let mut buffer = [0u8; 256];
    let started = Instant::now();
    while heard.iter().filter(|m| *m == "WATCHDOG=1").count() < 3
        && started.elapsed() < Duration::from_secs(10)
    {
        if let Ok(Ok(n)) =
            tokio::time::timeout(Duration::from_secs(1), socket.recv(&mut buffer)).await
        {
            heard.push(String::from_utf8_lossy(&buffer[..n]).trim().to_string());
        }
    }
    assert_eq!(
        heard.first().map(String::as_str),
        Some("READY=1"),
        "{heard:?}"
    );
    assert!(
        heard.iter().filter(|m| *m == "WATCHDOG=1").count() >= 3,
        "{heard:?}"
    );

    daemon.signal(libc::SIGINT);
    let stopping = tokio::time::timeout(STOP_WITHIN, async {
        loop {
            let n = socket.recv(&mut buffer).await.unwrap();
            if buffer[..n].starts_with(b"STOPPING=1") {
                return;
            }
        }
    })
    .await;
    let status = daemon.exit_within(STOP_WITHIN).await;

    assert!(stopping.is_ok(), "STOPPING=1 was sent: {}", daemon.logs());
    let status = status.expect("exited");
    assert!(status.success(), "{status}: {}", daemon.logs());
}

#[tokio::test]
async fn a_client_that_never_finishes_its_request_does_not_hold_the_stop_past_10_seconds() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path(), "serve", &[]).await;
    // One request stuck in its body, one in its headers.
    let mut in_body = std::net::TcpStream::connect(daemon.ingest).unwrap();
    in_body
        .write_all(b"POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"id\":")
        .unwrap();
    let mut in_headers = std::net::TcpStream::connect(daemon.ingest).unwrap();
    in_headers
        .write_all(b"POST /webhooks HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let served = reqwest::get(daemon.url("/healthz")).await.unwrap();
    assert_eq!(served.status(), 200, "both connections are taken");

    let asked = Instant::now();
    daemon.signal(libc::SIGTERM);
    let status = daemon.exit_within(STOP_WITHIN).await;

    let status = status.unwrap_or_else(|| panic!("still running after {STOP_WITHIN:?}"));
    assert!(status.success(), "{status}: {}", daemon.logs());
    println!("stopped in {} ms", asked.elapsed().as_millis());
    drop((in_body, in_headers));
}
