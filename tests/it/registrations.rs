//! `webhooks register`, `list`, `check` and `rotate` as a user runs them: the binary against
//! the sandbox, registering a daemon running in-process on loopback, whose status shows
//! the last check.

use std::process::Output;
use std::time::Duration;

use outreach_sync::client::ServiceClient;
use outreach_sync::client::models::{Scope, UpdateWebhookRegistration, WebhookConfig};
use outreach_sync_sandbox::wire::WebhookConfig as SandboxWebhookConfig;
use outreach_sync_sandbox::{RunningSandbox, Sandbox, SandboxConfig};
use serde_json::Value;

use crate::cli::text;
use crate::common::{self, Backend, TestApp, eventually, on_both_backends, spawn_app_on};
use crate::daemon_process::BIN;

const WAIT: Duration = Duration::from_secs(10);
const OLD: &str = "registration-old-secret";
const NEW: &str = "registration-new-secret";

async fn sandbox(activity: Option<Duration>) -> RunningSandbox {
    Sandbox::spawn(SandboxConfig {
        leads: 40,
        delivery_backoff: Duration::from_millis(5),
        activity_interval: activity,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox starts")
}

/// `outreach-sync ARGS` configured for `app`'s database, the sandbox as the service, the
/// daemon's ingest URL as `ingest.public_url` (unless `public_url` is false) and `secrets`.
async fn outreach_sync(
    app: &TestApp,
    sandbox: &RunningSandbox,
    secrets: &str,
    public_url: bool,
    args: &[&str],
) -> Output {
    let config = app.dir.path().join("cli-config.toml");
    std::fs::write(&config, "").expect("config file");
    let mut command = tokio::process::Command::new(BIN);
    command.arg("--config").arg(&config).args(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("OUTREACH_SYNC__") {
            command.env_remove(name);
        }
    }
    command
        .env("OUTREACH_SYNC__DATABASE__URL", &app.settings.database.url)
        .env("OUTREACH_SYNC__WEBHOOK__SECRETS", secrets)
        .env("OUTREACH_SYNC__SERVICE__BASE_URL", sandbox.base_url())
        .env(
            "OUTREACH_SYNC__SERVICE__CLIENT_ID",
            &sandbox.config().client_id,
        )
        .env(
            "OUTREACH_SYNC__SERVICE__CLIENT_SECRET",
            &sandbox.config().client_secret,
        );
    if public_url {
        command.env("OUTREACH_SYNC__INGEST__PUBLIC_URL", app.url("/webhooks"));
    }
    command.output().await.expect("the command runs")
}

fn said(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// The last registration check as `GET /v1/status` shows it.
async fn status_check(app: &TestApp) -> Value {
    let status: Value = app
        .admin_get("/v1/status")
        .await
        .json()
        .await
        .expect("JSON");
    status["registrationCheck"].clone()
}

async fn registration_ok_metric(app: &TestApp) -> Option<String> {
    let text = crate::common::metrics_text(&app.http, app.admin_url("/metrics")).await;
    crate::common::series_value(&text, "outreach_sync_registration_ok")
}

// Multi-threaded: the commands run as child processes while the sandbox and the daemon
// answer them in this process.
on_both_backends!(
    registering_twice_changes_nothing_and_a_broken_registration_fails_the_check,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn registering_twice_changes_nothing_and_a_broken_registration_fails_the_check(
    backend: Backend,
) {
    let sandbox = sandbox(None).await;
    let Some(app) = spawn_app_on(backend, common::with_admin_token).await else {
        return;
    };
    let run = async |args: &[&str]| outreach_sync(&app, &sandbox, common::SECRET, true, args).await;

    let out = outreach_sync(
        &app,
        &sandbox,
        common::SECRET,
        false,
        &["webhooks", "register"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        text(&out.stderr).contains("ingest.public_url"),
        "{}",
        said(&out)
    );

    let out = run(&["webhooks", "register", "--dry-run"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(text(&out.stdout).contains("dry run"), "{}", said(&out));
    assert!(
        sandbox.truth().registrations.is_empty(),
        "a dry run changes nothing"
    );
    assert_eq!(status_check(&app).await, Value::Null, "never checked yet");
    assert_eq!(registration_ok_metric(&app).await, None);

    let out = run(&["webhooks", "register"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.matches("created").count(), 2, "{stdout}");
    assert_eq!(
        stdout.matches("willPassValidation true").count(),
        2,
        "{stdout}"
    );
    assert!(stdout.contains("account_id = \"acct_sandbox\""), "{stdout}");
    let first = sandbox.truth().registrations;
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|r| r.target_url == app.url("/webhooks")
        && r.secret_for_hmac
        && r.config.scope() == &outreach_sync_sandbox::wire::Scope::Account));
    assert!(
        first
            .iter()
            .any(|r| r.config == SandboxWebhookConfig::all_consent())
    );

    let out = run(&["webhooks", "register"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.matches("unchanged").count(), 2, "{stdout}");
    assert!(!stdout.contains("created"), "{stdout}");
    assert_eq!(
        sandbox.truth().registrations,
        first,
        "no duplicate, nothing changed"
    );

    sandbox
        .register_webhook(
            "http://127.0.0.1:9/elsewhere",
            "x",
            SandboxWebhookConfig::all_messages(),
        )
        .expect("another tool's registration");
    let out = run(&["webhooks", "list", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let listed: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let items = listed["items"].as_array().expect("items");
    assert_eq!(items.len(), 3, "{listed}");
    let ours: Vec<&Value> = items.iter().filter(|i| i["ours"] == true).collect();
    assert_eq!(ours.len(), 2, "{listed}");
    let consent = ours
        .iter()
        .find(|i| i["configType"] == "consentUpdate-v1")
        .expect("the consent registration");
    assert_eq!(consent["includeOptOut"], true);
    assert_eq!(consent["includeOptIn"], true);
    assert_eq!(consent["scope"]["type"], "account");

    let out = run(&["webhooks", "check"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(status_check(&app).await["ok"], true);
    assert_eq!(registration_ok_metric(&app).await.as_deref(), Some("1"));

    // Someone turns opt-ins off at the service.
    let client = ServiceClient::new(common::client_config(&sandbox)).expect("client");
    let consent_id = consent["id"].as_str().expect("id");
    client
        .update_webhook_registration(
            consent_id,
            &UpdateWebhookRegistration {
                config: Some(WebhookConfig::ConsentUpdate {
                    scope: Scope::Account,
                    include_opt_out: true,
                    include_opt_in: false,
                }),
                ..UpdateWebhookRegistration::default()
            },
        )
        .await
        .expect("the registration is changed");
    let out = run(&["webhooks", "check"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let problem = format!("the consentUpdate-v1 registration {consent_id}: includeOptIn is false");
    assert!(text(&out.stdout).contains(&problem), "{}", said(&out));
    let check = status_check(&app).await;
    assert_eq!(check["ok"], false, "{check}");
    assert_eq!(check["problems"][0], problem.as_str(), "{check}");
    assert_eq!(registration_ok_metric(&app).await.as_deref(), Some("0"));
    let out = run(&["status"]).await;
    assert!(text(&out.stdout).contains(&problem), "{}", said(&out));

    // register puts it right, in place.
    let out = run(&["webhooks", "register"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(
        text(&out.stdout).contains("updated (includeOptIn is false)"),
        "{}",
        said(&out)
    );
    let now = sandbox.truth().registrations;
    assert_eq!(now.len(), 3, "updated in place, not added: {now:?}");
    let fixed = now
        .iter()
        .find(|r| r.id == consent_id)
        .expect("the same registration");
    assert_eq!(fixed.config, SandboxWebhookConfig::all_consent());
    assert_eq!(status_check(&app).await["ok"], true);

    // A check that cannot ask the service fails, and says so where the last one shows.
    sandbox.fail_next(&[404]);
    let out = run(&["webhooks", "check"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    let check = status_check(&app).await;
    assert_eq!(check["ok"], false, "{check}");
    let problem = check["problems"][0].as_str().expect("a problem");
    assert!(
        problem.starts_with("the service could not be asked: service answered 404"),
        "{check}"
    );
    assert_eq!(registration_ok_metric(&app).await.as_deref(), Some("0"));
    app.stop().await;
    sandbox.shutdown().await;
}

/// Deliveries in the outbox that verified with the configured secret at `index`, mock
/// events aside.
async fn verified_with(app: &TestApp, index: i64) -> i64 {
    app.count(&format!(
        "SELECT COUNT(*) FROM outbox WHERE secret_index = {index}
         AND CAST(body AS TEXT) NOT LIKE '%lead_mock%'"
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_the_secret_while_the_service_delivers_refuses_no_delivery() {
    let sandbox = sandbox(Some(Duration::from_millis(10))).await;
    // Reloaded already with the new secret first and the old one after it.
    let app = common::spawn_app(|settings| {
        settings.webhook.secrets = vec![NEW.into(), OLD.into()];
    })
    .await;
    let out = outreach_sync(&app, &sandbox, OLD, true, &["webhooks", "register"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    eventually("deliveries signed with the old secret", WAIT, async || {
        verified_with(&app, 1).await > 0
    })
    .await;

    let both = format!("{NEW},{OLD}");
    let out = outreach_sync(&app, &sandbox, &both, true, &["webhooks", "rotate"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(
        text(&out.stdout).matches("willPassValidation true").count(),
        2,
        "{}",
        said(&out)
    );
    eventually("deliveries signed with the new secret", WAIT, async || {
        verified_with(&app, 0).await > 0
    })
    .await;
    sandbox.stop_activity();
    assert!(sandbox.settle(WAIT).await, "deliveries settle");

    let counts = sandbox.delivery_counts();
    assert!(counts.delivered > 0, "{counts:?}");
    assert_eq!(
        (counts.failed_attempts, counts.gave_up),
        (0, 0),
        "no delivery refused: {counts:?}"
    );
    let out = outreach_sync(&app, &sandbox, &both, true, &["webhooks", "check"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    app.stop().await;
    sandbox.shutdown().await;
}
