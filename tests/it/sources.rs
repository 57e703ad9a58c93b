//! Sources: opt-outs given in VAN (a phone banker's "Do Not Text", a phone opted out) and in
//! Action Network (a supporter unsubscribing) read back from the sandbox's fakes, recorded
//! once, and carried to the service and the other system, never back to where they came
//! from.

use std::time::Duration;

use outreach_sync::settings::{SourceSettings, SourceSystem};
use outreach_sync_sandbox::destinations::{VanMark, VanTarget};
use outreach_sync_sandbox::wire::Lead;
use outreach_sync_sandbox::{DEFAULT_ACTION_NETWORK_KEY, DEFAULT_VAN_KEY, RunningSandbox};
use serde_json::Value;

use crate::common::{Backend, TestApp, eventually, on_both_backends};
use crate::destinations::once::{opted_in_with_van_id, writes_of};
use crate::destinations::{action_network, campaign, campaign_of, van};

mod carriers;
mod faults;
mod hostile;
mod mobile_commons;
mod mobilize;
mod process;
mod review;
pub(crate) mod twilio;

const WAIT: Duration = Duration::from_secs(30);

fn van_source(sandbox: &RunningSandbox) -> SourceSettings {
    let mut source = SourceSettings::new(
        "van-main",
        SourceSystem::Van(Default::default()),
        &sandbox.van_url(),
        DEFAULT_VAN_KEY,
    );
    source.requests_per_second = 1_000;
    source.every_secs = 1;
    source
}

fn action_network_source(sandbox: &RunningSandbox) -> SourceSettings {
    let mut source = SourceSettings::new(
        "an-main",
        SourceSystem::ActionNetwork(Default::default()),
        &sandbox.action_network_url(),
        DEFAULT_ACTION_NETWORK_KEY,
    );
    source.requests_per_second = 1_000;
    source.every_secs = 1;
    source
}

/// The campaign's daemon writing to VAN and Action Network and reading both back.
async fn both_ways(backend: Backend) -> Option<(RunningSandbox, TestApp)> {
    let (sandbox, mut app) = campaign(backend).await?;
    app.settings.destination = vec![van(&sandbox), action_network(&sandbox)];
    app.settings.source = vec![van_source(&sandbox), action_network_source(&sandbox)];
    let app = app.restart().await;
    app.settle().await;
    // The daemon's own first runs, at its start, are over before the test acts.
    for name in ["van-main", "an-main"] {
        eventually("the daemon's first run", WAIT, async || {
            listed(&app, name).await["state"] == "ok"
        })
        .await;
    }
    Some((sandbox, app))
}

/// The campaign's daemon writing to Action Network and reading the source `source` gives,
/// once its first run read to its end.
pub(crate) async fn writing_to_action_network(
    backend: Backend,
    source: fn(&RunningSandbox) -> SourceSettings,
) -> Option<(RunningSandbox, TestApp)> {
    reading_into(backend, source, action_network).await
}

/// The campaign's daemon reading the source `source` gives and writing to the destination
/// `destination` gives, once its first run read to its end.
pub(crate) async fn reading_into(
    backend: Backend,
    source: fn(&RunningSandbox) -> SourceSettings,
    destination: fn(&RunningSandbox) -> outreach_sync::settings::DestinationSettings,
) -> Option<(RunningSandbox, TestApp)> {
    let (sandbox, mut app) = campaign(backend).await?;
    let source = source(&sandbox);
    let name = source.name.clone();
    app.settings.destination = vec![destination(&sandbox)];
    app.settings.source = vec![source];
    let app = app.restart().await;
    app.settle().await;
    eventually("the daemon's first run", WAIT, async || {
        listed(&app, &name).await["state"] == "ok"
    })
    .await;
    Some((sandbox, app))
}

/// What source `name` of `app` counted, once the daemon's own runs (every second) brought
/// its `field` to `at_least`, and two more runs passed (so that nothing is still coming).
async fn counted(app: &TestApp, name: &str, field: &str, at_least: i64) -> Value {
    let seen = eventually(format!("{name}'s {field}"), WAIT, async || {
        let view = listed(app, name).await;
        (view[field].as_i64().unwrap_or(0) >= at_least).then_some(view)
    })
    .await;
    let then = seen["lastRunAt"].as_str().unwrap_or_default().to_owned();
    eventually(format!("{name}'s next runs"), WAIT, async || {
        let view = listed(app, name).await;
        let at = view["lastRunAt"].as_str().unwrap_or_default().to_owned();
        (at > then).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    listed(app, name).await
}

/// Once source `name` counted a record as `field`: it recorded no opt-out, and the ledger
/// holds no entry of `phone` from its kind (`source`).
async fn recorded_nothing(app: &TestApp, (name, field): (&str, &str), source: &str, phone: &str) {
    let view = counted(app, name, field, 1).await;
    assert_eq!(view["optOuts"], 0, "{view}");
    assert!(entries_from(app, source, phone).await.is_empty());
}

pub(crate) async fn opted_out_at_service(sandbox: &RunningSandbox, lead: &Lead) {
    eventually("the opt-out at the service", WAIT, async || {
        sandbox
            .leads()
            .into_iter()
            .any(|l| l.id == lead.id && l.global_opted_out)
    })
    .await;
}

/// The ledger's entries of `phone` from `source`: (organization, evidence).
async fn entries_from(app: &TestApp, source: &str, phone: &str) -> Vec<(String, String)> {
    app.rows(&format!(
        "SELECT organization_id, CAST(evidence AS TEXT) FROM ledger
             WHERE source = '{source}' AND phone_number = '{phone}' ORDER BY seq"
    ))
    .await
}

/// The compliance report names where `lead`'s opt-out was given and when the daemon first had
/// it; VAN, where it came from, owes nothing.
async fn report_names_where_it_was_given(app: &TestApp, lead: &Lead) {
    let (_, item) = compliance_item(app, |i| {
        i["source"] == "van" && i["organizationId"] == lead.organization_id.as_str()
    })
    .await;
    assert_eq!(item["readBy"], "van-main", "{item}");
    assert!(item["seenAt"].as_str().is_some(), "{item}");
    let names: Vec<&str> = item["destinations"]
        .as_array()
        .expect("destinations")
        .iter()
        .filter_map(|d| d["name"].as_str())
        .collect();
    assert!(names.contains(&"action-network"), "{item}");
    assert!(!names.contains(&"van-main"), "{item}");
    assert_eq!(item["state"], "honoured", "{item}");
}

/// The compliance report, and its item that `wanted` picks (the test fails without one).
pub(crate) async fn compliance_item(
    app: &TestApp,
    wanted: impl Fn(&Value) -> bool,
) -> (Value, Value) {
    let report: Value = app
        .admin_get("/v1/compliance")
        .await
        .json()
        .await
        .expect("json");
    let item = report["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| wanted(i))
        .cloned()
        .unwrap_or_else(|| panic!("the opt-out in the report: {report}"));
    (report, item)
}

async fn listed(app: &TestApp, name: &str) -> Value {
    let list: Value = app
        .admin_get("/v1/sources")
        .await
        .json()
        .await
        .expect("json");
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} is listed: {list}"))
}

on_both_backends!(
    a_do_not_text_marked_in_van_reaches_the_service_and_action_network_once,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_do_not_text_marked_in_van_reaches_the_service_and_action_network_once(backend: Backend) {
    let Some((sandbox, app)) = both_ways(backend).await else {
        return;
    };
    let (lead, van_id) = opted_in_with_van_id(&sandbox);
    sandbox
        .van_mark(
            DEFAULT_VAN_KEY,
            &VanTarget::VanId(van_id),
            VanMark::DoNotText,
            "phone banker",
        )
        .expect("marked");

    let view = counted(&app, "van-main", "optOuts", 1).await;
    assert_eq!(view["optOuts"], 1, "{view}");
    let entries = entries_from(&app, "van", &lead.phone_number).await;
    assert!(
        entries.iter().any(|(org, _)| org == "*"),
        "held account-wide: {entries:?}"
    );
    assert!(
        entries.iter().any(|(org, _)| *org == lead.organization_id),
        "and in the lead's organization: {entries:?}"
    );
    let evidence: Value = serde_json::from_str(&entries[0].1).expect("evidence");
    assert_eq!(evidence["actor"], "van-main", "{evidence}");
    assert!(
        evidence["standsOn"]["sha256"]
            .as_str()
            .is_some_and(|h| h.len() == 64),
        "{evidence}"
    );
    opted_out_at_service(&sandbox, &lead).await;
    app.settle().await;
    let (canvassed, phone_updates, posted) = writes_of(&sandbox, van_id, &lead.phone_number);
    assert_eq!(posted, 1, "Action Network got the opt-out once");
    assert_eq!(
        (canvassed, phone_updates),
        (1, 0),
        "VAN holds the phone banker's response alone: nothing was written back to it"
    );

    // Read again every second (the overlap behind the watermark reads the same change):
    // nothing twice.
    let again = counted(&app, "van-main", "optOuts", 1).await;
    assert_eq!(again["optOuts"], 1, "{again}");
    assert_eq!(again["read"], view["read"], "{again}");
    assert_eq!(
        entries_from(&app, "van", &lead.phone_number).await.len(),
        entries.len()
    );
    // What the daemon wrote to Action Network, read back, ends there.
    recorded_nothing(
        &app,
        ("an-main", "confirmed"),
        "action_network",
        &lead.phone_number,
    )
    .await;
    assert_eq!(again["state"], "ok", "{again}");

    report_names_where_it_was_given(&app, &lead).await;
    // The console's status page shows it too.
    let mut visitor = crate::console::Visitor::new(&app);
    visitor.sign_in(crate::common::ADMIN_TOKEN).await;
    let page = visitor.text("/status").await;
    assert!(page.contains("id=\"sources\""), "a table of sources");
    assert!(page.contains("van-main"), "{page}");
    assert!(
        sandbox.van_truth().download_credentials_seen.is_empty(),
        "no credential went to the download host"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_supporter_unsubscribing_in_action_network_reaches_the_service_and_van,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_supporter_unsubscribing_in_action_network_reaches_the_service_and_van(backend: Backend) {
    let Some((sandbox, app)) = both_ways(backend).await else {
        return;
    };
    let (lead, van_id) = opted_in_with_van_id(&sandbox);
    sandbox
        .action_network_unsubscribe(&lead.phone_number)
        .expect("unsubscribed");

    let view = counted(&app, "an-main", "optOuts", 1).await;
    assert_eq!(view["optOuts"], 1, "{view}");
    opted_out_at_service(&sandbox, &lead).await;
    app.settle().await;
    let (canvassed, _, posted) = writes_of(&sandbox, van_id, &lead.phone_number);
    assert_eq!(canvassed, 1, "VAN got a Do Not Text response");
    assert_eq!(posted, 0, "nothing was written back to Action Network");

    // VAN's read leaves out what this key wrote there (excludeChangesFromSelf).
    let before = listed(&app, "van-main").await;
    let van = counted(
        &app,
        "van-main",
        "read",
        before["read"].as_i64().unwrap_or(0),
    )
    .await;
    assert_eq!(van["optOuts"], 0, "{van}");
    assert!(
        entries_from(&app, "van", &lead.phone_number)
            .await
            .is_empty()
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    an_opt_out_written_to_action_network_for_one_organization_stays_that_organizations,
    flavor = "multi_thread",
    worker_threads = 2
);
/// Action Network lists the daemon's own writes back to it: the opt-out a person texted to
/// one organization, written there and read back, is that write (an echo), not a new
/// opt-out for the whole account; the other organization's lead of the number keeps texting.
async fn an_opt_out_written_to_action_network_for_one_organization_stays_that_organizations(
    backend: Backend,
) {
    let config = outreach_sync_sandbox::SandboxConfig {
        leads: 300,
        organizations: 2,
        account_sync: false,
        ..Default::default()
    };
    let Some((sandbox, mut app)) = campaign_of(backend, config).await else {
        return;
    };
    app.settings.destination = vec![action_network(&sandbox)];
    app.settings.source = vec![action_network_source(&sandbox)];
    let app = app.restart().await;
    let leads = sandbox.leads();
    let (texted, other) = leads
        .iter()
        .filter(|l| !l.global_opted_out)
        .find_map(|a| {
            let b = leads.iter().find(|b| {
                b.phone_number == a.phone_number
                    && b.organization_id != a.organization_id
                    && !b.global_opted_out
            })?;
            Some((a.clone(), b.clone()))
        })
        .expect("a number two organizations hold, opted in in both");
    sandbox
        .text_stop(&texted.organization_id, &texted.phone_number)
        .expect("STOP");
    let event = serde_json::json!({
        "type": "consentUpdate-v1",
        "id": "evt_stop_texted",
        "createdAt": chrono::Utc::now().to_rfc3339(),
        "data": {
            "organizationId": texted.organization_id,
            "leadId": texted.id,
            "phoneNumber": texted.phone_number,
            "globalOptedOut": true,
        }
    });
    let answer = app.post_signed(&event.to_string()).await;
    assert!(answer.status().is_success(), "{}", answer.status());

    let number = texted.phone_number.trim_start_matches('+').to_owned();
    eventually("Action Network has the opt-out", WAIT, async || {
        sandbox.action_network_truth().signups.iter().any(|p| {
            p.phone_numbers
                .iter()
                .any(|n| n.number == number && n.status == "unsubscribed")
        })
    })
    .await;
    // The write read back is no news.
    recorded_nothing(
        &app,
        ("an-main", "confirmed"),
        "action_network",
        &texted.phone_number,
    )
    .await;
    app.settle().await;
    let still = sandbox
        .leads()
        .into_iter()
        .find(|l| l.id == other.id)
        .expect("the other lead");
    assert!(
        !still.global_opted_out,
        "the other organization's lead of the number was not opted out"
    );
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    an_opt_in_read_back_is_not_taken_without_opt_ins,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn an_opt_in_read_back_is_not_taken_without_opt_ins(backend: Backend) {
    let Some((sandbox, app)) = both_ways(backend).await else {
        return;
    };
    let (lead, van_id) = opted_in_with_van_id(&sandbox);
    sandbox
        .van_mark(
            DEFAULT_VAN_KEY,
            &VanTarget::VanId(van_id),
            VanMark::OptIn,
            "organizer",
        )
        .expect("marked");
    recorded_nothing(&app, ("van-main", "ignored"), "van", &lead.phone_number).await;
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_watermark_past_vans_ninety_days_is_an_error_until_resynced,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_watermark_past_vans_ninety_days_is_an_error_until_resynced(backend: Backend) {
    let Some((sandbox, mut app)) = crate::destinations::campaign(backend).await else {
        return;
    };
    let mut source = van_source(&sandbox);
    source.every_secs = 3_600;
    source.since = (chrono::Utc::now() - chrono::Duration::days(100)).to_rfc3339();
    app.settings.source = vec![source.clone()];
    let app = app.restart().await;
    // The daemon's own first run, at its start.
    let view = eventually("the first run", WAIT, async || {
        let view = listed(&app, "van-main").await;
        (view["state"] == "error").then_some(view)
    })
    .await;
    let error = view["lastError"].as_str().expect("lastError");
    assert!(error.contains("90 days"), "{error}");
    assert!(error.contains("sources resync"), "{error}");

    // The CLI, as a user runs it, on the daemon's database.
    let config = app.dir.path().join("sources.toml");
    std::fs::write(
        &config,
        format!(
            "[[source]]\nname = \"van-main\"\nkind = \"van\"\nbase_url = {:?}\napi_key = {:?}\n",
            sandbox.van_url(),
            DEFAULT_VAN_KEY
        ),
    )
    .expect("config");
    let cli = |args: &[&str]| cli_on(&app, &config, args);
    let since = (chrono::Utc::now() - chrono::Duration::days(2))
        .format("%Y-%m-%d")
        .to_string();
    let out = cli(&["sources", "resync", "van-main", "--since", &since]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::cli::text(&out.stderr)
    );
    let out = cli(&["sources", "run", "van-main", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::cli::text(&out.stderr)
    );
    let out = cli(&["sources", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(list["items"][0]["state"], "ok", "{list}");
    let view = listed(&app, "van-main").await;
    assert_eq!(view["state"], "ok", "{view}");
    let missing = cli(&["sources", "run", "nobody"]);
    assert_eq!(missing.status.code(), Some(3));
    app.stop().await;
    sandbox.shutdown().await;
}

on_both_backends!(
    a_source_that_has_not_read_lately_is_named_in_the_compliance_report,
    flavor = "multi_thread",
    worker_threads = 2
);
/// Opt-outs given where a source reads are in the compliance report only once it read
/// them: one that has not read to its end lately is named there (JSON, text, the printable
/// file), so that a report that looks clean is not taken for one that is.
async fn a_source_that_has_not_read_lately_is_named_in_the_compliance_report(backend: Backend) {
    let Some((sandbox, mut app)) = campaign(backend).await else {
        return;
    };
    // Nothing answers there.
    let mut down = van_source(&sandbox);
    down.name = "van-down".to_owned();
    down.base_url = "http://127.0.0.1:9".to_owned();
    app.settings.source = vec![down, action_network_source(&sandbox)];
    let app = app.restart().await;
    eventually("both sources' first runs", WAIT, async || {
        listed(&app, "van-down").await["state"] == "error"
            && listed(&app, "an-main").await["state"] == "ok"
    })
    .await;
    // Two of its intervals (a second each) without a read to its end.
    tokio::time::sleep(Duration::from_millis(2_500)).await;

    let report: Value = app
        .admin_get("/v1/compliance")
        .await
        .json()
        .await
        .expect("json");
    let standing = |name: &str| {
        report["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in the report: {report}"))
    };
    let behind = standing("van-down");
    assert_eq!(behind["behind"], true, "{behind}");
    assert!(behind["lastSuccessAt"].is_null(), "{behind}");
    assert!(behind["lastError"].as_str().is_some(), "{behind}");
    let reading = standing("an-main");
    assert_eq!(reading["behind"], false, "{reading}");

    // The command line's text and printable file, on the daemon's database.
    let run = |format: &str| report_of(&app, &sandbox, format);
    let text = run("text");
    assert!(
        text.contains("BEHIND: van-down (van), never read yet"),
        "{text}"
    );
    assert!(!text.contains("BEHIND: an-main"), "{text}");
    let html = run("html");
    assert!(html.contains("id=\"report-sources\""), "{html}");
    assert!(html.contains(">behind<"), "{html}");
    app.stop().await;
    sandbox.shutdown().await;
}

/// `report compliance --format FORMAT` on `app`'s database, with the two sources of the
/// stale-source test configured (one where nothing answers).
fn report_of(app: &TestApp, sandbox: &RunningSandbox, format: &str) -> String {
    let config = app.dir.path().join("report.toml");
    std::fs::write(
        &config,
        format!(
            "[[source]]\nname = \"van-down\"\nkind = \"van\"\nbase_url = \"http://127.0.0.1:9\"\napi_key = \"k\"\nevery_secs = 1\n\
             [[source]]\nname = \"an-main\"\nkind = \"action_network\"\nbase_url = {:?}\napi_key = {:?}\nevery_secs = 1\n",
            sandbox.action_network_url(),
            DEFAULT_ACTION_NETWORK_KEY
        ),
    )
    .expect("config");
    let db = [(
        "OUTREACH_SYNC__DATABASE__URL",
        app.settings.database.url.as_str(),
    )];
    let config = config.to_str().expect("path");
    let args = [
        "--config",
        config,
        "report",
        "compliance",
        "--format",
        format,
    ];
    let out = crate::cli::run(app.dir.path(), &args, &db, "");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::cli::text(&out.stderr)
    );
    crate::cli::text(&out.stdout)
}

/// The binary run with `args` on `app`'s database, as a user runs it beside the daemon,
/// with the configuration file `config`.
fn cli_on(app: &TestApp, config: &std::path::Path, args: &[&str]) -> std::process::Output {
    let config = config.to_str().expect("path");
    let args: Vec<&str> = ["--config", config].iter().chain(args).copied().collect();
    let db = [(
        "OUTREACH_SYNC__DATABASE__URL",
        app.settings.database.url.as_str(),
    )];
    crate::cli::run(app.dir.path(), &args, &db, "")
}
