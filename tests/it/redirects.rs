//! The service client follows no redirect: an upstream that answers the token request or a
//! webhook registration with `307` to another origin gets an error naming the redirect, and
//! the other origin receives nothing (neither the client secret nor the signing secret).
//! The upstream is a scripted axum server on loopback, the other origin a capture server.
//!
//! Also home of the scripted upstream and the capture server that `output_safety` uses.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use outreach_sync::client::models::{Scope, WebhookConfig, WebhookRegistration};
use outreach_sync::client::{ClientConfig, ServiceClient};
use outreach_sync::registrations::{self, Target};
use outreach_sync::settings::Settings;
use secrecy::SecretString;

pub const CLIENT_SECRET: &str = "client-secret-never-elsewhere";
const SIGNING_SECRET: &str = "signing-secret-never-elsewhere";
const TARGET_URL: &str = "https://hooks.example.org/webhooks";

/// Serves `router` on a free loopback port; its `http://` base URL.
pub async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
    format!("http://{addr}")
}

/// Another origin that keeps whatever it is sent and answers 200 `{}`.
pub struct Capture {
    pub base_url: String,
    /// Each request received, as `METHOD URI: BODY`.
    received: Arc<Mutex<Vec<String>>>,
}

impl Capture {
    pub async fn start() -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let kept = received.clone();
        let router = Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
            let kept = kept.clone();
            async move {
                let body = String::from_utf8_lossy(&body);
                kept.lock().unwrap().push(format!("{method} {uri}: {body}"));
                axum::Json(serde_json::json!({}))
            }
        });
        Self {
            base_url: serve(router).await,
            received,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    pub fn received(&self) -> Vec<String> {
        self.received.lock().unwrap().clone()
    }
}

/// A `307 Temporary Redirect` to `location`: the status that re-sends a POST's body.
pub fn redirect_to(location: String) -> Response {
    (
        StatusCode::TEMPORARY_REDIRECT,
        [(header::LOCATION, location)],
    )
        .into_response()
}

/// The token endpoint granting a token for an hour.
pub fn token_granted() -> Router {
    Router::new().route(
        "/v3/oauth/token",
        post(|| async {
            axum::Json(serde_json::json!({
                "access_token": "upstream-token", "token_type": "Bearer", "expires_in": 3600
            }))
        }),
    )
}

/// A client of the upstream at `base_url`, with fast retries.
pub fn client_of(base_url: &str) -> ServiceClient {
    let config = ClientConfig::new(
        base_url,
        "me@example.org",
        SecretString::from(CLIENT_SECRET),
    )
    .for_tests();
    ServiceClient::new(config).expect("a client")
}

/// `registrations` as a page of `GET /v3/webhook_registrations`.
pub fn one_page(registrations: &[WebhookRegistration]) -> serde_json::Value {
    serde_json::json!({"items": registrations, "cursor": null, "hasMore": false})
}

fn target() -> Target {
    let mut settings = Settings::default();
    settings.webhook.secrets = vec![SecretString::from(SIGNING_SECRET)];
    Target::of(
        &crate::common::served(&settings, "default"),
        Some(TARGET_URL),
        &[],
    )
    .expect("a target")
}

fn assert_nothing_reached(capture: &Capture) {
    let received = capture.received();
    assert!(
        received.is_empty(),
        "the other origin was sent: {received:?}"
    );
}

/// Nothing reached the capture server, and `error` names the redirect to its `path`.
fn assert_redirect_named(capture: &Capture, error: &str, path: &str) {
    assert_nothing_reached(capture);
    let location = capture.url(path);
    assert!(
        error.contains(&format!("a redirect to `{location}`")),
        "{error}"
    );
}

#[tokio::test]
async fn a_token_request_answered_with_a_redirect_fails_naming_it_and_sends_the_secret_nowhere() {
    let capture = Capture::start().await;
    let elsewhere = capture.url("/v3/oauth/token");
    let upstream = serve(Router::new().route(
        "/v3/oauth/token",
        post(move || {
            let elsewhere = elsewhere.clone();
            async move { redirect_to(elsewhere) }
        }),
    ))
    .await;

    let error = client_of(&upstream)
        .ensure_token()
        .await
        .expect_err("no token from a redirect")
        .to_string();

    assert_redirect_named(&capture, &error, "/v3/oauth/token");
    assert!(error.contains("not followed"), "{error}");
    assert!(!error.contains(CLIENT_SECRET), "{error}");
}

#[tokio::test]
async fn a_registration_created_after_a_redirect_fails_naming_it_and_sends_the_signing_secret_nowhere()
 {
    let capture = Capture::start().await;
    let elsewhere = capture.url("/v3/webhook_registrations");
    let upstream = serve(token_granted().route(
        "/v3/webhook_registrations",
        get(|| async { axum::Json(one_page(&[])) }).post(move || {
            let elsewhere = elsewhere.clone();
            async move { redirect_to(elsewhere) }
        }),
    ))
    .await;

    let error = registrations::register(&client_of(&upstream), &target())
        .await
        .expect_err("no registration from a redirect")
        .to_string();

    assert_redirect_named(&capture, &error, "/v3/webhook_registrations");
}

#[tokio::test]
async fn a_registration_updated_after_a_redirect_fails_naming_it_and_sends_the_signing_secret_nowhere()
 {
    let capture = Capture::start().await;
    let elsewhere = capture.url("/v3/webhook_registrations/whr_1");
    // Ours, but without a secret and without opt-ins: register puts both with a PUT.
    let existing = WebhookRegistration {
        id: "whr_1".into(),
        kind: "webhook_registration".into(),
        target_url: TARGET_URL.into(),
        config: WebhookConfig::ConsentUpdate {
            scope: Scope::Account,
            include_opt_out: true,
            include_opt_in: false,
        },
        created_at: "2026-11-25T00:00:00Z".into(),
        secret_for_hmac: false,
    };
    let listed = one_page(&[existing]);
    let upstream = serve(
        token_granted()
            .route(
                "/v3/webhook_registrations",
                get(move || {
                    let listed = listed.clone();
                    async move { axum::Json(listed) }
                }),
            )
            .route(
                "/v3/webhook_registrations/whr_1",
                put(move || {
                    let elsewhere = elsewhere.clone();
                    async move { redirect_to(elsewhere) }
                }),
            ),
    )
    .await;

    let error = registrations::register(&client_of(&upstream), &target())
        .await
        .expect_err("no update through a redirect")
        .to_string();

    assert_redirect_named(&capture, &error, "/v3/webhook_registrations/whr_1");
}

#[tokio::test]
async fn a_long_or_hostile_location_is_quoted_bounded_and_escaped() {
    let capture = Capture::start().await;
    // A tab and a C1 CSI (a terminal sequence's start), which a header value may carry.
    let location = format!("{}/\t\u{9b}2J{}", capture.base_url, "x".repeat(5000));
    let upstream = serve(Router::new().route(
        "/v3/oauth/token",
        post(move || {
            let location = location.clone();
            async move { redirect_to(location) }
        }),
    ))
    .await;

    let error = client_of(&upstream)
        .ensure_token()
        .await
        .expect_err("no token from a redirect")
        .to_string();

    assert!(error.contains("\\t\\u{9b}2J"), "{error}");
    assert!(!error.contains(['\t', '\u{9b}']), "{error}");
    assert!(error.len() < 600, "{} chars: {error}", error.len());
    assert_nothing_reached(&capture);
}
