//! Webhook deliveries from the sandbox to a real receiver on loopback: the envelope, the
//! signature (checked with the daemon's own Verifier), scope, retries and injected faults.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use outreach_sync::client::ServiceClient;
use outreach_sync::client::models::{self as client_models, MockEvent};
use outreach_sync::settings::{Scheme, WebhookSettings};
use outreach_sync::signature::Verifier;
use outreach_sync_sandbox::wire::{Lead, MessageType, Scope, WebhookConfig};
use outreach_sync_sandbox::{
    DELIVERY_RECORDS_KEPT, DeliverTo, DeliveryFaults, Outcome, RunningSandbox, Sandbox,
    SandboxConfig, Signing,
};
use secrecy::SecretString;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const SECRET: &str = "receiver-secret";
const WAIT: Duration = Duration::from_secs(10);

struct Receiver {
    url: String,
    rx: mpsc::UnboundedReceiver<(HeaderMap, Bytes)>,
}

#[derive(Clone)]
struct Behaviour {
    tx: mpsc::UnboundedSender<(HeaderMap, Bytes)>,
    /// Answer 500 to this many deliveries first.
    failures: Arc<AtomicU32>,
    confirm: Option<(&'static str, String)>,
}

async fn receive(State(b): State<Behaviour>, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let failing = b
        .failures
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    let _ = b.tx.send((headers, body));
    let mut response = if failing {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    }
    .into_response();
    if let Some((name, value)) = &b.confirm {
        response
            .headers_mut()
            .insert(*name, value.parse().expect("header value"));
    }
    response
}

async fn receiver(failures: u32, confirm: Option<(&'static str, String)>) -> Receiver {
    let (tx, rx) = mpsc::unbounded_channel();
    let behaviour = Behaviour {
        tx,
        failures: Arc::new(AtomicU32::new(failures)),
        confirm,
    };
    let app = Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(behaviour);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Receiver { url, rx }
}

impl Receiver {
    async fn next(&mut self) -> (HeaderMap, Bytes) {
        tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .expect("a delivery in time")
            .expect("open")
    }

    /// Everything delivered so far, once the sandbox has nothing pending.
    async fn drain(&mut self, sandbox: &RunningSandbox) -> Vec<(HeaderMap, Bytes)> {
        assert!(sandbox.settle(WAIT).await, "deliveries settle");
        let mut all = Vec::new();
        while let Ok(item) = self.rx.try_recv() {
            all.push(item);
        }
        all
    }
}

fn verifier(scheme: Scheme, secret: &str) -> Verifier {
    Verifier::new(&WebhookSettings {
        scheme,
        secrets: vec![SecretString::from(secret.to_owned())],
        ..WebhookSettings::default()
    })
}

fn json_of(body: &Bytes) -> Value {
    serde_json::from_slice(body).expect("JSON body")
}

async fn sandbox_with(config: SandboxConfig) -> RunningSandbox {
    Sandbox::spawn(SandboxConfig {
        delivery_backoff: Duration::from_millis(5),
        ..config
    })
    .await
    .expect("sandbox starts")
}

fn seeded(leads: usize) -> SandboxConfig {
    SandboxConfig {
        leads,
        ..SandboxConfig::default()
    }
}

fn reachable(sandbox: &RunningSandbox) -> Lead {
    sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .expect("an opted-in lead")
}

#[tokio::test]
async fn a_stop_is_delivered_as_a_signed_consent_update_with_the_full_lead() {
    let mut receiver = receiver(0, None).await;
    let sandbox = sandbox_with(seeded(6)).await;
    sandbox
        .register_webhook(&receiver.url, SECRET, WebhookConfig::all_consent())
        .unwrap();
    let lead = reachable(&sandbox);
    let changed = sandbox
        .text_stop(&lead.organization_id, &lead.phone_number)
        .unwrap();
    let (headers, body) = receiver.next().await;
    verifier(Scheme::Hmac, SECRET)
        .verify(&headers, &body, chrono::Utc::now().timestamp())
        .expect("the signature verifies");
    assert!(
        verifier(Scheme::Hmac, "other")
            .verify(&headers, &body, 0)
            .is_err()
    );
    let event = json_of(&body);
    let keys: Vec<&str> = event
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 4, "{event}");
    assert_eq!(event["type"], "consentUpdate-v1");
    assert!(event["id"].as_str().unwrap().starts_with("evt_"));
    chrono::DateTime::parse_from_rfc3339(event["createdAt"].as_str().unwrap()).expect("RFC 3339");
    let delivered: client_models::Lead = serde_json::from_value(event["data"].clone()).unwrap();
    assert!(delivered.global_opted_out);
    assert_eq!(
        crate::common::as_client::<client_models::Lead>(&changed[0]),
        delivered,
        "data is the whole Lead after the change"
    );
    assert!(String::from_utf8_lossy(&body).starts_with(r#"{"type":"consentUpdate-v1","id":"evt_"#));
    sandbox.shutdown().await;
}

#[tokio::test]
async fn an_account_synced_opt_out_sends_one_event_per_lead_changed() {
    let mut receiver = receiver(0, None).await;
    let sandbox = sandbox_with(seeded(2)).await;
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    let orgs = sandbox.truth().organizations;
    let mut ids = Vec::new();
    for org in &orgs {
        let lead = client
            .upsert_lead(&client_models::UpsertLead {
                phone_number: "+15550123456".into(),
                organization_id: org.id.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        ids.push(lead.into_lead().id);
    }
    sandbox
        .register_webhook(&receiver.url, SECRET, WebhookConfig::all_consent())
        .unwrap();
    client.opt_out(&ids[0], None).await.unwrap();
    let events = receiver.drain(&sandbox).await;
    let mut leads: Vec<String> = events
        .iter()
        .map(|(_, b)| json_of(b)["data"]["id"].as_str().unwrap().to_owned())
        .collect();
    leads.sort();
    assert_eq!(leads, ids);
    let event_ids: std::collections::HashSet<String> = events
        .iter()
        .map(|(_, b)| json_of(b)["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        event_ids.len(),
        2,
        "one event per lead, each with its own id"
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn message_status_changes_are_delivered_with_lead_and_organization() {
    let mut receiver = receiver(0, None).await;
    let sandbox = sandbox_with(seeded(4)).await;
    sandbox
        .register_webhook(&receiver.url, SECRET, WebhookConfig::all_messages())
        .unwrap();
    let lead = reachable(&sandbox);
    let message = sandbox.send_message(&lead.id, MessageType::SMS).unwrap();
    for _ in 0..3 {
        sandbox.advance_messages(&[]);
    }
    let events = receiver.drain(&sandbox).await;
    let final_status = sandbox.messages()[0].status.clone();
    let statuses: Vec<String> = events
        .iter()
        .map(|(_, b)| json_of(b)["data"]["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        statuses.first().map(String::as_str),
        Some(message.status.as_str())
    );
    assert_eq!(statuses.last(), Some(&final_status));
    let data = &json_of(&events[0].1)["data"];
    assert_eq!(json_of(&events[0].1)["type"], "messageStatus-v1");
    for field in ["id", "threadId", "status", "type", "createdAt"] {
        assert!(data[field].is_string(), "{field} in {data}");
    }
    assert_eq!(data["leadId"], json!(lead.id));
    assert_eq!(data["organizationId"], json!(lead.organization_id));
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_failing_target_is_retried_until_it_accepts() {
    let mut receiver = receiver(2, None).await;
    let sandbox = sandbox_with(seeded(4)).await;
    sandbox
        .register_webhook(&receiver.url, SECRET, WebhookConfig::all_consent())
        .unwrap();
    let lead = reachable(&sandbox);
    sandbox
        .text_stop(&lead.organization_id, &lead.phone_number)
        .unwrap();
    let events = receiver.drain(&sandbox).await;
    assert_eq!(events.len(), 3);
    assert!(
        events.windows(2).all(|w| w[0].1 == w[1].1),
        "the same bytes each time"
    );
    let outcomes: Vec<(u32, Outcome)> = sandbox
        .deliveries()
        .iter()
        .map(|r| (r.attempt, r.outcome))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (1, Outcome::Failed),
            (2, Outcome::Failed),
            (3, Outcome::Delivered)
        ]
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn dropped_events_never_arrive_and_duplicated_ones_arrive_twice() {
    let mut receiver = receiver(0, None).await;
    let sandbox = sandbox_with(SandboxConfig {
        delivery_faults: DeliveryFaults {
            drop_rate: 1.0,
            ..DeliveryFaults::default()
        },
        ..seeded(6)
    })
    .await;
    sandbox
        .register_webhook(&receiver.url, SECRET, WebhookConfig::all_consent())
        .unwrap();
    let lead = reachable(&sandbox);
    sandbox
        .text_stop(&lead.organization_id, &lead.phone_number)
        .unwrap();
    assert!(receiver.drain(&sandbox).await.is_empty());
    assert!(
        sandbox
            .deliveries()
            .iter()
            .all(|r| r.outcome == Outcome::Dropped)
    );

    sandbox.set_delivery_faults(DeliveryFaults {
        duplicate_rate: 1.0,
        ..DeliveryFaults::default()
    });
    sandbox
        .text_start(&lead.organization_id, &lead.phone_number)
        .unwrap();
    let events = receiver.drain(&sandbox).await;
    assert_eq!(events.len() % 2, 0);
    assert!(!events.is_empty());
    assert_eq!(events[0].1, events[1].1, "a duplicate is the same delivery");
    sandbox.shutdown().await;
}

#[tokio::test]
async fn reordering_delivers_every_event_but_not_in_the_order_they_happened() {
    let mut receiver = receiver(0, None).await;
    let sandbox = sandbox_with(SandboxConfig {
        delivery_faults: DeliveryFaults {
            reorder: true,
            max_delay_ms: 5,
            ..DeliveryFaults::default()
        },
        ..seeded(60)
    })
    .await;
    sandbox
        .register_webhook(&receiver.url, SECRET, WebhookConfig::all_messages())
        .unwrap();
    let leads: Vec<_> = sandbox
        .leads()
        .into_iter()
        .filter(|l| !l.global_opted_out)
        .take(20)
        .collect();
    let sent: Vec<String> = leads
        .iter()
        .map(|l| sandbox.send_message(&l.id, MessageType::SMS).unwrap().id)
        .collect();
    let events = receiver.drain(&sandbox).await;
    let received: Vec<String> = events
        .iter()
        .map(|(_, b)| json_of(b)["data"]["id"].as_str().unwrap().to_owned())
        .collect();
    let mut sorted = received.clone();
    sorted.sort();
    assert_eq!(sorted, sent);
    assert_ne!(received, sent);
    sandbox.shutdown().await;
}

#[tokio::test]
async fn only_events_in_scope_and_of_the_chosen_direction_are_delivered() {
    let mut receiver = receiver(0, None).await;
    let sandbox = sandbox_with(SandboxConfig {
        account_sync: false,
        ..seeded(10)
    })
    .await;
    let orgs = sandbox.truth().organizations;
    sandbox
        .register_webhook(
            &receiver.url,
            SECRET,
            WebhookConfig::ConsentUpdate {
                scope: Scope::Organizations {
                    organization_ids: vec![orgs[0].id.clone()],
                },
                include_opt_out: true,
                include_opt_in: false,
            },
        )
        .unwrap();
    let leads = sandbox.leads();
    let in_scope = leads
        .iter()
        .find(|l| l.organization_id == orgs[0].id && !l.global_opted_out)
        .unwrap();
    let out_of_scope = leads
        .iter()
        .find(|l| l.organization_id == orgs[1].id && !l.global_opted_out)
        .unwrap();
    sandbox
        .text_stop(&out_of_scope.organization_id, &out_of_scope.phone_number)
        .unwrap();
    sandbox
        .text_stop(&in_scope.organization_id, &in_scope.phone_number)
        .unwrap();
    sandbox
        .text_start(&in_scope.organization_id, &in_scope.phone_number)
        .unwrap();
    let events = receiver.drain(&sandbox).await;
    assert_eq!(events.len(), 1);
    let data = &json_of(&events[0].1)["data"];
    assert_eq!(data["id"], json!(in_scope.id));
    assert_eq!(data["globalOptedOut"], json!(true));
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_mock_event_passes_validation_only_when_the_target_confirms_ownership() {
    let confirming = receiver(0, Some(("x-confirm-account", "acct_sandbox".into()))).await;
    let silent = receiver(0, None).await;
    let sandbox = sandbox_with(SandboxConfig {
        confirmation_header: Some("x-confirm-account".into()),
        ..seeded(1)
    })
    .await;
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    for (target, expected) in [(&confirming, true), (&silent, false)] {
        let outcome = client
            .mock_event(&MockEvent::MockWebhookRegistration {
                target_url: target.url.clone(),
                secret_for_hmac: SecretString::from(SECRET),
                config: client_models::WebhookConfig::all_messages(),
            })
            .await
            .unwrap();
        assert_eq!(outcome.will_pass_validation, expected, "{}", target.url);
        assert_eq!(outcome.account_id, "acct_sandbox");
    }
    sandbox.shutdown().await;
}

#[tokio::test]
async fn the_signature_format_is_configurable() {
    let mut receiver = receiver(0, None).await;
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let sandbox = sandbox_with(SandboxConfig {
        signing: Signing::StandardWebhooks,
        ..seeded(4)
    })
    .await;
    sandbox
        .register_webhook(&receiver.url, secret, WebhookConfig::all_consent())
        .unwrap();
    let lead = reachable(&sandbox);
    sandbox
        .text_stop(&lead.organization_id, &lead.phone_number)
        .unwrap();
    let (headers, body) = receiver.next().await;
    let verified = verifier(Scheme::StandardWebhooks, secret)
        .verify(&headers, &body, chrono::Utc::now().timestamp())
        .expect("verifies as Standard Webhooks");
    assert_eq!(
        verified.webhook_id.as_deref(),
        json_of(&body)["id"].as_str()
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn deliver_to_registers_both_event_kinds_for_the_account_at_start() {
    let mut receiver = receiver(0, None).await;
    let sandbox = sandbox_with(SandboxConfig {
        deliver_to: Some(DeliverTo {
            url: receiver.url.clone(),
            secret: SECRET.into(),
        }),
        ..seeded(4)
    })
    .await;
    let registrations = sandbox.truth().registrations;
    assert_eq!(registrations.len(), 2);
    assert!(
        registrations
            .iter()
            .all(|r| r.config.scope() == &Scope::Account && r.secret_for_hmac)
    );
    let lead = reachable(&sandbox);
    sandbox.send_message(&lead.id, MessageType::MMS).unwrap();
    sandbox
        .text_stop(&lead.organization_id, &lead.phone_number)
        .unwrap();
    let kinds: std::collections::BTreeSet<String> = receiver
        .drain(&sandbox)
        .await
        .iter()
        .map(|(_, b)| json_of(b)["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        vec!["consentUpdate-v1", "messageStatus-v1"]
    );
    sandbox.shutdown().await;
}

/// Flips `lead`'s consent `times` times; returns how many consent changes that made (account
/// sync may change other leads with the number too).
fn flip_consent(sandbox: &RunningSandbox, lead: &Lead, times: usize) -> u64 {
    let mut changed = 0;
    for n in 0..times {
        let leads = if n % 2 == 0 {
            sandbox.text_stop(&lead.organization_id, &lead.phone_number)
        } else {
            sandbox.text_start(&lead.organization_id, &lead.phone_number)
        };
        changed += leads.expect("the lead answers").len() as u64;
    }
    changed
}

#[tokio::test]
async fn every_event_is_counted_once_as_dropped_delivered_waiting_or_given_up() {
    let mut receiver = receiver(3, None).await;
    let sandbox = sandbox_with(SandboxConfig {
        delivery_faults: DeliveryFaults {
            drop_rate: 0.3,
            duplicate_rate: 0.3,
            reorder: true,
            max_delay_ms: 20,
        },
        ..seeded(6)
    })
    .await;
    sandbox
        .register_webhook(&receiver.url, SECRET, WebhookConfig::all_consent())
        .unwrap();
    let events = flip_consent(&sandbox, &reachable(&sandbox), 40);
    let requests = receiver.drain(&sandbox).await;

    let counts = sandbox.delivery_counts();
    assert_eq!(counts.events, events);
    assert!(counts.dropped > 0 && counts.duplicated > 0, "{counts:?}");
    assert_eq!(
        counts.dropped + counts.delivered + counts.gave_up + counts.waiting,
        counts.events,
        "{counts:?}"
    );
    assert_eq!((counts.waiting, counts.gave_up), (0, 0), "{counts:?}");
    assert_eq!(
        counts.attempts,
        requests.len() as u64,
        "every attempt is a request"
    );
    assert_eq!(counts.failed_attempts, 3, "the receiver refused three");
    let arrived: std::collections::HashSet<String> = requests
        .iter()
        .map(|(_, body)| json_of(body)["id"].as_str().expect("id").to_owned())
        .collect();
    assert_eq!(
        counts.delivered,
        arrived.len() as u64,
        "delivered counts events, not copies"
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn the_delivery_records_keep_a_bounded_window_while_the_counters_keep_counting() {
    let sandbox = sandbox_with(SandboxConfig {
        delivery_faults: DeliveryFaults {
            drop_rate: 1.0,
            ..DeliveryFaults::default()
        },
        ..seeded(4)
    })
    .await;
    sandbox
        .register_webhook(
            "http://127.0.0.1:9/never",
            SECRET,
            WebhookConfig::all_consent(),
        )
        .unwrap();
    let lead = reachable(&sandbox);
    let mut events = flip_consent(&sandbox, &lead, 1);
    assert!(sandbox.settle(WAIT).await);
    let first = sandbox.deliveries()[0].event_id.clone();

    events += flip_consent(&sandbox, &lead, DELIVERY_RECORDS_KEPT + 500);
    assert!(sandbox.settle(WAIT).await);

    let records = sandbox.deliveries();
    assert_eq!(records.len(), DELIVERY_RECORDS_KEPT);
    assert!(
        records.iter().all(|r| r.event_id != first),
        "the oldest records are forgotten"
    );
    let counts = sandbox.delivery_counts();
    assert_eq!((counts.events, counts.dropped), (events, events));
    assert!(events > DELIVERY_RECORDS_KEPT as u64);
    sandbox.shutdown().await;
}
