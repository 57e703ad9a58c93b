//! Opt-out lists imported as a campaign brings them (mixed formats, a BOM, semicolons, bad
//! rows), and suppression: the numbers reach the service for every mirrored lead, and a lead
//! that appears later with one of them is opted out by the next reconciliation pass.

use std::time::Duration;

use outreach_sync::client::ServiceClient;
use outreach_sync::client::models::UpsertLead;
use outreach_sync::reconcile::{PassRequest, Reconciler};
use outreach_sync::settings::Settings;
use outreach_sync_sandbox::wire::Lead;
use outreach_sync_sandbox::{RunningSandbox, Sandbox, SandboxConfig};
use secrecy::SecretString;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::common::{self, ADMIN_TOKEN, Backend, TestApp, eventually, on_both_backends};

const WAIT: Duration = Duration::from_secs(20);

/// A list as another platform exports it: a BOM, a header row, `;`, quoted fields, the
/// numbers in several national and international formats. `numbers` are E.164 (`+1555…`).
fn exported_list(numbers: &[&str], bad: &[&str]) -> String {
    let mut text = String::from("\u{feff}Name;\"Mobile Phone\";Opted out on\n");
    for (i, number) in numbers.iter().enumerate() {
        let national = &number[2..];
        let (area, exchange, line) = (&national[..3], &national[3..6], &national[6..]);
        let written = match i % 4 {
            0 => format!("({area}) {exchange}-{line}"),
            1 => format!("{area}.{exchange}.{line}"),
            2 => format!("+1 {area} {exchange} {line}"),
            _ => format!("1-{area}-{exchange}-{line}"),
        };
        text.push_str(&format!(
            "\"Person {i}\";\"{written}\";2024-05-0{}\n",
            i % 9 + 1
        ));
    }
    for (i, value) in bad.iter().enumerate() {
        text.push_str(&format!("Bad {i};{value};2024-01-01\n"));
    }
    text
}

async fn import(app: &TestApp, query: &str, body: String) -> (u16, Value) {
    let response = app
        .http
        .post(app.admin_url(&format!("/v1/consent/import?{query}")))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "text/csv")
        .body(body)
        .send()
        .await
        .expect("import request");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON answer"))
}

async fn ledger_entries(app: &TestApp) -> i64 {
    app.count("SELECT COUNT(*) FROM ledger").await
}

on_both_backends!(a_list_with_bad_rows_is_refused_whole_then_recorded_once_with_skip_invalid);
async fn a_list_with_bad_rows_is_refused_whole_then_recorded_once_with_skip_invalid(
    backend: Backend,
) {
    let Some(app) = common::spawn_app_on(backend, common::with_admin_token).await else {
        return;
    };
    let numbers: Vec<String> = (0..40).map(|i| format!("+1555010{i:04}")).collect();
    let mut listed: Vec<&str> = numbers.iter().map(String::as_str).collect();
    listed.push(&numbers[3]); // written twice
    let list = exported_list(&listed, &["12", "call me", "+1 555 01"]);

    let (status, refused) = import(&app, "org=org_a", list.clone()).await;
    assert_eq!(status, 400, "{refused}");
    let lines: Vec<u64> = refused["invalid"]
        .as_array()
        .expect("the bad rows")
        .iter()
        .map(|row| row["line"].as_u64().expect("line"))
        .collect();
    // Header on line 1, 41 numbers on lines 2..=42, the bad rows after them.
    assert_eq!(lines, [43, 44, 45]);
    assert_eq!(refused["invalid"][1]["value"], "call me");
    assert_eq!(
        ledger_entries(&app).await,
        0,
        "a refused list records nothing"
    );

    let (status, dry) = import(&app, "org=org_a&skipInvalid=true&dryRun=true", list.clone()).await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["recorded"], 40);
    assert_eq!(dry["dryRun"], true);
    assert_eq!(ledger_entries(&app).await, 0, "a dry run records nothing");

    let (status, report) = import(
        &app,
        "org=org_a&skipInvalid=true&reason=list%20from%20old%20platform&file=old.csv",
        list.clone(),
    )
    .await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(
        (
            &report["rows"],
            &report["valid"],
            &report["invalid"],
            &report["duplicatesInFile"],
            &report["recorded"],
            &report["alreadyOptedOut"],
        ),
        (
            &44.into(),
            &41.into(),
            &3.into(),
            &1.into(),
            &40.into(),
            &0.into()
        )
    );
    let sha256 = report["sha256"].as_str().expect("sha256").to_owned();
    assert_eq!(sha256.len(), 64);

    // Every entry is an `import` one whose evidence names the file.
    let evidence = app
        .texts("SELECT CAST(evidence AS TEXT) FROM ledger WHERE phone_number = '+15550100003'")
        .await;
    let evidence: Value = serde_json::from_str(&evidence[0]).expect("evidence JSON");
    assert_eq!(evidence["sha256"], sha256.as_str());
    assert_eq!(evidence["file"], "old.csv");
    assert_eq!(evidence["line"], 5, "the number's first line");
    assert_eq!(evidence["actor"], "token-1");
    assert_eq!(evidence["reason"], "list from old platform");
    let sources = app
        .texts("SELECT DISTINCT source FROM consent_ledger")
        .await;
    assert_eq!(sources, ["import"]);
    let current = app
        .admin_get("/v1/consent?phoneNumber=(555)%20010-0003")
        .await;
    let current: Value = current.json().await.expect("JSON");
    assert_eq!(current["items"][0]["optedOut"], true);
    assert_eq!(
        current["suppressed"], false,
        "an organization's list suppresses nothing"
    );

    let (status, again) = import(&app, "org=org_a&skipInvalid=true", list).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (&again["recorded"], &again["alreadyOptedOut"]),
        (&0.into(), &40.into())
    );
    assert_eq!(
        ledger_entries(&app).await,
        40,
        "the same list twice records nothing new"
    );
    app.stop().await;
}

fn point_at(settings: &mut Settings, sandbox: &RunningSandbox) {
    common::with_admin_token(settings);
    settings.service.base_url = sandbox.base_url();
    settings.service.client_id = sandbox.config().client_id.clone();
    settings.service.client_secret =
        Some(SecretString::from(sandbox.config().client_secret.clone()));
    settings.service.requests_per_second = 1000;
    settings.reconcile.schedule = "".into();
    settings.reconcile.on_start = false;
}

async fn pass(app: &TestApp, sandbox: &RunningSandbox) -> outreach_sync::reconcile::PassSummary {
    let client = ServiceClient::new(common::client_config(sandbox)).expect("client");
    let reconciler = Reconciler::new(app.pool.clone(), client, &app.settings.reconcile);
    let leads = PassRequest {
        leads: true,
        messages: false,
        ..PassRequest::default()
    };
    reconciler
        .run_pass(&leads, &CancellationToken::new())
        .await
        .expect("a pass")
}

fn lead_at_sandbox(sandbox: &RunningSandbox, id: &str) -> Option<Lead> {
    sandbox.leads().into_iter().find(|l| l.id == id)
}

/// A lead created at the service after the import, in `organization`.
async fn new_lead(sandbox: &RunningSandbox, organization: &str, phone: &str) -> String {
    let client = ServiceClient::new(common::client_config(sandbox)).expect("client");
    let upserted = client
        .upsert_lead(&UpsertLead {
            phone_number: phone.to_owned(),
            organization_id: organization.to_owned(),
            ..UpsertLead::default()
        })
        .await
        .expect("lead created");
    let lead = upserted.lead();
    assert!(!lead.global_opted_out);
    lead.id.clone()
}

on_both_backends!(an_account_list_opts_out_mirrored_leads_at_the_service_and_suppresses_new_ones);
async fn an_account_list_opts_out_mirrored_leads_at_the_service_and_suppresses_new_ones(
    backend: Backend,
) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 30,
        organizations: 2,
        account_sync: false,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let Some(app) = common::spawn_app_on(backend, |s| point_at(s, &sandbox)).await else {
        return;
    };
    let first = pass(&app, &sandbox).await;
    assert_eq!(first.leads_scanned, 30);
    let mirrored: Vec<Lead> = sandbox
        .leads()
        .into_iter()
        .filter(|l| !l.global_opted_out)
        .take(3)
        .collect();
    assert_eq!(mirrored.len(), 3, "three opted-in leads to import");
    let unknown = ["+15559990001", "+15559990002"];
    let mut listed: Vec<&str> = mirrored.iter().map(|l| l.phone_number.as_str()).collect();
    listed.extend(unknown);
    let (status, report) = import(&app, "account=true", exported_list(&listed, &[])).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["suppressed"], 5, "{report}");
    assert!(report["pushes"].as_u64().expect("pushes") >= 3, "{report}");

    // The daemon's pusher opts every mirrored lead out at the service.
    for lead in &mirrored {
        eventually("the imported opt-out at the service", WAIT, async || {
            lead_at_sandbox(&sandbox, &lead.id).is_some_and(|l| l.global_opted_out)
        })
        .await;
    }

    // A lead created later, in either organization, with a suppressed number.
    let organization = &mirrored[0].organization_id;
    let came_back = new_lead(&sandbox, organization, unknown[0]).await;
    let after = pass(&app, &sandbox).await;
    assert_eq!(after.suppressed, 1, "{after:?}");
    eventually(
        "the suppressed lead opted out at the service",
        WAIT,
        async || lead_at_sandbox(&sandbox, &came_back).is_some_and(|l| l.global_opted_out),
    )
    .await;
    let current: Value = app
        .admin_get(&format!("/v1/consent?phoneNumber={}", unknown[0]))
        .await
        .json()
        .await
        .expect("JSON");
    assert_eq!(current["suppressed"], true, "{current}");
    let by = current["suppressedBy"].as_i64().expect("suppressedBy");
    let evidence = app
        .texts(&format!(
            "SELECT CAST(evidence AS TEXT) FROM ledger WHERE lead_id = '{came_back}' AND source = 'local'"
        ))
        .await;
    let evidence: Value = serde_json::from_str(&evidence[0]).expect("evidence JSON");
    assert_eq!(evidence["actor"], "suppression");
    assert_eq!(evidence["suppressedBy"], by);
    let account_entry = app
        .texts(&format!("SELECT source FROM ledger WHERE seq = {by}"))
        .await;
    assert_eq!(
        account_entry,
        ["import"],
        "suppressed by the imported entry"
    );

    // One pass more finds everything in place: nothing suppressed twice.
    let again = pass(&app, &sandbox).await;
    assert_eq!(again.suppressed, 0, "{again:?}");
    app.stop().await;
}

on_both_backends!(an_organizations_list_holds_for_its_new_leads_only);
async fn an_organizations_list_holds_for_its_new_leads_only(backend: Backend) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 10,
        organizations: 2,
        account_sync: false,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let Some(app) = common::spawn_app_on(backend, |s| point_at(s, &sandbox)).await else {
        return;
    };
    pass(&app, &sandbox).await;
    let organizations: Vec<String> = {
        let mut orgs: Vec<String> = sandbox
            .leads()
            .into_iter()
            .map(|l| l.organization_id)
            .collect();
        orgs.sort();
        orgs.dedup();
        orgs
    };
    assert_eq!(organizations.len(), 2);
    let number = "+15559990077";
    let (status, report) = import(
        &app,
        &format!("org={}", organizations[0]),
        exported_list(&[number], &[]),
    )
    .await;
    assert_eq!((status, &report["recorded"]), (200, &1.into()), "{report}");

    let in_list = new_lead(&sandbox, &organizations[0], number).await;
    let elsewhere = new_lead(&sandbox, &organizations[1], number).await;
    let after = pass(&app, &sandbox).await;
    assert_eq!(after.suppressed, 1, "{after:?}");
    eventually(
        "the new lead of the list's organization opted out",
        WAIT,
        async || lead_at_sandbox(&sandbox, &in_list).is_some_and(|l| l.global_opted_out),
    )
    .await;
    let other = lead_at_sandbox(&sandbox, &elsewhere).expect("the other lead");
    assert!(
        !other.global_opted_out,
        "another organization's lead is left alone"
    );
    app.stop().await;
}

/// `outreach-sync import` as a user runs it on a SQLite database of its own.
fn import_command(
    dir: &std::path::Path,
    args: &[&str],
    stdin: Option<&str>,
) -> std::process::Output {
    use std::io::Write as _;
    let mut command = crate::daemon_process::command(dir, args, &[]);
    command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("the binary starts");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .expect("stdin written");
    drop(input);
    child.wait_with_output().expect("the binary ends")
}

#[test]
fn the_cli_names_the_bad_lines_refuses_with_exit_2_and_records_from_standard_input() {
    use crate::cli::text;
    let dir = tempfile::tempdir().expect("temp dir");
    let migrated = import_command(dir.path(), &["migrate"], None);
    assert!(migrated.status.success(), "{}", text(&migrated.stderr));
    let numbers: Vec<String> = (0..30).map(|i| format!("+1555020{i:04}")).collect();
    let listed: Vec<&str> = numbers.iter().map(String::as_str).collect();
    let bad: Vec<String> = (0..25).map(|i| format!("x{i}")).collect();
    let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
    let path = dir.path().join("old export.csv");
    std::fs::write(&path, exported_list(&listed, &bad)).expect("list written");
    let file = path.to_str().expect("a path");

    let refused = import_command(dir.path(), &["import", file, "--org", "org_a"], None);
    assert_eq!(refused.status.code(), Some(2));
    let said = text(&refused.stderr);
    assert!(said.contains("line 32: \"x0\""), "{said}");
    assert!(
        said.contains("… and 5 more invalid rows (--json lists them all)"),
        "{said}"
    );
    assert!(
        said.contains("25 of 55 rows hold no possible phone number"),
        "{said}"
    );
    let as_json = import_command(
        dir.path(),
        &["import", file, "--org", "org_a", "--json"],
        None,
    );
    assert_eq!(as_json.status.code(), Some(2));
    let refusal: Value = serde_json::from_slice(&as_json.stdout).expect("JSON");
    assert_eq!(refusal["invalid"].as_array().map(Vec::len), Some(25));

    let neither = import_command(dir.path(), &["import", file], None);
    assert_eq!(neither.status.code(), Some(2), "a scope is required");

    let from_stdin = import_command(
        dir.path(),
        &["import", "-", "--account", "--skip-invalid", "--json"],
        Some(&exported_list(&listed, &bad)),
    );
    assert!(from_stdin.status.success(), "{}", text(&from_stdin.stderr));
    let report: Value = serde_json::from_slice(&from_stdin.stdout).expect("JSON");
    assert_eq!(
        (&report["recorded"], &report["suppressed"]),
        (&30.into(), &30.into())
    );

    let looked_up = import_command(dir.path(), &["history", "(555) 020-0007", "--json"], None);
    assert!(looked_up.status.success(), "{}", text(&looked_up.stderr));
    let history: Value = serde_json::from_slice(&looked_up.stdout).expect("JSON");
    assert_eq!(history["items"][0]["source"], "import", "{history}");
    assert_eq!(history["items"][0]["organizationId"], "*", "{history}");
}

fn lead_event(id: &str, lead: &str, phone: &str, opted_out: bool, at: &str) -> String {
    serde_json::json!({
        "type": "consentUpdate-v1",
        "id": id,
        "createdAt": at,
        "data": {"id": lead, "organizationId": "org_9", "phoneNumber": phone,
                 "globalOptedOut": opted_out}
    })
    .to_string()
}

on_both_backends!(
    a_late_opt_in_webhook_of_a_suppressed_number_is_kept_opted_out_a_later_one_is_not
);
async fn a_late_opt_in_webhook_of_a_suppressed_number_is_kept_opted_out_a_later_one_is_not(
    backend: Backend,
) {
    let Some(app) = common::spawn_app_on(backend, common::with_admin_token).await else {
        return;
    };
    let (status, report) = import(
        &app,
        "account=true",
        exported_list(&["+15559990101", "+15559990102"], &[]),
    )
    .await;
    assert_eq!(
        (status, &report["suppressed"]),
        (200, &2.into()),
        "{report}"
    );
    let imported_at = chrono::Utc::now();
    let before = (imported_at - chrono::TimeDelta::hours(1)).to_rfc3339();
    let after = (imported_at + chrono::TimeDelta::seconds(5)).to_rfc3339();

    // An opt-in the service sent before the import, delivered late: still opted out here,
    // and the opt-out queued for the service.
    let late = lead_event("evt_late", "lead_late", "+15559990101", false, &before);
    assert_eq!(app.post_signed(&late).await.status(), 200);
    app.drain().await;
    let current: Vec<(bool, String)> = app
        .rows("SELECT opted_out, source FROM consent_current WHERE organization_id = 'org_9' AND phone_number = '+15559990101'")
        .await;
    assert_eq!(current, [(true, "local".to_owned())]);
    let queued = app
        .count("SELECT COUNT(*) FROM pushes WHERE organization_id = 'org_9' AND phone_number = '+15559990101' AND opted_out")
        .await;
    assert_eq!(queued, 1);

    // The person opting in again after the import, in that organization, is an opt-in.
    let later = lead_event("evt_later", "lead_later", "+15559990102", false, &after);
    assert_eq!(app.post_signed(&later).await.status(), 200);
    app.drain().await;
    let current: Vec<(bool, String)> = app
        .rows("SELECT opted_out, source FROM consent_current WHERE organization_id = 'org_9' AND phone_number = '+15559990102'")
        .await;
    assert_eq!(current, [(false, "webhook".to_owned())]);
    app.stop().await;
}

on_both_backends!(with_account_sync_an_opt_out_suppresses_its_number_until_a_later_opt_in);
async fn with_account_sync_an_opt_out_suppresses_its_number_until_a_later_opt_in(backend: Backend) {
    let Some(app) = common::spawn_app_on(backend, |s| {
        common::with_admin_token(s);
        s.consent.account_sync = true;
    })
    .await
    else {
        return;
    };
    let suppressed = async |app: &TestApp| -> Value {
        let current: Value = app
            .admin_get("/v1/consent?phoneNumber=%2B15559990201")
            .await
            .json()
            .await
            .expect("JSON");
        current
    };
    let out = lead_event(
        "evt_out",
        "lead_a",
        "+15559990201",
        true,
        "2026-11-20T10:00:00Z",
    );
    assert_eq!(app.post_signed(&out).await.status(), 200);
    app.drain().await;
    let current = suppressed(&app).await;
    assert_eq!(current["suppressed"], true, "{current}");
    assert_eq!(
        current["suppressedSince"], "2026-11-20T10:00:00.000Z",
        "{current}"
    );

    let earlier_in = lead_event(
        "evt_in_0",
        "lead_a",
        "+15559990201",
        false,
        "2026-11-19T10:00:00Z",
    );
    assert_eq!(app.post_signed(&earlier_in).await.status(), 200);
    app.drain().await;
    assert_eq!(
        suppressed(&app).await["suppressed"],
        true,
        "an older opt-in lifts nothing"
    );
    let entries = app.count("SELECT COUNT(*) FROM ledger").await;
    assert_eq!(
        entries, 2,
        "the older opt-in is recorded, and nothing besides it"
    );

    let later_in = lead_event(
        "evt_in_1",
        "lead_a",
        "+15559990201",
        false,
        "2026-11-21T10:00:00Z",
    );
    assert_eq!(app.post_signed(&later_in).await.status(), 200);
    app.drain().await;
    assert_eq!(
        suppressed(&app).await["suppressed"],
        false,
        "a later opt-in lifts it"
    );
    app.stop().await;
}

on_both_backends!(
    a_pass_that_reads_the_service_before_an_imported_opt_out_arrives_does_not_undo_it
);
async fn a_pass_that_reads_the_service_before_an_imported_opt_out_arrives_does_not_undo_it(
    backend: Backend,
) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 10,
        organizations: 1,
        account_sync: false,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    // No service configured: the daemon's pusher stays off, so the opt-out stays queued.
    let Some(app) = common::spawn_app_on(backend, common::with_admin_token).await else {
        return;
    };
    pass(&app, &sandbox).await;
    let lead = sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .expect("an opted-in lead");
    let (status, report) = import(
        &app,
        &format!("org={}", lead.organization_id),
        exported_list(&[lead.phone_number.as_str()], &[]),
    )
    .await;
    assert_eq!((status, &report["pushes"]), (200, &1.into()), "{report}");

    let again = pass(&app, &sandbox).await;
    assert_eq!(again.repaired, 0, "{again:?}");
    let current: Vec<(bool, String)> = app
        .rows(&format!(
            "SELECT opted_out, source FROM consent_current WHERE lead_id = '{}'",
            lead.id
        ))
        .await;
    assert_eq!(current, [(true, "import".to_owned())]);
    app.stop().await;
}

/// A campaign of one organization whose number `number` an account-wide list suppressed,
/// and a lead with it created at the service afterwards (not yet mirrored): the sandbox,
/// the daemon, the organization and the lead's id.
async fn suppressed_lead(
    backend: Backend,
    number: &str,
) -> Option<(RunningSandbox, TestApp, String, String)> {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 5,
        organizations: 1,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let app = common::spawn_app_on(backend, |s| point_at(s, &sandbox)).await?;
    pass(&app, &sandbox).await;
    let (status, report) = import(&app, "account=true", exported_list(&[number], &[])).await;
    assert_eq!(status, 200, "{report}");
    let organization = sandbox.leads()[0].organization_id.clone();
    let lead = new_lead(&sandbox, &organization, number).await;
    Some((sandbox, app, organization, lead))
}

on_both_backends!(
    an_opt_in_found_after_the_suppressions_push_was_answered_is_recorded_and_lifts_it
);
/// CONTRACT: suppression. A suppressed number's new lead is opted out and pushed; the
/// service answers; the person then opts in there (its webhook lost). The next pass has
/// seen an opt-in given since: recorded, naming the push it follows, so the mirror equals
/// the service, and the suppression is lifted for that lead alone.
async fn an_opt_in_found_after_the_suppressions_push_was_answered_is_recorded_and_lifts_it(
    backend: Backend,
) {
    let number = "+15559990011";
    let Some((sandbox, app, organization, lead)) = suppressed_lead(backend, number).await else {
        return;
    };
    assert_eq!(pass(&app, &sandbox).await.suppressed, 1);
    eventually("the suppression's push answered", WAIT, async || {
        app.count("SELECT COUNT(*) FROM pushes WHERE state = 'sent'")
            .await
            == 1
    })
    .await;
    assert!(lead_at_sandbox(&sandbox, &lead).is_some_and(|l| l.global_opted_out));
    // The person opts in at the service; nobody is told.
    sandbox
        .text_start(&organization, number)
        .expect("the sandbox takes the text");
    let after = pass(&app, &sandbox).await;
    assert_eq!((after.repaired, after.suppressed), (1, 0), "{after:?}");
    let current = outreach_sync::ledger::current(&app.pool, number, Some(&organization))
        .await
        .expect("current");
    assert_eq!(
        current.iter().map(|r| r.opted_out).collect::<Vec<_>>(),
        [false],
        "the mirror equals the service: {current:?}"
    );
    let evidence = app
        .texts(&format!(
            "SELECT CAST(evidence AS TEXT) FROM ledger WHERE lead_id = '{lead}' AND source = 'reconcile' AND NOT opted_out"
        ))
        .await;
    assert_eq!(evidence.len(), 1, "the opt-in recorded once: {evidence:?}");
    let evidence: Value = serde_json::from_str(&evidence[0]).expect("evidence JSON");
    let pushed = app
        .count("SELECT seq FROM pushes WHERE state = 'sent'")
        .await;
    assert_eq!(evidence["followsPush"], pushed, "{evidence}");
    // Lifted for that lead: a pass more records nothing, suppresses nothing.
    let again = pass(&app, &sandbox).await;
    assert_eq!((again.repaired, again.suppressed), (0, 0), "{again:?}");
    app.stop().await;
}

on_both_backends!(an_opt_in_after_the_service_showed_a_suppressed_lead_opted_out_is_recorded);
/// A suppressed number's new lead, found opted out at the service by a pass (it had the
/// opt-out after the suppression), then opted in there by the person (the webhook lost): the
/// next pass records the opt-in instead of suppressing the lead again.
async fn an_opt_in_after_the_service_showed_a_suppressed_lead_opted_out_is_recorded(
    backend: Backend,
) {
    let number = "+15559990012";
    let Some((sandbox, app, organization, lead)) = suppressed_lead(backend, number).await else {
        return;
    };
    sandbox
        .text_stop(&organization, number)
        .expect("the sandbox takes the text");
    let seen = pass(&app, &sandbox).await;
    assert_eq!(
        seen.suppressed, 0,
        "opted out at the service already: {seen:?}"
    );
    sandbox
        .text_start(&organization, number)
        .expect("the sandbox takes the text");
    let after = pass(&app, &sandbox).await;
    assert_eq!((after.repaired, after.suppressed), (1, 0), "{after:?}");
    assert!(lead_at_sandbox(&sandbox, &lead).is_some_and(|l| !l.global_opted_out));
    let current = outreach_sync::ledger::current(&app.pool, number, Some(&organization))
        .await
        .expect("current");
    assert_eq!(
        current.iter().map(|r| r.opted_out).collect::<Vec<_>>(),
        [false],
        "the mirror equals the service: {current:?}"
    );
    app.stop().await;
}
