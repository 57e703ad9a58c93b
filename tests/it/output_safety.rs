//! What comes from the service or from a user reaches terminals, logs, error messages and
//! spreadsheets only in a safe form: `webhooks list` ends on a cursor that goes round and
//! shows control characters as escapes, an oversized answer is refused, ids with control
//! characters are refused at the admin API and the CLI, a service error with a line break
//! stays on its log line, an exported id cannot run as a formula, and error messages quote
//! what they were given only up to a bound.

use std::process::Output;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Query;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use outreach_sync::client::models::{
    ListOrganizations, ListWebhookRegistrations, Paging, Scope, WebhookConfig, WebhookRegistration,
};
use outreach_sync::client::{ClientConfig, ServiceClient};
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::common::{ADMIN_TOKEN, spawn_app, with_admin_token, within};
use crate::daemon_process::{Daemon, command};
use crate::redirects::{one_page, serve, token_granted};

/// Longest a command may take before it is taken to loop for ever.
const COMMAND_WITHIN: Duration = Duration::from_secs(30);
/// Longest wait for the daemon's pusher to try and log.
const PUSH_WITHIN: Duration = Duration::from_secs(20);

/// The environment pointing the CLI or the daemon at the upstream at `base_url`.
fn service_env(base_url: &str) -> Vec<(String, String)> {
    [
        ("OUTREACH_SYNC__SERVICE__BASE_URL", base_url),
        ("OUTREACH_SYNC__SERVICE__CLIENT_ID", "me@example.org"),
        (
            "OUTREACH_SYNC__SERVICE__CLIENT_SECRET",
            "upstream-client-secret",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// `outreach-sync ARGS` with its files in `dir`; `None` when it has not ended within
/// [`COMMAND_WITHIN`] (it is killed).
async fn run(dir: &std::path::Path, args: &[&str], env: &[(String, String)]) -> Option<Output> {
    let mut command = tokio::process::Command::from(command(dir, args, env));
    command.kill_on_drop(true);
    tokio::time::timeout(COMMAND_WITHIN, command.output())
        .await
        .ok()
        .map(|output| output.expect("the command runs"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn registration(id: &str, target_url: &str) -> WebhookRegistration {
    WebhookRegistration {
        id: id.into(),
        kind: "webhook_registration".into(),
        target_url: target_url.into(),
        config: WebhookConfig::MessageStatus {
            scope: Scope::Account,
        },
        created_at: "2026-11-25T00:00:00Z".into(),
        secret_for_hmac: true,
    }
}

#[derive(serde::Deserialize)]
struct CursorQuery {
    cursor: Option<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_list_ends_with_an_error_naming_the_cycle_when_the_cursors_go_round() {
    // First page -> cur_A -> cur_B -> cur_A -> ...
    let upstream = serve(token_granted().route(
        "/v3/webhook_registrations",
        get(|Query(query): Query<CursorQuery>| async move {
            let (id, next) = match query.cursor.as_deref() {
                None => ("whr_1", "cur_A"),
                Some("cur_A") => ("whr_2", "cur_B"),
                Some(_) => ("whr_3", "cur_A"),
            };
            axum::Json(json!({
                "items": [registration(id, "https://hooks.example.org/webhooks")],
                "cursor": next,
                "hasMore": true,
            }))
        }),
    ))
    .await;
    let dir = tempfile::tempdir().expect("dir");

    let output = run(dir.path(), &["webhooks", "list"], &service_env(&upstream))
        .await
        .expect("webhooks list ends");

    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("goes round in a circle") && stderr.contains("`cur_A`"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconciliation_pass_ends_naming_the_cycle_when_the_leads_cursors_go_round() {
    // First page -> cur_A -> cur_B -> cur_A -> ...: a pass would page for ever.
    let upstream = serve(token_granted().route(
        "/v3/leads",
        get(|Query(query): Query<CursorQuery>| async move {
            let next = match query.cursor.as_deref() {
                None | Some("cur_B") => "cur_A",
                Some(_) => "cur_B",
            };
            axum::Json(json!({"items": [], "cursor": next, "hasMore": true}))
        }),
    ))
    .await;
    let dir = tempfile::tempdir().expect("dir");

    let output = run(
        dir.path(),
        &["reconcile", "--leads", "--org", "org_1"],
        &service_env(&upstream),
    )
    .await
    .expect("the pass ends");

    let said = format!("{}{}", text(&output.stdout), text(&output.stderr));
    assert!(
        said.contains("goes round in a circle") && said.contains("`cur_A`"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_list_shows_control_characters_from_the_service_as_escapes() {
    let hostile = [registration(
        "whr_\u{1b}[31mred",
        "https://hooks.example.org/\r\u{1b}[2Kwebhooks\u{202e}",
    )];
    let upstream = serve(token_granted().route(
        "/v3/webhook_registrations",
        get(move || async move { axum::Json(one_page(&hostile)) }),
    ))
    .await;
    let dir = tempfile::tempdir().expect("dir");

    let output = run(dir.path(), &["webhooks", "list"], &service_env(&upstream))
        .await
        .expect("webhooks list ends");

    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    assert!(
        !stdout.contains(['\u{1b}', '\r', '\u{202e}']),
        "raw control characters: {stdout:?}"
    );
    assert!(stdout.contains("whr_\\u{1b}[31mred"), "{stdout}");
    assert!(
        stdout.contains("https://hooks.example.org/\\r\\u{1b}[2Kwebhooks\\u{202e}"),
        "{stdout}"
    );
}

#[tokio::test]
async fn an_answer_larger_than_the_cap_is_refused_whether_or_not_it_says_its_length() {
    const CAP: usize = 64 * 1024;
    // A valid page padded past the cap: read whole, it would decode.
    let padded = || {
        let pad = "x".repeat(CAP);
        format!(r#"{{"items":[],"cursor":null,"hasMore":false,"pad":"{pad}"}}"#)
    };
    let upstream = serve(
        token_granted()
            // Chunked, no Content-Length: the size shows only as it arrives.
            .route(
                "/v3/webhook_registrations",
                get(move || async move {
                    let chunks: Vec<Result<String, std::io::Error>> = padded()
                        .as_bytes()
                        .chunks(4096)
                        .map(|c| Ok(String::from_utf8_lossy(c).into_owned()))
                        .collect();
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        Body::from_stream(futures::stream::iter(chunks)),
                    )
                }),
            )
            // With its Content-Length.
            .route(
                "/v3/organizations",
                get(
                    move || async move { ([(header::CONTENT_TYPE, "application/json")], padded()) },
                ),
            ),
    )
    .await;
    let mut config = ClientConfig::new(
        upstream,
        "me@example.org",
        SecretString::from("client-secret"),
    )
    .for_tests();
    config.max_answer_bytes = CAP;
    let client = ServiceClient::new(config).expect("a client");

    let chunked = client
        .webhook_registrations_page(&ListWebhookRegistrations::default(), &Paging::default())
        .await
        .expect_err("an answer past the cap is refused")
        .to_string();
    let declared = client
        .organizations_page(&ListOrganizations::default(), &Paging::default())
        .await
        .expect_err("an answer past the cap is refused")
        .to_string();

    for error in [chunked, declared] {
        assert!(
            error.contains(&format!("larger than {CAP} bytes")),
            "{error}"
        );
    }
}

#[tokio::test]
async fn an_id_with_a_control_character_is_refused_by_the_admin_api_with_a_json_400() {
    let app = spawn_app(with_admin_token).await;
    let forged = "org_1\n2026-11-26T00:00:00Z  INFO forged line\u{1b}[2K";
    let change = |organization: &str, tag: Option<&str>| {
        json!({
            "phoneNumber": "+15550001111", "organizationId": organization, "optedOut": true,
            "tagId": tag,
        })
    };

    let mut refused = vec![
        app.admin_post("/v1/consent", &change(forged, None)).await,
        app.admin_post("/v1/consent", &change("org_1", Some("tag\r1")))
            .await,
        app.admin_post(
            "/v1/consent/lookup",
            &json!({"phoneNumbers": ["+15550001111"], "organizationId": forged}),
        )
        .await,
    ];
    for path in [
        "/v1/consent?phoneNumber=%2B15550001111&organizationId=org%0A1",
        "/v1/leads?phoneNumber=%2B15550001111&organizationId=org%1B1",
        "/v1/leads/lead%0A1",
        "/v1/messages/msg%1B1",
    ] {
        refused.push(app.admin_get(path).await);
    }

    for response in refused {
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let body: Value = response.json().await.expect("a JSON error");
        assert_eq!(body["code"], 400);
        let message = body["message"].as_str().expect("a message");
        assert!(
            message.contains("control character") && message.contains("Id"),
            "{message}"
        );
        assert!(!message.contains(['\n', '\r', '\u{1b}']), "{message:?}");
    }
    assert_eq!(app.count("SELECT COUNT(*) FROM consent_ledger").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opt_out_refuses_an_org_with_a_control_character() {
    let dir = tempfile::tempdir().expect("dir");

    let output = run(
        dir.path(),
        &["opt-out", "+15550001111", "--org", "org_1\u{1b}[2J"],
        &[],
    )
    .await
    .expect("opt-out ends");

    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("control character"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[tokio::test]
async fn admin_errors_quote_what_they_were_given_only_up_to_a_bound() {
    let app = spawn_app(with_admin_token).await;
    let long = "x".repeat(5000);

    let responses = [
        app.admin_get(&format!("/v1/leads/{long}")).await,
        app.admin_get(&format!("/v1/messages/{long}")).await,
        app.admin_post("/v1/consent", &json!({ long.clone(): true }))
            .await,
        app.admin_post("/v1/consent/lookup", &json!({"phoneNumbers": long}))
            .await,
    ];

    for response in responses {
        assert!(response.status().is_client_error(), "{response:?}");
        let body: Value = response.json().await.expect("a JSON error");
        let message = body["message"].as_str().expect("a message");
        assert!(
            message.chars().count() < 400,
            "{} chars: {message}",
            message.len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_id_that_a_spreadsheet_would_run_starts_with_a_quote_and_a_number_stays_a_number()
 {
    let app = spawn_app(|_| {}).await;
    let formula = r#"=HYPERLINK("http://evil.example/","click")"#;
    let event = json!({
        "type": "consentUpdate-v1", "id": "evt_formula", "createdAt": "2026-11-21T10:00:00Z",
        "data": {"organizationId": formula, "phoneNumber": "+15550001111", "globalOptedOut": true}
    })
    .to_string();
    assert_eq!(app.post_signed(&event).await.status(), StatusCode::OK);
    app.drain().await;

    let output = run(
        app.dir.path(),
        &["export", "ledger", "--format", "csv"],
        &[(
            "OUTREACH_SYNC__DATABASE__URL".into(),
            app.settings.database.url.clone(),
        )],
    )
    .await
    .expect("export ends");

    let csv = text(&output.stdout);
    assert!(output.status.success(), "{csv}{}", text(&output.stderr));
    let row = csv.lines().nth(1).expect("one entry");
    assert!(
        row.starts_with(
            r#"1,"'=HYPERLINK(""http://evil.example/"",""click"")",,+15550001111,true,"#
        ),
        "{row}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_error_with_a_line_break_stays_on_the_pushers_log_line() {
    const FORGED: &str = "2026-11-26T00:00:00.000000Z  INFO outreach_sync: all opt-outs honoured";
    let lead = json!({
        "id": "lead_1", "type": "lead", "phoneNumber": "+15550001111", "organizationId": "org_1",
        "activeGroupIds": [], "inactiveGroupIds": [], "customFields": {}, "tagIds": [],
        "globalOptedOut": false, "createdAt": "2026-11-25T00:00:00Z",
    });
    let upstream = serve(
        token_granted()
            .route(
                "/v3/leads",
                get(move || {
                    let lead = lead.clone();
                    async move { axum::Json(json!({"items": [lead], "cursor": null, "hasMore": false})) }
                })
                .patch(|| async {
                    let message = format!("lead refused\n{FORGED}\u{1b}[2K");
                    (
                        StatusCode::BAD_REQUEST,
                        axum::Json(json!({"code": 400, "message": message})),
                    )
                        .into_response()
                }),
            ),
    )
    .await;
    let dir = tempfile::tempdir().expect("dir");
    let mut env = service_env(&upstream);
    env.push(("OUTREACH_SYNC__ADMIN__TOKENS".into(), ADMIN_TOKEN.into()));
    env.push(("OUTREACH_SYNC__LOG__FORMAT".into(), "text".into()));
    let daemon = Daemon::start(dir.path(), "pusher-log", &env).await;

    let change = reqwest::Client::new()
        .post(daemon.admin_url("/v1/consent"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"phoneNumber": "+15550001111", "organizationId": "org_1", "optedOut": true}))
        .send()
        .await
        .expect("admin request");
    assert_eq!(change.status(), StatusCode::ACCEPTED);
    let logged = within(PUSH_WITHIN, async || {
        daemon
            .logs()
            .contains("local consent change refused by the service")
    })
    .await;

    let logs = daemon.logs();
    assert!(logged.is_some(), "the refusal is logged: {logs}");
    assert!(
        !logs.lines().any(|line| line.starts_with(FORGED)),
        "a forged line: {logs}"
    );
    assert!(!logs.contains('\u{1b}'), "an escape sequence: {logs:?}");
    assert!(logs.contains("lead refused\\n2026-11-26"), "{logs}");
}
