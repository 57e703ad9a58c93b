//! The worker through the real database: semantics of consent and message status, quarantine
//! and replay, crash safety, and order independence (property tests).

use crate::common;

use std::sync::Arc;

use outreach_sync::ledger;
use outreach_sync::outbox::OutboxState;
use outreach_sync::settings::Settings;
use outreach_sync::worker::{Requeue, Worker};
use serde_json::{Value, json};
use sqlx::SqlitePool;

/// A migrated database in a temp dir, with the worker over it.
struct Store {
    pool: SqlitePool,
    worker: Worker,
    _dir: tempfile::TempDir,
}

async fn store(account_sync: bool) -> Store {
    let dir = tempfile::tempdir().unwrap();
    let mut settings: Settings = common::test_settings(dir.path());
    settings.database.synchronous = outreach_sync::settings::Synchronous::Normal;
    let pool = outreach_sync::store::pool(&settings).await.unwrap();
    outreach_sync::store::migrate(&pool).await.unwrap();
    let worker = Worker::new(pool.clone(), Arc::new(OutboxState::default()), account_sync);
    Store {
        pool,
        worker,
        _dir: dir,
    }
}

impl Store {
    /// Adds deliveries to the outbox as the ingest writer does (duplicates keep one row).
    async fn deliver(&self, bodies: &[Value]) {
        let mut tx = self.pool.begin().await.unwrap();
        for body in bodies {
            let key = format!("event:{}", body["id"].as_str().unwrap());
            sqlx::query(
                "INSERT INTO outbox (dedup_key, received_at, body, headers, secret_index)
                 VALUES (?, '2026-11-21T12:00:00.000Z', ?, '{}', 0) ON CONFLICT DO NOTHING",
            )
            .bind(key)
            .bind(body.to_string().into_bytes())
            .execute(&mut *tx)
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();
    }

    async fn apply(&self, bodies: &[Value]) {
        self.deliver(bodies).await;
        self.worker.drain().await.unwrap();
    }

    async fn consent(&self, phone: &str) -> Vec<(String, bool, String)> {
        ledger::current(&self.pool, phone, None)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.organization_id, r.opted_out, r.changed_at.to_string()))
            .collect()
    }

    async fn message(&self, id: &str) -> (String, Option<String>) {
        sqlx::query_as("SELECT status, error_code FROM messages WHERE id = ?")
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    async fn outbox_states(&self) -> Vec<(String, i64)> {
        sqlx::query_as("SELECT state, COUNT(*) FROM outbox GROUP BY state ORDER BY state")
            .fetch_all(&self.pool)
            .await
            .unwrap()
    }
}

pub(crate) fn consent(id: &str, org: &str, phone: &str, opted_out: bool, minute: u32) -> Value {
    json!({"type": "consentUpdate-v1", "id": id, "createdAt": format!("2026-11-21T10:{minute:02}:00Z"),
           "data": {"organizationId": org, "phoneNumber": phone, "globalOptedOut": opted_out}})
}

pub(crate) fn status(id: &str, message: &str, status: &str, minute: u32) -> Value {
    let error = matches!(status, "failed" | "undelivered").then_some("carrier_30007");
    json!({"type": "messageStatus-v1", "id": id, "createdAt": format!("2026-11-21T10:{minute:02}:00Z"),
           "data": {"id": message, "threadId": "th_1", "status": status, "type": "SMS",
                    "createdAt": "2026-11-21T09:59:00Z", "errorCode": error, "leadId": "lead_1", "organizationId": "o1"}})
}

pub(crate) fn lead(id: &str, org: &str, phone: &str, first_name: &str, minute: u32) -> Value {
    json!({"type": "consentUpdate-v1", "id": format!("evt_{id}_{minute}"), "createdAt": format!("2026-11-21T10:{minute:02}:00Z"),
           "data": {"id": id, "type": "lead", "organizationId": org, "phoneNumber": phone, "activeGroupIds": ["g1"],
                    "inactiveGroupIds": [], "customFields": {"district": "7"}, "tagIds": ["t1"], "firstName": first_name,
                    "globalOptedOut": false, "createdAt": "2026-01-01T00:00:00Z"}})
}

#[tokio::test]
async fn an_acknowledged_delivery_is_already_in_the_ledger() {
    let app = common::spawn_app(|_| {}).await;
    let response = app
        .post_signed(&common::consent_event("evt_live", "+15550002222", true))
        .await;
    assert_eq!(response.status(), 200);
    // Nothing was waiting for the worker: the commit that stored it applied it.
    let items = ledger::current(&app.pool, "+15550002222", None)
        .await
        .unwrap();
    assert_eq!(items.len(), 1, "{items:?}");
    assert!(items[0].opted_out);
    assert_eq!(items[0].source, "webhook");
    app.stop().await;
}

#[tokio::test]
async fn an_older_event_never_overwrites_a_newer_state_but_still_enters_the_ledger() {
    let s = store(false).await;
    s.apply(&[consent("evt_new", "o1", "+15550000555", true, 30)])
        .await;
    s.apply(&[consent("evt_old", "o1", "+15550000555", false, 10)])
        .await;

    assert_eq!(
        s.consent("+15550000555").await,
        vec![("o1".into(), true, "2026-11-21T10:30:00.000Z".into())]
    );
    let history = ledger::history(&s.pool, "+15550000555", None)
        .await
        .unwrap();
    let seen: Vec<(&str, bool, bool)> = history
        .iter()
        .map(|e| (e.event_ref.as_str(), e.opted_out, e.superseded))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("event:evt_new", true, false),
            ("event:evt_old", false, true)
        ]
    );
}

#[tokio::test]
async fn opt_out_wins_a_tie_whatever_the_order() {
    for order in [[0, 1], [1, 0]] {
        let s = store(false).await;
        let events = [
            consent("evt_in", "o1", "+15550000555", false, 5),
            consent("evt_out", "o1", "+15550000555", true, 5),
        ];
        for i in order {
            s.apply(&[events[i].clone()]).await;
        }
        assert!(s.consent("+15550000555").await[0].1, "order {order:?}");
    }
}

#[tokio::test]
async fn with_account_sync_one_event_changes_every_mirrored_lead_with_the_number() {
    for account_sync in [false, true] {
        let s = store(account_sync).await;
        s.apply(&[
            lead("lead_a", "o1", "+15550000555", "Ada", 1),
            lead("lead_b", "o2", "+15550000555", "Ada", 1),
        ])
        .await;
        s.apply(&[consent("evt_stop", "o1", "+15550000555", true, 5)])
            .await;

        let opted_out: Vec<(String, bool)> =
            sqlx::query_as(
            "SELECT id, opted_out FROM leads JOIN consent_state USING (organization_id, phone_number) ORDER BY id",
        )
                .fetch_all(&s.pool)
                .await
                .unwrap();
        assert_eq!(
            opted_out,
            vec![("lead_a".into(), true), ("lead_b".into(), account_sync)]
        );
        let entries = ledger::history(&s.pool, "+15550000555", None)
            .await
            .unwrap();
        let stop_entries = entries
            .iter()
            .filter(|e| e.event_ref == "event:evt_stop")
            .count();
        assert_eq!(stop_entries, if account_sync { 2 } else { 1 });
    }
}

#[tokio::test]
async fn a_full_lead_resource_fills_the_mirror_and_an_older_one_does_not_overwrite_it() {
    let s = store(false).await;
    s.apply(&[lead("lead_a", "o1", "+15550000555", "Newer", 20)])
        .await;
    s.apply(&[lead("lead_a", "o1", "+15550000555", "Older", 10)])
        .await;
    let (first_name, groups, fields, tags): (String, String, String, String) =
        sqlx::query_as("SELECT first_name, active_group_ids, custom_fields, tag_ids FROM leads WHERE id = 'lead_a'")
            .fetch_one(&s.pool)
            .await
            .unwrap();
    assert_eq!(first_name, "Newer");
    assert_eq!(
        (groups.as_str(), fields.as_str(), tags.as_str()),
        (r#"["g1"]"#, r#"{"district":"7"}"#, r#"["t1"]"#)
    );
    let record = &ledger::current(&s.pool, "+15550000555", None)
        .await
        .unwrap()[0];
    assert_eq!(record.lead_id.as_deref(), Some("lead_a"));
}

#[tokio::test]
async fn a_terminal_status_never_returns_to_a_non_terminal_one_and_the_later_terminal_wins() {
    let s = store(false).await;
    s.apply(&[
        status("e1", "m1", "sent", 10),
        status("e2", "m1", "queued", 20),
    ])
    .await;
    assert_eq!(s.message("m1").await.0, "sent");
    s.apply(&[
        status("e3", "m1", "failed", 30),
        status("e4", "m1", "delivered", 25),
    ])
    .await;
    assert_eq!(
        s.message("m1").await,
        ("failed".into(), Some("carrier_30007".into()))
    );
    s.apply(&[
        status("e5", "m2", "queued", 10),
        status("e6", "m2", "pending_lookup", 5),
    ])
    .await;
    assert_eq!(s.message("m2").await.0, "queued");
}

#[tokio::test]
async fn an_unparseable_delivery_is_quarantined_with_its_reason_and_blocks_nothing_behind_it() {
    let s = store(false).await;
    s.apply(&[
        json!({"type": "consentUpdate-v2", "id": "evt_future", "data": {}}),
        consent("evt_after", "o1", "+15550000555", true, 5),
    ])
    .await;
    assert_eq!(
        s.outbox_states().await,
        vec![("applied".into(), 1), ("quarantined".into(), 1)]
    );
    let quarantined = ledger::events(&s.pool, true, 10).await.unwrap();
    assert_eq!(quarantined[0].dedup_key, "event:evt_future");
    assert!(
        quarantined[0]
            .last_error
            .as_deref()
            .unwrap()
            .contains("unknown event type")
    );
    assert!(s.consent("+15550000555").await[0].1);
}

#[tokio::test]
async fn a_quarantined_event_about_an_unknown_lead_applies_on_replay_once_the_lead_is_known() {
    let s = store(false).await;
    let by_id = json!({"type": "consentUpdate-v1", "id": "evt_by_id", "createdAt": "2026-11-21T10:30:00Z",
                       "data": {"id": "lead_a", "globalOptedOut": true}});
    s.apply(&[by_id]).await;
    assert_eq!(s.outbox_states().await, vec![("quarantined".into(), 1)]);

    s.apply(&[lead("lead_a", "o1", "+15550000555", "Ada", 10)])
        .await;
    outreach_sync::worker::requeue(&s.pool, Requeue::Quarantined)
        .await
        .unwrap();
    let outcome = s.worker.drain().await.unwrap();

    assert_eq!((outcome.applied, outcome.quarantined), (1, 0));
    assert_eq!(
        s.consent("+15550000555").await,
        vec![("o1".into(), true, "2026-11-21T10:30:00.000Z".into())]
    );
}

#[tokio::test]
async fn replaying_an_applied_delivery_changes_nothing() {
    let s = store(false).await;
    s.apply(&[consent("evt_1", "o1", "+15550000555", true, 5)])
        .await;
    outreach_sync::worker::requeue(&s.pool, Requeue::Id(1))
        .await
        .unwrap();
    s.worker.drain().await.unwrap();
    assert_eq!(
        ledger::history(&s.pool, "+15550000555", None)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_batch_mixing_a_replayed_delivery_and_new_ones_links_each_state_to_its_own_entry() {
    let s = store(false).await;
    s.apply(&[consent("evt_1", "o1", "+15550000555", true, 5)])
        .await;
    outreach_sync::worker::requeue(&s.pool, Requeue::Id(1))
        .await
        .unwrap();
    s.deliver(&[
        consent("evt_2", "o1", "+15550000666", true, 6),
        consent("evt_3", "o1", "+15550000777", false, 7),
    ])
    .await;

    let outcome = s.worker.drain().await.unwrap();

    assert_eq!(outcome.applied, 3);
    // Each current state points at the ledger entry of the event that set it.
    let links: Vec<(String, String, bool)> = sqlx::query_as(
        "SELECT s.phone_number, l.event_ref, l.opted_out
         FROM consent_state AS s JOIN ledger AS l ON l.seq = s.seq ORDER BY s.phone_number",
    )
    .fetch_all(&s.pool)
    .await
    .unwrap();
    assert_eq!(
        links,
        vec![
            ("+15550000555".into(), "event:evt_1".into(), true),
            ("+15550000666".into(), "event:evt_2".into(), true),
            ("+15550000777".into(), "event:evt_3".into(), false),
        ]
    );
    let entries: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM ledger")
        .fetch_one(&s.pool)
        .await
        .unwrap();
    assert_eq!(entries, 3, "the replayed event is not written again");
}

#[tokio::test]
async fn a_worker_aborted_mid_batch_and_restarted_applies_nothing_twice() {
    let s = store(false).await;
    let events: Vec<Value> = (0..3000)
        .map(|i| {
            consent(
                &format!("evt_{i}"),
                &format!("o{}", i % 3),
                &format!("+1555000{:04}", i % 700),
                i % 3 == 0,
                i % 60,
            )
        })
        .collect();
    s.deliver(&events).await;
    // Aborted 0.5 to 20.5 ms after it starts, mid-batch.
    let mut moments = common::Moments::new(
        7,
        std::time::Duration::from_micros(500),
        std::time::Duration::from_millis(20),
    );
    for _ in 0..15 {
        let worker = s.worker.clone();
        let task = tokio::spawn(async move { worker.drain().await });
        moments.next().await;
        task.abort();
        let _ = task.await;
    }
    s.worker.drain().await.unwrap();

    assert_eq!(s.outbox_states().await, vec![("applied".into(), 3000)]);
    let (entries, distinct): (i64, i64) =
        sqlx::query_as("SELECT COUNT(*), COUNT(DISTINCT event_ref) FROM ledger")
            .fetch_one(&s.pool)
            .await
            .unwrap();
    assert_eq!((entries, distinct), (3000, 3000));
    let baseline = store(false).await;
    let mut sorted = events.clone();
    sorted.sort_by_key(|e| e["createdAt"].as_str().unwrap().to_owned());
    baseline.apply(&sorted).await;
    for phone in ["+15550000000", "+15550000001", "+15550000699"] {
        assert_eq!(
            s.consent(phone).await,
            baseline.consent(phone).await,
            "{phone}"
        );
    }
}

mod order_independence {
    use super::*;
    use proptest::prelude::*;

    fn arb_event() -> impl Strategy<Value = (bool, u8, u8, bool, u8, u8)> {
        // (is consent, which org/message, which phone, opted out, minute, status)
        (any::<bool>(), 0u8..2, 0u8..3, any::<bool>(), 0u8..4, 0u8..6)
    }

    const STATUSES: [&str; 6] = [
        "pending_lookup",
        "queued",
        "sent",
        "delivered",
        "failed",
        "undelivered",
    ];

    fn to_body(i: usize, e: &(bool, u8, u8, bool, u8, u8)) -> Value {
        let (is_consent, which, phone, opted_out, minute, st) = *e;
        if is_consent {
            consent(
                &format!("evt_{i}"),
                &format!("o{which}"),
                &format!("+1555000{phone:04}"),
                opted_out,
                minute.into(),
            )
        } else {
            status(
                &format!("evt_{i}"),
                &format!("m{which}"),
                STATUSES[st as usize],
                minute.into(),
            )
        }
    }

    type Snapshot = (
        Vec<(String, String, bool, String)>,
        Vec<(String, String, Option<String>, String)>,
        Vec<(String, String, String, bool)>,
    );

    async fn snapshot(pool: &SqlitePool) -> Snapshot {
        let consent = sqlx::query_as("SELECT organization_id, phone_number, opted_out, changed_at FROM consent_current ORDER BY 1, 2")
            .fetch_all(pool).await.unwrap();
        let messages =
            sqlx::query_as("SELECT id, status, error_code, status_at FROM messages ORDER BY id")
                .fetch_all(pool)
                .await
                .unwrap();
        let ledger = sqlx::query_as("SELECT event_ref, organization_id, phone_number, opted_out FROM consent_ledger ORDER BY 1, 2, 3")
            .fetch_all(pool).await.unwrap();
        (consent, messages, ledger)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn any_order_and_duplication_ends_in_the_state_of_applying_once_in_time_order(
            (events, order) in prop::collection::vec(arb_event(), 1..24).prop_flat_map(|events| {
                let n = events.len();
                (Just(events), Just((0..n).collect::<Vec<usize>>()).prop_shuffle())
            }),
            duplicates in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
            batch in 1usize..6,
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                let bodies: Vec<Value> = events.iter().enumerate().map(|(i, e)| to_body(i, e)).collect();
                // Any delivery order plus duplicates, applied in small batches with the worker
                // draining between them.
                let mut delivered: Vec<Value> = order.iter().map(|&i| bodies[i].clone()).collect();
                for d in &duplicates {
                    let at = d.index(delivered.len());
                    delivered.insert(at, bodies[d.index(bodies.len())].clone());
                }
                let shuffled = store(false).await;
                for chunk in delivered.chunks(batch) {
                    shuffled.apply(chunk).await;
                }
                let mut in_order = bodies.clone();
                in_order.sort_by_key(|b| b["createdAt"].as_str().unwrap().to_owned());
                let once = store(false).await;
                once.apply(&in_order).await;

                let (a, b) = (snapshot(&shuffled.pool).await, snapshot(&once.pool).await);
                prop_assert_eq!(&a, &b);
                let consent_events = events.iter().filter(|e| e.0).count();
                prop_assert_eq!(a.2.len(), consent_events, "every distinct consent event once in the ledger");
                Ok(())
            })?;
        }
    }
}
