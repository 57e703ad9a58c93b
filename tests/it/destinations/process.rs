//! Destinations from the command line and the daemon as a process: `destinations check`,
//! a kill while writing, a reloaded key (VAN's API key, Mobile Commons' password), replicas
//! on PostgreSQL.

use super::*;

/// A `serve` configuration (for a child process) on `sandbox`'s service, writing to its VAN
/// with `key`; `extra` is added as it is (a section of the test's own).
fn process_config(sandbox: &RunningSandbox, key: &str, extra: &str) -> String {
    format!(
        r#"
[webhook]
secrets = ["{secret}"]
{extra}
[service]
base_url = "{service}"
client_id = "{client_id}"
client_secret = "{client_secret}"
requests_per_second = 1000
[[destination]]
name = "van-main"
kind = "van"
base_url = "{van}"
api_key = "{key}"
requests_per_second = 1000
"#,
        secret = crate::daemon_process::SECRET,
        service = sandbox.base_url(),
        client_id = sandbox.config().client_id,
        client_secret = sandbox.config().client_secret,
        van = sandbox.van_url(),
    )
}

/// SIGKILLs of `serve` while it writes to VAN, before a last run.
const KILLS: usize = 3;

/// VAN has no idempotency key: `serve` killed while writing to it, again and again, and
/// started again on the same database, writes every opt-out, and repeats at most the one
/// action in flight at each kill (an answered action is recorded before the next is sent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_writing_to_van_it_repeats_at_most_the_action_in_flight() {
    use crate::daemon_process::{Daemon, config_file, open_database};
    use std::time::Duration;

    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: LEADS,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    // Slow enough that a kill lands between entries or inside one.
    sandbox.fake_latency(Fake::Van, Duration::from_millis(40));
    let dir = tempfile::tempdir().expect("dir");
    // A killed leader's lease ends soon: the next run leads within two periods.
    let config = process_config(&sandbox, DEFAULT_VAN_KEY, "[replica]\nlease_secs = 2");
    std::fs::write(config_file(dir.path()), config).expect("config");
    // The first run's pass records the leads that start opted out.
    let reconcile = [(
        "OUTREACH_SYNC__RECONCILE__ON_START".to_owned(),
        "true".to_owned(),
    )];
    let canvassed = || sandbox.van_truth().canvass_responses.len();
    for run in 0..KILLS {
        let env = if run == 0 { &reconcile[..] } else { &[] };
        let mut daemon = Daemon::start(dir.path(), &format!("run-{run}"), env).await;
        let before = canvassed();
        // Another process: its progress is looked at in VAN, not signalled.
        let moved =
            common::within(Duration::from_secs(30), async || canvassed() >= before + 2).await;
        assert!(moved.is_some(), "run {run} wrote to VAN: {}", daemon.logs());
        daemon.kill();
    }
    let mut daemon = Daemon::start(dir.path(), "final", &[]).await;
    let pool = open_database(dir.path()).await;
    let count = |sql: &'static str| crate::daemon_process::count(&pool, sql);
    let opted_out = count("SELECT COUNT(*) FROM ledger WHERE opted_out").await;
    let finished = common::within(Duration::from_secs(60), async || {
        count("SELECT COUNT(*) FROM destination_outcomes WHERE outcome IS NOT NULL").await
            == opted_out
    })
    .await;
    assert!(
        finished.is_some(),
        "every opt-out has its outcome: {}",
        daemon.logs()
    );
    daemon.signal(libc::SIGTERM);
    let _ = daemon.exit_within(Duration::from_secs(10)).await;

    let truth = sandbox.van_truth();
    let sent = count("SELECT COUNT(*) FROM destination_outcomes WHERE outcome = 'sent'").await;
    assert!(sent > KILLS as i64 * 2, "the runs wrote: {sent}");
    let mut per_person = std::collections::HashMap::<u64, usize>::new();
    for response in &truth.canvass_responses {
        *per_person.entry(response.van_id).or_default() += 1;
    }
    assert_eq!(per_person.len() as i64, sent, "one person per entry sent");
    let repeated: usize = per_person.values().map(|n| n - 1).sum();
    assert!(
        repeated <= KILLS,
        "at most the action in flight at each of {KILLS} kills is repeated: {per_person:?}"
    );
    for person in truth
        .people
        .iter()
        .filter(|p| per_person.contains_key(&p.van_id))
    {
        assert!(
            person
                .phones
                .iter()
                .any(|p| p.phone_opt_in_status.as_deref() == Some("O")),
            "{person:?}"
        );
    }
    sandbox.shutdown().await;
}

/// `destinations check`: exit 1 naming what a committee lacks, the key never shown; exit 0
/// once it is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destinations_check_exits_1_naming_what_the_committee_lacks() {
    use crate::daemon_process::{command, config_file};

    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 20,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let dir = tempfile::tempdir().expect("dir");
    let config = format!(
        r#"
[webhook]
secrets = ["{secret}"]
[[destination]]
name = "van-main"
kind = "van"
base_url = "{van}"
api_key = "{van_key}"
[[destination]]
name = "action-network"
kind = "action_network"
base_url = "{an}"
api_key = "{an_key}"
"#,
        secret = crate::daemon_process::SECRET,
        van = sandbox.van_url(),
        van_key = DEFAULT_VAN_KEY,
        an = sandbox.action_network_url(),
        an_key = DEFAULT_ACTION_NETWORK_KEY,
    );
    std::fs::write(config_file(dir.path()), config).expect("config");
    let check = || {
        let mut command = command(dir.path(), &["destinations", "check"], &[]);
        async move {
            tokio::task::spawn_blocking(move || command.output().expect("runs"))
                .await
                .expect("joined")
        }
    };
    assert!(sandbox.van_set_sms_text(DEFAULT_VAN_KEY, false));
    let failing = check().await;
    let stdout = String::from_utf8_lossy(&failing.stdout);
    let stderr = String::from_utf8_lossy(&failing.stderr);
    assert_eq!(failing.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("van-main: FAILING: lookup: no contact type named \"SMS Text\""),
        "{stdout}"
    );
    assert!(stdout.contains("action-network: ok"), "{stdout}");
    for shown in [&stdout, &stderr] {
        assert!(!shown.contains(DEFAULT_VAN_KEY) && !shown.contains(DEFAULT_ACTION_NETWORK_KEY));
    }
    assert!(sandbox.van_set_sms_text(DEFAULT_VAN_KEY, true));
    let passing = check().await;
    assert_eq!(
        passing.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&passing.stdout)
    );
    sandbox.shutdown().await;
}

/// A key VAN refuses stops the destination with `error: credentials`; the right key put in
/// the file and reloaded (SIGHUP) sends everything that waited, with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_key_ends_the_credentials_error_and_everything_waiting_goes() {
    reloaded_secret_ends_the_error(process_config, DEFAULT_VAN_KEY).await;
}

/// The same of Mobile Commons, whose key is its login's password in `password_file`: a
/// password that does not work stops it, the right one put in the file and reloaded sends
/// everything that waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_mobile_commons_password_ends_the_credentials_error() {
    let dir = tempfile::tempdir().expect("dir");
    let password_file = dir.path().join("mc-password");
    let config = |sandbox: &RunningSandbox, password: &str, extra: &str| {
        std::fs::write(&password_file, format!("{password}\n")).expect("the password");
        let van = process_config(sandbox, "unused", extra);
        let service = van.split("[[destination]]").next().unwrap_or_default();
        format!(
            "{service}[[destination]]\nname = \"mc-dest\"\nkind = \"mobile_commons\"\n\
             base_url = \"{url}\"\nusername = \"{user}\"\npassword_file = \"{file}\"\n\
             requests_per_second = 1000\n",
            url = sandbox.mobile_commons_url(),
            user = outreach_sync_sandbox::DEFAULT_MOBILE_COMMONS_USERNAME,
            file = password_file.display(),
        )
    };
    reloaded_secret_ends_the_error(config, DEFAULT_MOBILE_COMMONS_PASSWORD).await;
}

/// A daemon (a child process) whose one destination, configured by `config` (the sandbox,
/// its secret, an extra section), starts with a secret the system refuses: stopped with
/// `error: credentials`, the secret never shown; then `right` written and reloaded
/// (SIGHUP): every opt-out that waited is written, with no restart.
async fn reloaded_secret_ends_the_error(
    config: impl Fn(&RunningSandbox, &str, &str) -> String,
    right: &str,
) {
    use crate::daemon_process::{Daemon, config_file};
    use std::time::Duration;

    const TOKEN: &str = "reload-destination-token-0123";
    const WRONG: &str = "a-secret-the-system-does-not-know";
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 100,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let dir = tempfile::tempdir().expect("dir");
    let extra = format!("[admin]\ntokens = [\"ops:{TOKEN}\"]");
    std::fs::write(config_file(dir.path()), config(&sandbox, WRONG, &extra)).expect("config");
    let reconcile = [(
        "OUTREACH_SYNC__RECONCILE__ON_START".to_owned(),
        "true".to_owned(),
    )];
    let mut daemon = Daemon::start(dir.path(), "reload", &reconcile).await;
    let view = || daemon.first_destination(TOKEN);
    // Another process: its state is looked at, not signalled.
    let stopped = common::within(Duration::from_secs(20), async || {
        let view = view().await;
        (view["state"] == "error").then_some(view)
    })
    .await
    .expect("stopped by its key");
    let error = stopped["lastError"].as_str().expect("an error");
    assert!(error.starts_with("credentials: "), "{error}");
    assert!(!error.contains(WRONG), "{error}");

    std::fs::write(config_file(dir.path()), config(&sandbox, right, &extra)).expect("config");
    daemon.signal(libc::SIGHUP);
    let opted_out = sandbox
        .leads()
        .iter()
        .filter(|l| l.global_opted_out)
        .count();
    let written = common::within(Duration::from_secs(20), async || {
        let view = view().await;
        let done = view["sent"].as_u64().unwrap_or(0) + view["unmatched"].as_u64().unwrap_or(0);
        (view["state"] == "active" && done as usize == opted_out).then_some(view)
    })
    .await;
    assert!(written.is_some(), "{}\n{}", view().await, daemon.logs());
    assert!(!daemon.logs().contains(right), "the secret is never logged");
    daemon.signal(libc::SIGTERM);
    let _ = daemon.exit_within(Duration::from_secs(10)).await;
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_only_the_leader_writes_to_van_and_each_opt_out_goes_once() {
    let Some((sandbox, app)) = campaign(Backend::Postgres).await else {
        return;
    };
    // The first daemon leads; the second, on the same database, stands by.
    let app = writing_to(app, vec![van(&sandbox)]).await;
    app.senders.started("van-main").await;
    let second = app.replica("second").await;
    app.settle().await;
    let view = view(&app, "van-main").await;
    let sent = view["sent"].as_u64().expect("sent");
    assert!(sent > 0, "{view}");
    let truth = sandbox.van_truth();
    assert_eq!(truth.canvass_responses.len() as u64, sent, "none repeated");
    let people: BTreeSet<u64> = truth.canvass_responses.iter().map(|r| r.van_id).collect();
    assert_eq!(people.len() as u64, sent, "one canvass response a person");
    let scraped =
        common::metrics_text(&app.http, format!("http://{}/metrics", second.admin_addr)).await;
    assert!(
        scraped.contains("# TYPE outreach_sync_destination_requests_total counter"),
        "{scraped}"
    );
    let standby_requests: u64 = scraped
        .lines()
        .filter(|l| l.starts_with("outreach_sync_destination_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(standby_requests, 0, "the standby wrote nothing: {scraped}");
    second.stop().await;
    app.stop().await;
    sandbox.shutdown().await;
}

/// A Mobile Commons source a reload adds, of the login a Mobile Commons destination writes
/// with, reads back what the destination wrote and what people said there: none of it is
/// written back to it (the destination takes none of its entries, not even as `already`),
/// though it was not configured when the destination's sender started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_a_reload_adds_is_never_written_back_to_the_destination_it_reads() {
    use crate::daemon_process::{Daemon, config_file};
    use std::time::Duration;

    const TOKEN: &str = "reload-echo-token-0123";
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 100,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let dir = tempfile::tempdir().expect("dir");
    let login = format!(
        "base_url = \"{url}\"\nusername = \"{user}\"\npassword = \"{password}\"\n\
         requests_per_second = 1000\n",
        url = sandbox.mobile_commons_url(),
        user = DEFAULT_MOBILE_COMMONS_USERNAME,
        password = DEFAULT_MOBILE_COMMONS_PASSWORD,
    );
    let service = process_config(
        &sandbox,
        "unused",
        &format!("[admin]\ntokens = [\"ops:{TOKEN}\"]"),
    );
    let service = service.split("[[destination]]").next().unwrap_or_default();
    let without =
        format!("{service}[[destination]]\nname = \"mc-dest\"\nkind = \"mobile_commons\"\n{login}");
    let with_source = format!(
        "{without}[[source]]\nname = \"mc-main\"\nkind = \"mobile_commons\"\nevery_secs = 1\n{login}"
    );
    std::fs::write(config_file(dir.path()), &without).expect("config");
    let reconcile = [(
        "OUTREACH_SYNC__RECONCILE__ON_START".to_owned(),
        "true".to_owned(),
    )];
    let daemon = Daemon::start(dir.path(), "reload-echo", &reconcile).await;
    let opted_out = sandbox
        .leads()
        .iter()
        .filter(|l| l.global_opted_out)
        .count();
    let written = common::within(Duration::from_secs(30), async || {
        let view = daemon.first_destination(TOKEN).await;
        (view["sent"].as_u64() == Some(opted_out as u64)).then_some(view)
    })
    .await;
    assert!(written.is_some(), "{}", daemon.logs());
    // A person texts STOP to Mobile Commons; then the source is added.
    let lead = sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .expect("an opted-in lead");
    sandbox
        .mobile_commons_stop(&lead.phone_number)
        .expect("texted STOP");
    std::fs::write(config_file(dir.path()), &with_source).expect("config");
    daemon.signal(libc::SIGHUP);
    let http = reqwest::Client::new();
    let get = async |path: &str| -> Value {
        http.get(daemon.admin_url(path))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("an answer")
            .json()
            .await
            .expect("JSON")
    };
    let read = common::within(Duration::from_secs(30), async || {
        let list = get("/v1/sources").await;
        (list["items"][0]["optOuts"].as_i64() >= Some(1)).then_some(list)
    })
    .await;
    assert!(
        read.is_some(),
        "the source added read the STOP: {}",
        daemon.logs()
    );
    // The destination's sender has passed the entry (its cursor at the ledger's end).
    let passed = common::within(Duration::from_secs(30), async || {
        let view = daemon.first_destination(TOKEN).await;
        (view["lagEntries"] == 0).then_some(view)
    })
    .await;
    assert!(passed.is_some(), "{}", daemon.logs());
    let digits = lead.phone_number.trim_start_matches('+');
    let calls = sandbox.mobile_commons_truth().opt_out_calls;
    assert!(calls.iter().all(|c| c.phone_number != digits), "{calls:?}");
    for state in ["already", "sent", "refused", "unmatched", "unconfirmed"] {
        let outcomes = get(&format!("/v1/destinations/mc-dest/outcomes?state={state}")).await;
        let items = outcomes["items"].as_array().cloned().unwrap_or_default();
        assert!(
            items
                .iter()
                .all(|o| o["phoneNumber"] != lead.phone_number.as_str()),
            "{state}: {outcomes}"
        );
    }
    daemon.signal(libc::SIGTERM);
    sandbox.shutdown().await;
}
