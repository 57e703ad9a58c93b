//! The ingest port's promise while a source records a 100,000-row VAN export: every signed
//! delivery acknowledged within a second, `/healthz` answering, and the export recorded whole.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use outreach_sync_sandbox::{DEFAULT_VAN_KEY, Sandbox, SandboxConfig};

use super::{ACK_BOUND, deliveries, environment};
use crate::common::{ADMIN_TOKEN, pace};
use crate::daemon_process::{self, Daemon, SECRET};
use crate::postgres::TestDatabase;

/// Rows of the export the source records during the load.
const ROWS: u64 = 100_000;

/// What the daemon's `GET /v1/sources` says the source recorded.
async fn opt_outs_read(daemon: &Daemon) -> i64 {
    let Ok(response) = reqwest::Client::new()
        .get(daemon.admin_url("/v1/sources"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
    else {
        return 0;
    };
    let Ok(body) = response.json::<serde_json::Value>().await else {
        return 0;
    };
    body["items"][0]["optOuts"].as_i64().unwrap_or(0)
}

async fn every_delivery_is_acknowledged_within_a_second_while_a_source_records(
    database_url: Option<&str>,
) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 10,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    sandbox
        .van_seed_changes(DEFAULT_VAN_KEY, ROWS, true)
        .expect("seeded");
    let dir = tempfile::tempdir().expect("tempdir");
    let env = environment(database_url);
    std::fs::write(
        daemon_process::config_file(dir.path()),
        format!(
            "[webhook]\nsecrets = [{SECRET:?}]\n\n[[source]]\nname = \"van-main\"\nkind = \"van\"\nbase_url = {:?}\n\
             api_key = {:?}\nevery_secs = 3600\nrequests_per_second = 1000\n",
            sandbox.van_url(),
            DEFAULT_VAN_KEY
        ),
    )
    .expect("config");
    let daemon = Daemon::start(dir.path(), "hold-sources", &env).await;
    let done = Arc::new(AtomicBool::new(false));
    let watch = async {
        let began = Instant::now();
        while opt_outs_read(&daemon).await < ROWS as i64 {
            assert!(
                began.elapsed() < Duration::from_secs(600),
                "the export was never recorded whole:\n{}",
                daemon.logs()
            );
            pace(Duration::from_millis(250)).await;
        }
        done.store(true, Ordering::Relaxed);
        began.elapsed()
    };
    let (took, (slowest_ack, slowest_health, refused)) = tokio::join!(
        watch,
        deliveries(&daemon, ("/webhooks", SECRET), done.clone())
    );
    eprintln!(
        "{ROWS} rows read back and recorded in {took:?}; slowest acknowledgement \
         {slowest_ack:?}, slowest /healthz {slowest_health:?}"
    );
    assert!(refused.is_empty(), "every delivery is taken: {refused:?}");
    assert!(
        slowest_ack < ACK_BOUND,
        "the slowest acknowledgement took {slowest_ack:?} while the source recorded"
    );
    assert!(
        slowest_health < ACK_BOUND,
        "/healthz took {slowest_health:?}"
    );
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "measures time: run alone, as .ci/run does"]
async fn every_delivery_is_acknowledged_within_a_second_while_a_source_records_on_sqlite() {
    every_delivery_is_acknowledged_within_a_second_while_a_source_records(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "measures time: run alone, as .ci/run does"]
async fn every_delivery_is_acknowledged_within_a_second_while_a_source_records_on_postgres() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    every_delivery_is_acknowledged_within_a_second_while_a_source_records(Some(&database.url))
        .await;
    database.drop().await;
}
