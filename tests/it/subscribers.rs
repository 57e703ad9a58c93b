//! Subscribers: every consent ledger entry pushed to each configured tool, signed, in seq
//! order, at least once, whatever the subscriber does; and the live stream.

use std::time::Duration;

use outreach_sync::settings::{Settings, SubscriberSettings};
use serde_json::Value;

use outreach_sync::sender::Attempt;

use crate::common::{
    Backend, TestApp, consent_event, eventually, on_both_backends, spawn_app, spawn_app_on,
    with_admin_token,
};
use crate::receiver::{Receiver, Reply, SUBSCRIBER_SECRET};

mod steer;

const PATIENCE: Duration = Duration::from_secs(20);

fn subscribe(settings: &mut Settings, name: &str, url: &str) {
    with_admin_token(settings);
    settings
        .subscriber
        .push(SubscriberSettings::new(name, url, SUBSCRIBER_SECRET));
}

/// Posts `n` opt-outs of distinct numbers; returns the ledger's seqs, in order.
async fn opt_outs(app: &TestApp, from: usize, n: usize) -> Vec<i64> {
    for i in from..from + n {
        let phone = format!("+1555000{i:04}");
        let response = app
            .post_signed(&consent_event(&format!("evt_{i}"), &phone, true))
            .await;
        assert_eq!(response.status(), 200);
    }
    app.drain().await;
    app.rows::<(i64,)>("SELECT seq FROM ledger ORDER BY seq")
        .await
        .into_iter()
        .map(|(seq,)| seq)
        .collect()
}

async fn subscriber_view(app: &TestApp, name: &str) -> Value {
    let list: Value = app
        .admin_get("/v1/subscribers")
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
        .expect("the subscriber is listed")
}

/// Polls the subscriber's view until `done` holds of it: for a wait the daemon's own
/// schedule decides (a settle would try at once).
async fn wait_for_view(app: &TestApp, name: &str, done: impl Fn(&Value) -> bool) -> Value {
    eventually(
        format!("the view of {name} to get there"),
        PATIENCE,
        async || {
            let view = subscriber_view(app, name).await;
            done(&view).then_some(view)
        },
    )
    .await
}

async fn every_entry_reaches_a_subscriber_in_order_signed_and_in_batches(backend: Backend) {
    let receiver = Receiver::start([]).await;
    let url = receiver.url();
    let Some(app) = spawn_app_on(backend, |s| {
        subscribe(s, "crm", &url);
        s.subscriber[0].batch = 40;
    })
    .await
    else {
        return;
    };
    let seqs = opt_outs(&app, 0, 100).await;
    assert_eq!(seqs.len(), 100);
    receiver.wait_for_seqs(PATIENCE, &seqs).await;

    let received = receiver.received();
    assert!(
        received.iter().all(|r| r.verified),
        "every signature checks out"
    );
    assert!(received.iter().all(|r| r.seqs.len() <= 40));
    for r in &received {
        assert_eq!(r.body["type"], "consent.changed");
        let (first, last) = (r.seqs[0], r.seqs[r.seqs.len() - 1]);
        assert_eq!(r.webhook_id, format!("crm-{first}-{last}"));
        let entry = &r.body["data"]["items"][0];
        assert_eq!(entry["optedOut"], true);
        assert_eq!(entry["source"], "webhook");
        assert_eq!(entry["organizationId"], "org_1");
    }
    app.settle().await;
    let view = subscriber_view(&app, "crm").await;
    assert_eq!(view["cursor"], seqs[99]);
    assert_eq!(view["lagEntries"], 0);
    assert_eq!(view["state"], "active");
    assert!(view["lastSuccessAt"].is_string());
    let status: Value = app
        .admin_get("/v1/status")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(status["subscribers"][0]["name"], "crm");
    let metrics = app
        .http
        .get(app.admin_url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(metrics.contains("outreach_sync_subscriber_lag_entries{subscriber=\"crm\"} 0"));
    assert!(metrics.contains(
        "outreach_sync_subscriber_requests_total{subscriber=\"crm\",outcome=\"delivered\"}"
    ));
    app.stop().await;
}
on_both_backends!(every_entry_reaches_a_subscriber_in_order_signed_and_in_batches);

#[tokio::test]
async fn a_subscriber_only_gets_its_organizations_and_sources() {
    let receiver = Receiver::start([]).await;
    let url = receiver.url();
    let app = spawn_app(|s| {
        subscribe(s, "org2-local", &url);
        s.subscriber[0].scope.organizations = vec!["org_2".into()];
        s.subscriber[0].feed.sources = vec![outreach_sync::model::Source::Local];
    })
    .await;
    opt_outs(&app, 0, 3).await;
    let recorded = app
        .admin_post(
            "/v1/consent",
            &serde_json::json!({"phoneNumber": "+15550009999", "organizationId": "org_2",
                                "optedOut": true, "reason": "asked by phone"}),
        )
        .await;
    assert_eq!(recorded.status(), 202);
    receiver.wait_for_seqs(PATIENCE, &[4]).await;
    let entry = &receiver.received()[0].body["data"]["items"][0];
    assert_eq!(entry["source"], "local");
    assert_eq!(entry["phoneNumber"], "+15550009999");
    // The cursor passed over the three entries it does not take.
    app.settle().await;
    let view = subscriber_view(&app, "org2-local").await;
    assert_eq!(view["cursor"], 4, "{view}");
    assert_eq!(view["lagEntries"], 0, "{view}");
    app.stop().await;
}

async fn a_subscriber_down_for_a_while_gets_everything_in_order_once_back(backend: Backend) {
    // A port nobody listens on yet.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let url = format!("http://{addr}/hooks");
    let Some(app) = spawn_app_on(backend, |s| subscribe(s, "crm", &url)).await else {
        return;
    };
    let seqs = opt_outs(&app, 0, 5).await;
    let settled = app.settle().await;
    assert!(
        matches!(settled[0].1, Attempt::Failed { .. }),
        "{settled:?}"
    );
    let view = subscriber_view(&app, "crm").await;
    assert_eq!(view["state"], "retrying");
    assert!(
        view["lastError"]
            .as_str()
            .is_some_and(|e| e.starts_with("no answer")),
        "{view}"
    );
    assert_eq!(view["cursor"], 0);
    assert_eq!(view["lagEntries"], 5);
    let more = opt_outs(&app, 5, 5).await;
    assert_eq!(more.len(), 10);
    let receiver = Receiver::start_on(addr, []).await;
    // Back: the sender tries at once rather than at the end of its backoff.
    app.settle().await;
    receiver.wait_for_seqs(PATIENCE, &more).await;
    assert_eq!(&more[..5], &seqs[..]);
    let view = subscriber_view(&app, "crm").await;
    assert_eq!(view["state"], "active");
    assert!(view["lastError"].is_null(), "{view}");
    app.stop().await;
}
on_both_backends!(a_subscriber_down_for_a_while_gets_everything_in_order_once_back);

#[tokio::test]
async fn server_errors_are_retried_with_a_growing_backoff_until_accepted() {
    let receiver = Receiver::start([Reply::Status(500), Reply::Status(503)]).await;
    let url = receiver.url();
    let app = spawn_app(|s| subscribe(s, "crm", &url)).await;
    let seqs = opt_outs(&app, 0, 3).await;
    receiver.wait_for_seqs(PATIENCE, &seqs).await;
    let received = receiver.received();
    assert_eq!(received.len(), 3, "two failures, then the success");
    assert!(
        received.iter().all(|r| r.seqs[0] == 1),
        "each retry starts at the cursor"
    );
    let first_wait = received[1].at - received[0].at;
    let second_wait = received[2].at - received[1].at;
    assert!(first_wait >= Duration::from_millis(950), "{first_wait:?}");
    assert!(
        second_wait >= Duration::from_millis(1550),
        "{second_wait:?}"
    );
    assert!(second_wait < Duration::from_secs(10), "{second_wait:?}");
    app.stop().await;
}

#[tokio::test]
async fn a_429_is_retried_after_the_subscribers_retry_after() {
    let receiver = Receiver::start([Reply::TooManyRequests(3)]).await;
    let url = receiver.url();
    let app = spawn_app(|s| subscribe(s, "crm", &url)).await;
    let seqs = opt_outs(&app, 0, 2).await;
    let view = wait_for_view(&app, "crm", |v| v["state"] == "retrying").await;
    assert!(
        view["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("429")),
        "{view}"
    );
    assert!(view["nextAttemptAt"].is_string());
    receiver.wait_for_seqs(PATIENCE, &seqs).await;
    let received = receiver.received();
    let waited = received[1].at - received[0].at;
    // Backoff alone would have come back after about a second.
    assert!(waited >= Duration::from_millis(2900), "{waited:?}");
    app.stop().await;
}

#[tokio::test]
async fn a_410_disables_the_subscriber_until_a_replay() {
    let receiver = Receiver::start([Reply::Status(410)]).await;
    let url = receiver.url();
    let app = spawn_app(|s| subscribe(s, "crm", &url)).await;
    let seqs = opt_outs(&app, 0, 3).await;
    app.settle().await;
    let view = subscriber_view(&app, "crm").await;
    assert_eq!(view["state"], "disabled");
    assert!(
        view["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("410"))
    );
    opt_outs(&app, 3, 1).await;
    // Nothing more is sent while disabled, even when asked to try at once.
    let settled = app.settle().await;
    assert!(matches!(settled[0].1, Attempt::Waiting(_)), "{settled:?}");
    assert_eq!(receiver.received().len(), 1);

    let replayed = app
        .admin_post(
            "/v1/subscribers/crm/replay",
            &serde_json::json!({"fromSeq": 1}),
        )
        .await;
    assert_eq!(replayed.status(), 200);
    let replayed: Value = replayed.json().await.expect("json");
    assert_eq!(replayed["state"], "active");
    assert_eq!(replayed["cursor"], 0);
    let mut all = seqs.clone();
    all.push(4);
    receiver.wait_for_seqs(PATIENCE, &all).await;
    app.stop().await;
}

#[tokio::test]
async fn replay_sends_entries_again_and_refuses_what_it_cannot_do() {
    let receiver = Receiver::start([]).await;
    let url = receiver.url();
    let app = spawn_app(|s| subscribe(s, "crm", &url)).await;
    let seqs = opt_outs(&app, 0, 4).await;
    app.settle().await;
    receiver.wait_for_seqs(PATIENCE, &seqs).await;
    assert_eq!(subscriber_view(&app, "crm").await["cursor"], 4);

    let replay = |body: Value, name: &'static str| {
        let app = &app;
        async move {
            app.admin_post(&format!("/v1/subscribers/{name}/replay"), &body)
                .await
        }
    };
    let unknown = replay(serde_json::json!({"fromSeq": 1}), "nobody").await;
    assert_eq!(unknown.status(), 404);
    let forward = replay(serde_json::json!({"fromSeq": 9}), "crm").await;
    assert_eq!(forward.status(), 400);
    let error: Value = forward.json().await.expect("json");
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("only rewinds"))
    );
    assert_eq!(
        replay(serde_json::json!({"fromSeq": 0}), "crm")
            .await
            .status(),
        400
    );
    assert_eq!(
        replay(serde_json::json!({"from": 1}), "crm").await.status(),
        400
    );

    let rewound = replay(serde_json::json!({"fromSeq": 3}), "crm").await;
    assert_eq!(rewound.status(), 200);
    receiver
        .wait_for(PATIENCE, |r| {
            r.iter().filter(|r| r.seqs.contains(&3)).count() == 2
        })
        .await;
    let last = receiver.received().pop().expect("a request");
    assert_eq!(last.seqs, vec![3, 4]);
    assert_eq!(last.webhook_id, "crm-3-4");
    app.stop().await;
}

#[tokio::test]
async fn a_dead_or_slow_subscriber_does_not_delay_another() {
    let slow = Receiver::start([Reply::Hang]).await;
    let healthy = Receiver::start([]).await;
    let (slow_url, healthy_url) = (slow.url(), healthy.url());
    let app = spawn_app(|s| {
        subscribe(s, "slow", &slow_url);
        subscribe(s, "dead", "http://127.0.0.1:9/hooks");
        subscribe(s, "healthy", &healthy_url);
    })
    .await;
    let seqs = opt_outs(&app, 0, 5).await;
    healthy.wait_for_seqs(Duration::from_secs(5), &seqs).await;
    let more = opt_outs(&app, 5, 5).await;
    healthy.wait_for_seqs(Duration::from_secs(5), &more).await;
    assert_eq!(
        slow.received().len(),
        1,
        "the slow one is still on its first request"
    );
    wait_for_view(&app, "dead", |v| v["state"] == "retrying").await;
    app.stop().await;
}

#[tokio::test]
async fn a_restart_mid_delivery_resends_from_the_durable_cursor() {
    let receiver = Receiver::start([Reply::Ok, Reply::Hang]).await;
    let url = receiver.url();
    let app = spawn_app(|s| {
        subscribe(s, "crm", &url);
        s.subscriber[0].batch = 3;
    })
    .await;
    let seqs = opt_outs(&app, 0, 6).await;
    // The first batch is accepted; the second is in flight when the daemon stops.
    receiver.wait_for(PATIENCE, |r| r.len() == 2).await;
    let app = app.restart().await;
    let more = opt_outs(&app, 6, 2).await;
    assert_eq!(&more[..6], &seqs[..]);
    receiver.wait_for_seqs(PATIENCE, &more).await;
    // The entries in flight at the stop were sent again after the restart.
    let received = receiver.received();
    assert!(matches!(received[1].reply, Reply::Hang));
    let in_flight = received[1].seqs[0];
    assert_eq!(received[2].seqs[0], in_flight, "{received:?}");
    app.stop().await;
}

#[test]
fn subscriber_settings_are_checked_and_their_secrets_never_shown() {
    let dir = tempfile::tempdir().expect("dir");
    let base = crate::common::test_settings(dir.path());
    let invalid = |change: &dyn Fn(&mut SubscriberSettings)| {
        let mut settings = base.clone();
        let mut subscriber =
            SubscriberSettings::new("crm", "https://crm.example.org/h", SUBSCRIBER_SECRET);
        change(&mut subscriber);
        settings.subscriber.push(subscriber);
        settings.validate().err().map(|e| e.to_string())
    };
    assert_eq!(invalid(&|_| {}), None);
    let bad_name = invalid(&|s| s.name = "CRM!".into()).expect("refused");
    assert!(bad_name.contains("subscriber.name"), "{bad_name}");
    let bad_secret = invalid(&|s| s.secret = Some("plain".to_owned().into())).expect("refused");
    assert!(
        bad_secret.contains("subscriber.secret") && !bad_secret.contains("plain"),
        "{bad_secret}"
    );
    let bad_url = invalid(&|s| s.url = "ftp://x".into()).expect("refused");
    assert!(bad_url.contains("subscriber.url"), "{bad_url}");
    let bad_batch = invalid(&|s| s.batch = 0).expect("refused");
    assert!(bad_batch.contains("subscriber.batch"), "{bad_batch}");

    let mut twice = base.clone();
    for _ in 0..2 {
        twice.subscriber.push(SubscriberSettings::new(
            "crm",
            "https://x.example.org/",
            SUBSCRIBER_SECRET,
        ));
    }
    let duplicate = twice.validate().expect_err("refused").to_string();
    assert!(duplicate.contains("twice"), "{duplicate}");

    let mut shown = base.clone();
    shown.subscriber.push(SubscriberSettings::new(
        "crm",
        "https://x.example.org/",
        SUBSCRIBER_SECRET,
    ));
    let text = shown.redacted_toml();
    assert!(
        text.contains("[[subscriber]]") && text.contains("[redacted]"),
        "{text}"
    );
    assert!(!text.contains(SUBSCRIBER_SECRET));
    assert!(!format!("{shown:?}").contains(SUBSCRIBER_SECRET));
}
