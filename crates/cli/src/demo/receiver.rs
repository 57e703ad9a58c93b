//! The demo's subscriber: a stand-in for the campaign's CRM, on loopback, that checks each
//! request's Standard Webhooks signature and notes the opt-outs it is told of, so the view
//! can show consent reaching another tool as it changes.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use secrecy::SecretString;

use outreach_sync::settings::{Scheme, WebhookSettings};
use outreach_sync::signature::Verifier;

/// What the demo's subscriber has received so far.
#[derive(Debug, Clone, Default)]
pub(super) struct Received {
    pub entries: u64,
    pub opt_outs: u64,
    /// Requests whose signature did not check out (never expected).
    pub unverified: u64,
    /// The latest opt-out: number, organization, source, and how long after it was recorded
    /// it arrived.
    pub latest_opt_out: Option<(String, String, String, i64)>,
    /// The numbers of the opt-outs a source read back or was posted (VAN, Action Network,
    /// Twilio), by source.
    pub read_back: Vec<(String, String)>,
}

struct Shared {
    verifier: Verifier,
    received: Mutex<Received>,
}

/// The running subscriber.
#[derive(Clone)]
pub(super) struct DemoSubscriber {
    pub url: String,
    shared: Arc<Shared>,
}

impl DemoSubscriber {
    /// Serves on a free loopback port until the process ends, verifying with `secret`.
    pub async fn start(secret: &str) -> anyhow::Result<Self> {
        let webhook = WebhookSettings {
            scheme: Scheme::StandardWebhooks,
            secrets: vec![SecretString::from(secret.to_owned())],
            ..WebhookSettings::default()
        };
        let shared = Arc::new(Shared {
            verifier: Verifier::new(&webhook),
            received: Mutex::new(Received::default()),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/consent", listener.local_addr()?);
        let router = axum::Router::new()
            .route("/consent", axum::routing::post(receive))
            .with_state(shared.clone());
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                tracing::warn!(%error, "the demo's subscriber stopped");
            }
        });
        Ok(Self { url, shared })
    }

    pub fn received(&self) -> Received {
        self.shared
            .received
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

async fn receive(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let now = Utc::now();
    let verified = shared
        .verifier
        .verify(&headers, &body, now.timestamp())
        .is_ok();
    let mut received = shared
        .received
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !verified {
        received.unverified += 1;
        return StatusCode::UNAUTHORIZED;
    }
    let Ok(message) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let items = message["data"]["items"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for entry in &items {
        received.entries += 1;
        if entry["optedOut"] != true {
            continue;
        }
        received.opt_outs += 1;
        let text = |field: &str| entry[field].as_str().unwrap_or_default().to_owned();
        let after_ms = DateTime::parse_from_rfc3339(&text("recordedAt"))
            .map(|at| (now - at.with_timezone(&Utc)).num_milliseconds())
            .unwrap_or_default();
        if matches!(
            entry["source"].as_str(),
            Some("van" | "action_network" | "twilio")
        ) {
            received
                .read_back
                .push((text("phoneNumber"), text("source")));
        }
        received.latest_opt_out = Some((
            text("phoneNumber"),
            text("organizationId"),
            text("source"),
            after_ms,
        ));
    }
    StatusCode::OK
}
