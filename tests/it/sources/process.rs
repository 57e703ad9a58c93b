//! A source in the daemon as a process: killed (SIGKILL) while it records a large export
//! (VAN) or a long listing (Mobilize, Mobile Commons), and started again on the same database, it records
//! every record once; added and removed by a reload.

use std::time::Duration;

use outreach_sync_sandbox::destinations::VanExportSettings;
use outreach_sync_sandbox::{
    DEFAULT_MOBILE_COMMONS_PASSWORD, DEFAULT_MOBILE_COMMONS_USERNAME, DEFAULT_MOBILIZE_KEY,
    DEFAULT_VAN_KEY, MOBILIZE_ORGANIZATION_ID, Sandbox, SandboxConfig,
};

use outreach_sync::store::Pool;

use crate::common::{self, Backend};
use crate::daemon_process::{Daemon, config_file, open_database};
use crate::postgres::TestDatabase;

/// "Do Not Text" responses in VAN's export: enough that a kill lands while they are recorded.
const ROWS: u64 = 40_000;
/// SIGKILLs while recording, before the run that finishes.
const KILLS: usize = 2;

/// A `serve` configuration of the sandbox's service and `source` (a `[[source]]` table).
fn config_with(sandbox: &outreach_sync_sandbox::RunningSandbox, source: &str) -> String {
    format!(
        r#"
[webhook]
secrets = ["{secret}"]
[replica]
lease_secs = 2
[service]
base_url = "{service}"
client_id = "{client_id}"
client_secret = "{client_secret}"
requests_per_second = 1000
{source}"#,
        secret = crate::daemon_process::SECRET,
        service = sandbox.base_url(),
        client_id = sandbox.config().client_id,
        client_secret = sandbox.config().client_secret,
    )
}

/// The sandbox's VAN as a source, read every second.
fn van_section(sandbox: &outreach_sync_sandbox::RunningSandbox) -> String {
    format!(
        r#"
[[source]]
name = "van-main"
kind = "van"
base_url = "{van}"
api_key = "{key}"
every_secs = 1
requests_per_second = 1000
"#,
        van = sandbox.van_url(),
        key = DEFAULT_VAN_KEY,
    )
}

/// The sandbox's Mobilize as a source, read every second.
fn mobilize_section(sandbox: &outreach_sync_sandbox::RunningSandbox) -> String {
    format!(
        r#"
[[source]]
name = "mobilize-main"
kind = "mobilize"
base_url = "{url}"
api_key = "{key}"
organization_id = {organization}
every_secs = 1
requests_per_second = 1000
"#,
        url = sandbox.mobilize_url(),
        key = DEFAULT_MOBILIZE_KEY,
        organization = MOBILIZE_ORGANIZATION_ID,
    )
}

/// The sandbox's Mobile Commons as a source, read every second.
fn mobile_commons_section(sandbox: &outreach_sync_sandbox::RunningSandbox) -> String {
    format!(
        r#"
[[source]]
name = "mc-main"
kind = "mobile_commons"
base_url = "{url}"
username = "{username}"
password = "{password}"
every_secs = 1
requests_per_second = 1000
"#,
        url = sandbox.mobile_commons_url(),
        username = DEFAULT_MOBILE_COMMONS_USERNAME,
        password = DEFAULT_MOBILE_COMMONS_PASSWORD,
    )
}

/// What a kill lands in: a source's read of `ROWS` opt-outs.
struct Large {
    /// The source's name and the ledger's `source` of what it records.
    name: &'static str,
    kind: &'static str,
    sandbox: outreach_sync_sandbox::RunningSandbox,
    section: String,
    /// Records the read holds beside the `ROWS` opt-outs.
    extra: i64,
}

impl Large {
    /// Mobile Commons' listing of `rows` profiles that texted STOP (pages of 1,000).
    async fn mobile_commons(rows: u64) -> Self {
        let sandbox = Sandbox::spawn(SandboxConfig {
            leads: 20,
            organizations: 1,
            ..SandboxConfig::default()
        })
        .await
        .expect("sandbox");
        let leads = sandbox.mobile_commons_truth().profiles.len() as i64;
        sandbox.mobile_commons_seed(rows);
        let section = mobile_commons_section(&sandbox);
        Self {
            name: "mc-main",
            kind: "mobile_commons",
            sandbox,
            section,
            extra: leads,
        }
    }

    /// VAN's export of `rows` "Do Not Text" changes.
    async fn van(rows: u64) -> Self {
        let sandbox = with_export(rows).await;
        let section = van_section(&sandbox);
        Self {
            name: "van-main",
            kind: "van",
            sandbox,
            section,
            extra: 0,
        }
    }

    /// Mobilize's listing of `rows` people opted out (pages of 100).
    async fn mobilize(rows: u64) -> Self {
        let sandbox = Sandbox::spawn(SandboxConfig {
            leads: 20,
            organizations: 1,
            ..SandboxConfig::default()
        })
        .await
        .expect("sandbox");
        let leads = sandbox.mobilize_truth().people.len() as i64;
        sandbox.mobilize_seed(rows);
        let section = mobilize_section(&sandbox);
        Self {
            name: "mobilize-main",
            kind: "mobilize",
            sandbox,
            section,
            extra: leads,
        }
    }
}

crate::common::on_both_backends!(
    killed_while_recording_an_export_it_records_every_opt_out_once,
    flavor = "multi_thread",
    worker_threads = 2
);
/// kill -9 at any point and restart: nothing lost, nothing twice. Each record is claimed in
/// the transaction that records it, and the watermark moves only after the last: a run
/// killed part-way is read again whole, and what it recorded before records nothing.
async fn killed_while_recording_an_export_it_records_every_opt_out_once(backend: Backend) {
    killed_while_reading(backend, Large::van(ROWS).await).await;
}

crate::common::on_both_backends!(
    killed_while_reading_mobilizes_people_it_records_every_opt_out_once,
    flavor = "multi_thread",
    worker_threads = 2
);
/// The same of a listing read page by page: the watermark moves after the last page, so a
/// run killed part-way reads every page again and records only what it had not.
async fn killed_while_reading_mobilizes_people_it_records_every_opt_out_once(backend: Backend) {
    killed_while_reading(backend, Large::mobilize(ROWS).await).await;
}

crate::common::on_both_backends!(
    killed_while_reading_mobile_commons_profiles_it_records_every_opt_out_once,
    flavor = "multi_thread",
    worker_threads = 2
);
/// The same of pages numbered until an empty one.
async fn killed_while_reading_mobile_commons_profiles_it_records_every_opt_out_once(
    backend: Backend,
) {
    killed_while_reading(backend, Large::mobile_commons(ROWS).await).await;
}

/// kill -9 while `large` is read, [`KILLS`] times, then a run to its end.
async fn killed_while_reading(backend: Backend, large: Large) {
    let Large {
        name,
        kind,
        sandbox,
        section,
        extra,
    } = large;
    // On PostgreSQL the daemon's database is a fresh one of the test server.
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
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(config_file(dir.path()), config_with(&sandbox, &section)).expect("config");

    let mut killed_at = Vec::new();
    let open = async || match &database {
        Some(database) => Pool::Postgres(database.pool().await),
        None => Pool::Sqlite(open_database(dir.path()).await),
    };
    for run in 0..KILLS {
        let mut daemon = Daemon::start(dir.path(), &format!("run-{run}"), &env).await;
        let pool = open().await;
        let before = records(&pool).await;
        // Killed once this run recorded some, and before the export is all recorded.
        let moved = common::within(Duration::from_secs(60), async || {
            let now = records(&pool).await;
            (now > before).then_some(now)
        })
        .await;
        daemon.kill();
        assert!(moved.is_some(), "run {run} recorded: {}", daemon.logs());
        killed_at.push(records(&pool).await);
        pool.close().await;
    }
    let daemon = Daemon::start(dir.path(), "final", &env).await;
    let pool = open().await;
    // Every record of the read claimed: the opt-outs, and what else it lists (Mobilize's
    // people of the sandbox's leads, opted in).
    let expected = ROWS as i64 + extra;
    let finished = common::within(Duration::from_secs(120), async || {
        (records(&pool).await == expected).then_some(())
    })
    .await;
    assert!(finished.is_some(), "every record: {}", daemon.logs());
    drop(daemon);

    let count = async |sql: &str| -> i64 {
        let rows: Vec<(i64,)> = crate::common::rows(&pool, sql).await;
        rows.first().map_or(0, |(n,)| *n)
    };
    assert!(
        killed_at.iter().any(|n| *n < ROWS as i64),
        "a kill landed part-way through the read: {killed_at:?}"
    );
    let entries = count(&format!(
        "SELECT COUNT(*) FROM ledger WHERE source = '{kind}'"
    ))
    .await;
    let numbers = count(&format!(
        "SELECT COUNT(DISTINCT phone_number) FROM ledger WHERE source = '{kind}'"
    ))
    .await;
    assert_eq!(numbers, ROWS as i64, "every opt-out recorded");
    assert_eq!(
        entries, ROWS as i64,
        "each once (account-wide: no lead holds them)"
    );
    let counted = count(&format!(
        "SELECT opt_outs FROM source_state WHERE source = '{name}'"
    ))
    .await;
    assert_eq!(counted, ROWS as i64, "the counts are the ledger's");
    pool.close().await;
    sandbox.shutdown().await;
    if let Some(database) = database {
        database.drop().await;
    }
}

/// A sandbox whose VAN exports `rows` "Do Not Text" changes, its jobs complete at once.
async fn with_export(rows: u64) -> outreach_sync_sandbox::RunningSandbox {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 20,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let export = VanExportSettings {
        polls_before_complete: 0,
        ..VanExportSettings::default()
    };
    assert!(sandbox.van_set_export(DEFAULT_VAN_KEY, export));
    sandbox
        .van_seed_changes(DEFAULT_VAN_KEY, rows, true)
        .expect("the committee of the key");
    sandbox
}

/// Records claimed by the source so far (none before the daemon made the table).
async fn records(pool: &Pool) -> i64 {
    let sql = "SELECT COUNT(*) FROM source_records";
    match pool {
        Pool::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
        Pool::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
    }
    .unwrap_or(0)
}

/// `serve` reloaded (SIGHUP) with a source added reads it; reloaded with it removed stops
/// reading it and no longer lists it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_a_source_and_a_reload_removes_it() {
    reloaded_in_and_out("van-main", van_section).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_a_mobilize_source_and_a_reload_removes_it() {
    reloaded_in_and_out("mobilize-main", mobilize_section).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_a_mobile_commons_source_and_a_reload_removes_it() {
    reloaded_in_and_out("mc-main", mobile_commons_section).await;
}

/// The daemon without source `name`, reloaded with it (`section`), then without it again.
async fn reloaded_in_and_out(
    name: &str,
    section: fn(&outreach_sync_sandbox::RunningSandbox) -> String,
) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 20,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let dir = tempfile::tempdir().expect("dir");
    let with_source = config_with(&sandbox, &section(&sandbox));
    let (without, _) = with_source
        .split_once("[[source]]")
        .expect("the source's section");
    std::fs::write(config_file(dir.path()), without).expect("config");
    let token = (
        "OUTREACH_SYNC__ADMIN__TOKENS".to_owned(),
        "ops:sources-token".to_owned(),
    );
    let daemon = Daemon::start(dir.path(), "reload", &[token]).await;
    let http = reqwest::Client::new();
    let listed = async || -> serde_json::Value {
        http.get(daemon.admin_url("/v1/sources"))
            .bearer_auth("sources-token")
            .send()
            .await
            .expect("GET /v1/sources")
            .json()
            .await
            .expect("JSON")
    };
    assert_eq!(listed().await["items"], serde_json::json!([]));

    std::fs::write(config_file(dir.path()), &with_source).expect("config");
    daemon.signal(libc::SIGHUP);
    let read = common::within(Duration::from_secs(30), async || {
        let list = listed().await;
        (list["items"][0]["state"] == "ok").then_some(list)
    })
    .await;
    assert!(read.is_some(), "the source added reads: {}", daemon.logs());

    std::fs::write(config_file(dir.path()), without).expect("config");
    daemon.signal(libc::SIGHUP);
    let gone = common::within(Duration::from_secs(30), async || {
        listed().await["items"] == serde_json::json!([])
    })
    .await;
    assert!(
        gone.is_some(),
        "the source removed is not listed: {}",
        daemon.logs()
    );
    let pool = open_database(dir.path()).await;
    let last_run = async || -> Option<String> {
        sqlx::query_scalar("SELECT last_run_at FROM source_state WHERE source = ?")
            .bind(name)
            .fetch_one(&pool)
            .await
            .ok()
    };
    // Its last run may still be ending; after that, none.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let then = last_run().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        last_run().await,
        then,
        "it reads no more: {}",
        daemon.logs()
    );
    pool.close().await;
    drop(daemon);
    sandbox.shutdown().await;
}

/// A Twilio token rotation as an operator makes it: the tokens file holds the old token,
/// then the new and the old side by side, then the new alone, a reload after each. A post
/// signed with a token the file no longer holds is refused from that reload on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_puts_a_twilio_sources_new_tokens_in_force() {
    use outreach_sync_sandbox::twilio::{Target, inbound, send};
    const PUBLIC_URL: &str = "https://sync.example.org/sources/twilio-main";
    let dir = tempfile::tempdir().expect("dir");
    let tokens = dir.path().join("twilio-tokens");
    std::fs::write(&tokens, "old-token\n").expect("tokens");
    let config = format!(
        "[webhook]\nsecrets = [\"{}\"]\n[[source]]\nname = \"twilio-main\"\nkind = \"twilio\"\n\
         auth_token_file = \"{}\"\npublic_url = \"{PUBLIC_URL}\"\n",
        crate::daemon_process::SECRET,
        tokens.display()
    );
    std::fs::write(config_file(dir.path()), config).expect("config");
    let daemon = Daemon::start(dir.path(), "rotation", &[]).await;
    let http = reqwest::Client::new();
    let url = daemon.url("/sources/twilio-main");
    let post = async |sid: &str, token: &str| -> u16 {
        let params = inbound(sid, "+15551230001", "+15005550006", "HELP");
        let target = Target {
            post_to: &url,
            signed_for: PUBLIC_URL,
        };
        send(&http, target, token, &params)
            .await
            .expect("an answer")
            .0
    };
    assert_eq!(post("SM1", "old-token").await, 200, "{}", daemon.logs());
    assert_eq!(post("SM2", "new-token").await, 403);

    let reload_to = async |lines: &str| {
        std::fs::write(&tokens, lines).expect("tokens");
        daemon.signal(libc::SIGHUP);
    };
    reload_to("new-token\nold-token\n").await;
    let both = common::within(Duration::from_secs(20), async || {
        (post("SM3", "new-token").await == 200).then_some(())
    })
    .await;
    assert!(both.is_some(), "the new token in force: {}", daemon.logs());
    assert_eq!(post("SM4", "old-token").await, 200, "the old beside it");

    reload_to("new-token\n").await;
    let old_gone = common::within(Duration::from_secs(20), async || {
        (post("SM5", "old-token").await == 403).then_some(())
    })
    .await;
    assert!(
        old_gone.is_some(),
        "the old token refused: {}",
        daemon.logs()
    );
    assert_eq!(post("SM6", "new-token").await, 200);
    drop(daemon);
}
