//! The change feed under concurrent writes: a follower paging `/v1/consent/changes` while
//! local changes and webhook deliveries are applied sees every entry once, in seq order.

use crate::common;

use common::{Backend, on_both_backends, spawn_app_on, with_admin_token};
use serde_json::{Value, json};

const LOCAL_CHANGES: usize = 150;
const DELIVERIES: usize = 300;

on_both_backends!(
    a_follower_sees_every_ledger_entry_once_and_in_order_while_writers_run,
    flavor = "multi_thread",
    worker_threads = 4
);
async fn a_follower_sees_every_ledger_entry_once_and_in_order_while_writers_run(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    let app = std::sync::Arc::new(app);

    let local = {
        let app = app.clone();
        tokio::spawn(async move {
            for i in 0..LOCAL_CHANGES {
                let change = json!({"phoneNumber": format!("+1555100{:04}", i % 40),
                                    "organizationId": "org_1", "optedOut": i % 3 == 0});
                let response = app.admin_post("/v1/consent", &change).await;
                assert_eq!(response.status(), 202);
            }
        })
    };
    let webhooks = {
        let app = app.clone();
        tokio::spawn(async move {
            for i in 0..DELIVERIES {
                let phone = format!("+1555200{:04}", i % 60);
                let event = common::consent_event(&format!("evt_{i}"), &phone, i % 2 == 0);
                assert_eq!(app.post_signed(&event).await.status(), 200);
            }
        })
    };

    let mut seen: Vec<i64> = Vec::new();
    let mut after = 0i64;
    let mut writers_done = false;
    // Bounded: each loop reads one page; the writers end, then the feed drains.
    for _ in 0..100_000 {
        // Checked before the read: an empty page after this means nothing is left to see.
        let drained = writers_done && applied_all(&app).await;
        let page: Value = app
            .admin_get(&format!("/v1/consent/changes?after={after}&limit=7"))
            .await
            .json()
            .await
            .unwrap();
        let items = page["items"].as_array().unwrap();
        seen.extend(items.iter().map(|e| e["seq"].as_i64().unwrap()));
        after = page["next"].as_i64().unwrap();
        if items.is_empty() {
            if drained {
                break;
            }
            writers_done = local.is_finished() && webhooks.is_finished();
            tokio::task::yield_now().await;
        }
    }
    local.await.unwrap();
    webhooks.await.unwrap();

    let all: Vec<i64> = app
        .rows::<(i64,)>("SELECT seq FROM ledger ORDER BY seq")
        .await
        .into_iter()
        .map(|(seq,)| seq)
        .collect();
    assert_eq!(all.len(), LOCAL_CHANGES + DELIVERIES);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "in order, no duplicates"
    );
    assert_eq!(seen, all, "every entry seen exactly once");
}

async fn applied_all(app: &common::TestApp) -> bool {
    app.count("SELECT COUNT(*) FROM outbox WHERE state = 'pending'")
        .await
        == 0
}
