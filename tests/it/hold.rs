//! The ingest port's promise while the admin side works: compliance reports (more at once
//! than the long reads' path takes), an import and a dry run over HTTP, an import by the
//! CLI beside the daemon, batch lookups and scrapes, against a child
//! daemon with tens of thousands of opt-outs, and every signed delivery still acknowledged
//! within a second, `/healthz` still answering.
//!
//! They measure time, so they run alone, not beside the rest of the suite on a machine of
//! two cores: ignored in the suite's run, `.ci/run` runs them alone after it
//! (`cargo test -p outreach-sync-cli --test it -- --ignored --test-threads 1 hold:: flood`,
//! with the floods of refused posts declared `alone`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::{ADMIN_TOKEN, pace};
use crate::daemon_process::{self, Daemon, SECRET, Signer, numbered_consent_event};
use crate::postgres::TestDatabase;

mod sources;

/// The promise: every acknowledgement within this.
const ACK_BOUND: Duration = Duration::from_secs(1);
/// Opt-outs in the ledger before the load (recorded by the CLI's import).
const LEDGER_OPT_OUTS: u64 = 30_000;
/// Numbers of the list imported over HTTP during the load.
const IMPORTED: u64 = 40_000;
/// Numbers of the list the CLI imports beside the daemon during the load.
const CLI_IMPORTED: u64 = 20_000;
/// Reports asked for at once, and again as each ends.
const REPORTS: usize = 8;
/// Signed deliveries per second.
const DELIVERY_INTERVAL: Duration = Duration::from_millis(100);

/// A list of `count` numbers from `first`, one per line under a header.
fn list(first: u64, count: u64) -> String {
    let mut text = String::from("phone\n");
    for n in first..first + count {
        text.push_str(&format!("+1555{:07}\n", n % 10_000_000));
    }
    text
}

fn environment(database_url: Option<&str>) -> Vec<(String, String)> {
    let mut env = vec![(
        "OUTREACH_SYNC__ADMIN__TOKENS".to_owned(),
        ADMIN_TOKEN.to_owned(),
    )];
    if let Some(url) = database_url {
        env.push(("OUTREACH_SYNC__DATABASE__URL".to_owned(), url.to_owned()));
    }
    env
}

/// Records [`LEDGER_OPT_OUTS`] opt-outs with the CLI before the daemon starts.
fn seed(dir: &Path, env: &[(String, String)]) {
    let file = dir.join("seed.csv");
    std::fs::write(&file, list(0, LEDGER_OPT_OUTS)).expect("the seed list");
    let path = file.display().to_string();
    let output = daemon_process::command(dir, &["import", &path, "--org", "org_1"], env)
        .output()
        .expect("run import");
    assert!(
        output.status.success(),
        "the seed import failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// What the admin side's work saw.
#[derive(Default)]
struct AdminSide {
    reports_whole: usize,
    reports_busy: usize,
    other_statuses: Vec<u16>,
    import: Option<serde_json::Value>,
    dry_run: Option<serde_json::Value>,
}

/// Asks for reports, [`REPORTS`] at a time, until `stop`.
async fn reports(daemon: &Daemon, stop: Arc<AtomicBool>) -> (usize, usize, Vec<u16>) {
    let http = reqwest::Client::new();
    let url = daemon.admin_url("/v1/compliance?since=2000-01-01");
    let clients = (0..REPORTS).map(|_| {
        let (http, url, stop) = (http.clone(), url.clone(), stop.clone());
        async move {
            let (mut whole, mut busy, mut other) = (0, 0, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let response = http.get(&url).bearer_auth(ADMIN_TOKEN).send().await;
                let Ok(response) = response else { continue };
                match response.status().as_u16() {
                    200 => {
                        // Its totals come last; the items before them are not parsed here,
                        // so that this client costs the machine little beside the daemon.
                        let body = response.bytes().await.expect("the report's body");
                        let tail =
                            String::from_utf8_lossy(&body[body.len().saturating_sub(2048)..])
                                .into_owned();
                        let totals = tail
                            .split_once("\"totals\":")
                            .and_then(|(_, rest)| rest.split_once('}'))
                            .map(|(totals, _)| format!("{totals}}}"))
                            .expect("the report ends with its totals");
                        let totals: serde_json::Value =
                            serde_json::from_str(&totals).expect("the totals are JSON");
                        assert!(
                            totals["optOuts"].as_u64() >= Some(LEDGER_OPT_OUTS),
                            "the report holds every opt-out: {totals}"
                        );
                        whole += 1;
                    }
                    429 => {
                        assert!(response.headers().contains_key("retry-after"));
                        busy += 1;
                        pace(Duration::from_millis(200)).await;
                    }
                    status => other.push(status),
                }
            }
            (whole, busy, other)
        }
    });
    let mut totals = (0, 0, Vec::new());
    for (whole, busy, other) in futures::future::join_all(clients).await {
        totals.0 += whole;
        totals.1 += busy;
        totals.2.extend(other);
    }
    totals
}

/// Imports a list over HTTP (`dry_run`: only previews it).
async fn import(daemon: &Daemon, dry_run: bool) -> serde_json::Value {
    let url = daemon.admin_url(&format!("/v1/consent/import?org=org_2&dryRun={dry_run}"));
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "text/csv")
        .body(list(LEDGER_OPT_OUTS, IMPORTED))
        .timeout(Duration::from_secs(600))
        .send()
        .await
        .expect("the import answers");
    assert_eq!(response.status(), 200, "the import is taken");
    response.json().await.expect("the import's result")
}

/// A list imported by the CLI, another process than the daemon, while it serves: it
/// cannot see a delivery wait, so it commits slice by slice.
async fn cli_import(dir: &Path, env: &[(String, String)]) {
    let file = dir.join("beside.csv");
    std::fs::write(&file, list(LEDGER_OPT_OUTS + IMPORTED, CLI_IMPORTED)).expect("the list");
    let args = [
        "import".to_owned(),
        file.display().to_string(),
        "--org".to_owned(),
        "org_3".to_owned(),
    ];
    let (dir, env) = (dir.to_owned(), env.to_vec());
    let output = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        daemon_process::command(&dir, &args, &env).output()
    })
    .await
    .expect("the import's thread")
    .expect("run import");
    assert!(
        output.status.success(),
        "the CLI's import beside the daemon failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The admin side's work, until the import and the dry run are done and each report
/// client has had at least one whole report.
async fn admin_side(
    daemon: &Daemon,
    (dir, env): (&Path, &[(String, String)]),
    done: Arc<AtomicBool>,
) -> AdminSide {
    let stop = Arc::new(AtomicBool::new(false));
    let imports = async {
        let (import, dry_run, ()) = tokio::join!(
            import(daemon, false),
            import(daemon, true),
            cli_import(dir, env)
        );
        stop.store(true, Ordering::Relaxed);
        (import, dry_run)
    };
    let ((import, dry_run), (reports_whole, reports_busy, mut other_statuses), lookups) = tokio::join!(
        imports,
        reports(daemon, stop.clone()),
        lookups_and_scrapes(daemon, stop.clone())
    );
    other_statuses.extend(lookups);
    done.store(true, Ordering::Relaxed);
    AdminSide {
        reports_whole,
        reports_busy,
        other_statuses,
        import: Some(import),
        dry_run: Some(dry_run),
    }
}

/// Batch lookups of 10,000 numbers (the most one takes) and `/metrics` scrapes, one after
/// another until `stop`: the statuses that were not 200.
async fn lookups_and_scrapes(daemon: &Daemon, stop: Arc<AtomicBool>) -> Vec<u16> {
    let http = reqwest::Client::new();
    let numbers: Vec<String> = (0..10_000).map(|n| format!("+1555{n:07}")).collect();
    let lookup = serde_json::json!({ "phoneNumbers": numbers });
    let mut other = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let looked_up = http
            .post(daemon.admin_url("/v1/consent/lookup"))
            .bearer_auth(ADMIN_TOKEN)
            .json(&lookup)
            .send()
            .await;
        let scraped = http.get(daemon.admin_url("/metrics")).send().await;
        for answer in [looked_up, scraped] {
            match answer {
                Ok(response) if response.status() == 200 => {
                    let _ = response.bytes().await;
                }
                Ok(response) => other.push(response.status().as_u16()),
                Err(_) => other.push(0),
            }
        }
    }
    other
}

/// Signed deliveries every [`DELIVERY_INTERVAL`] and `/healthz` beside them until `done`:
/// the slowest acknowledgement, the slowest `/healthz`, and any status but 200.
async fn deliveries(
    daemon: &Daemon,
    (path, secret): (&str, &str),
    done: Arc<AtomicBool>,
) -> (Duration, Duration, Vec<u16>) {
    let http = reqwest::Client::new();
    let signer = Signer::new(secret);
    let (mut slowest_ack, mut slowest_health, mut refused) =
        (Duration::ZERO, Duration::ZERO, Vec::new());
    let mut n = 1_000_000;
    let began = Instant::now();
    while !done.load(Ordering::Relaxed) || began.elapsed() < Duration::from_secs(3) {
        n += 1;
        let (_, body) = numbered_consent_event(n, 1000);
        let mut request = http.post(daemon.url(path)).body(body.clone());
        for (name, value) in signer.headers(body.as_bytes()) {
            request = request.header(name, value);
        }
        let sent = Instant::now();
        let response = request.timeout(Duration::from_secs(30)).send().await;
        slowest_ack = slowest_ack.max(sent.elapsed());
        match response {
            Ok(response) if response.status() == 200 => {}
            Ok(response) => refused.push(response.status().as_u16()),
            Err(_) => refused.push(0),
        }
        let asked = Instant::now();
        let health = http.get(daemon.url("/healthz")).send().await;
        slowest_health = slowest_health.max(asked.elapsed());
        assert!(health.is_ok_and(|r| r.status() == 200), "/healthz answers");
        pace(DELIVERY_INTERVAL).await;
    }
    (slowest_ack, slowest_health, refused)
}

async fn every_delivery_is_acknowledged_within_a_second_while_reports_and_imports_run(
    database_url: Option<&str>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = environment(database_url);
    seed(dir.path(), &env);
    let daemon = Daemon::start(dir.path(), "hold", &env).await;
    let done = Arc::new(AtomicBool::new(false));
    let (admin, (slowest_ack, slowest_health, refused)) = tokio::join!(
        admin_side(&daemon, (dir.path(), &env), done.clone()),
        deliveries(&daemon, ("/webhooks", SECRET), done.clone())
    );
    eprintln!("slowest acknowledgement {slowest_ack:?}, slowest /healthz {slowest_health:?}");
    assert!(refused.is_empty(), "every delivery is taken: {refused:?}");
    assert!(
        slowest_ack < ACK_BOUND,
        "the slowest acknowledgement took {slowest_ack:?} while the admin side worked"
    );
    assert!(
        slowest_health < ACK_BOUND,
        "/healthz took {slowest_health:?}"
    );
    assert!(
        admin.other_statuses.is_empty(),
        "{:?}",
        admin.other_statuses
    );
    assert!(admin.reports_whole >= 1, "a report was made");
    assert!(
        admin.reports_busy >= 1,
        "more reports at once than the long reads take are told to come back"
    );
    let import = admin.import.expect("the import");
    assert_eq!(
        import["recorded"], IMPORTED,
        "the import recorded its list: {import}"
    );
    let dry_run = admin.dry_run.expect("the dry run");
    assert_eq!(dry_run["dryRun"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "measures time: run alone, as .ci/run does"]
async fn every_delivery_is_acknowledged_within_a_second_while_reports_and_imports_run_on_sqlite() {
    every_delivery_is_acknowledged_within_a_second_while_reports_and_imports_run(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "measures time: run alone, as .ci/run does"]
async fn every_delivery_is_acknowledged_within_a_second_while_reports_and_imports_run_on_postgres()
{
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    every_delivery_is_acknowledged_within_a_second_while_reports_and_imports_run(Some(
        &database.url,
    ))
    .await;
    database.drop().await;
}

/// Numbers opted out in one account before the daemon starts, which sharing records in the
/// two others while deliveries come in.
const SHARED: u64 = 20_000;
const SHARING: [&str; 3] = ["party", "candidate", "coalition"];

/// Three accounts sharing their opt-outs, each with a service that is nowhere (their
/// pushes wait and retry): what is measured is the ledger's side.
fn sharing_config() -> String {
    let mut config = String::new();
    for name in SHARING {
        config.push_str(&format!(
            "[[account]]\nname = \"{name}\"\nbase_url = \"http://127.0.0.1:9\"\n\
             client_id = \"{name}-client\"\nclient_secret = \"{name}-client-secret\"\n\
             [account.webhook]\nsecrets = [\"{name}-webhook-secret\"]\n\n"
        ));
    }
    config + "[consent]\nshare_across_accounts = true\n"
}

/// Whether the last number of the shared list is opted out in the last account.
async fn shared_to_the_last(daemon: &Daemon) -> bool {
    let number = format!("+1555{:07}", SHARED - 1);
    let url = daemon.admin_url(&format!(
        "/v1/consent?phoneNumber=%2B{}&accountId={}",
        &number[1..],
        SHARING[2]
    ));
    let Ok(response) = reqwest::Client::new()
        .get(url)
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
    else {
        return false;
    };
    let Ok(body) = response.json::<serde_json::Value>().await else {
        return false;
    };
    body["items"]
        .as_array()
        .is_some_and(|items| items.iter().any(|i| i["optedOut"] == true))
}

async fn every_delivery_is_acknowledged_within_a_second_while_opt_outs_are_shared(
    database_url: Option<&str>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = environment(database_url);
    std::fs::write(daemon_process::config_file(dir.path()), sharing_config()).expect("config");
    let file = dir.path().join("shared.csv");
    std::fs::write(&file, list(0, SHARED)).expect("the list");
    let path = file.display().to_string();
    let args = ["import", &path, "--account", "--account-id", SHARING[0]];
    let output = daemon_process::command(dir.path(), &args, &env)
        .output()
        .expect("run import");
    assert!(
        output.status.success(),
        "the list: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let daemon = Daemon::start(dir.path(), "hold-sharing", &env).await;
    let done = Arc::new(AtomicBool::new(false));
    let watch = async {
        let began = Instant::now();
        while !shared_to_the_last(&daemon).await {
            assert!(
                began.elapsed() < Duration::from_secs(600),
                "sharing never reached the last number:\n{}",
                daemon.logs()
            );
            pace(Duration::from_millis(250)).await;
        }
        done.store(true, Ordering::Relaxed);
        began.elapsed()
    };
    let secret = format!("{}-webhook-secret", SHARING[1]);
    let path = format!("/webhooks/{}", SHARING[1]);
    let (took, (slowest_ack, slowest_health, refused)) =
        tokio::join!(watch, deliveries(&daemon, (&path, &secret), done.clone()));
    eprintln!(
        "{SHARED} opt-outs shared to {} accounts in {took:?}; slowest acknowledgement \
         {slowest_ack:?}, slowest /healthz {slowest_health:?}",
        SHARING.len() - 1
    );
    assert!(refused.is_empty(), "every delivery is taken: {refused:?}");
    assert!(
        slowest_ack < ACK_BOUND,
        "the slowest acknowledgement took {slowest_ack:?} while opt-outs were shared"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "measures time: run alone, as .ci/run does"]
async fn every_delivery_is_acknowledged_within_a_second_while_opt_outs_are_shared_on_sqlite() {
    every_delivery_is_acknowledged_within_a_second_while_opt_outs_are_shared(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "measures time: run alone, as .ci/run does"]
async fn every_delivery_is_acknowledged_within_a_second_while_opt_outs_are_shared_on_postgres() {
    let Some(database) = TestDatabase::create().await else {
        return;
    };
    every_delivery_is_acknowledged_within_a_second_while_opt_outs_are_shared(Some(&database.url))
        .await;
    database.drop().await;
}
