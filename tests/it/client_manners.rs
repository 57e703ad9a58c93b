//! Upstream manners of the client, checked against the sandbox over loopback: one shared
//! token, one retry on 401, the token-failure guard, bounded retries with backoff, the
//! rate limit, and secrets kept out of text.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use futures::{StreamExt, TryStreamExt};
use outreach_sync::client::models::*;
use outreach_sync::client::{
    ClientError, MemoryTokenGuardStore, ServiceClient, TokenGuardState, TokenGuardStore,
};
use outreach_sync_sandbox::{ApiFaults, RunningSandbox, Sandbox, SandboxConfig};
use secrecy::SecretString;

async fn sandbox(leads: usize) -> RunningSandbox {
    Sandbox::spawn(SandboxConfig {
        leads,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox starts")
}

fn orgs() -> (ListOrganizations, Paging) {
    (ListOrganizations::default(), Paging::default())
}

#[tokio::test]
async fn a_token_that_expires_in_the_middle_of_a_pagination_is_replaced_once() {
    let sandbox = sandbox(30).await;
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    let mut pages = client.list_pages(ListLeads::default(), Paging::first(Some(5)));
    let first = pages.next().await.unwrap().unwrap();
    assert_eq!(sandbox.stats().token_requests, 1);
    sandbox.revoke_tokens();
    let mut leads = first.items;
    while let Some(page) = pages.try_next().await.unwrap() {
        leads.extend(page.items);
    }
    assert_eq!(
        leads,
        crate::common::as_client::<Vec<Lead>>(&sandbox.leads())
    );
    assert_eq!(
        sandbox.stats().token_requests,
        2,
        "one new token, not one per page"
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn concurrent_callers_share_one_token() {
    let sandbox = sandbox(2).await;
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    let calls = (0..20).map(|_| {
        let client = client.clone();
        async move {
            let (q, p) = orgs();
            client.organizations_page(&q, &p).await
        }
    });
    for result in futures::future::join_all(calls).await {
        result.unwrap();
    }
    assert_eq!(sandbox.stats().token_requests, 1);
    assert_eq!(client.token_requests(), 1);
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_401_gets_one_fresh_token_and_one_retry() {
    let sandbox = sandbox(2).await;
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    let (q, p) = orgs();
    client.organizations_page(&q, &p).await.unwrap();
    sandbox.fail_next(&[401]);
    client.organizations_page(&q, &p).await.unwrap();
    assert_eq!(sandbox.stats().token_requests, 2);
    sandbox.fail_next(&[401, 401]);
    let err = client.organizations_page(&q, &p).await.unwrap_err();
    assert!(matches!(err, ClientError::Unauthorized { .. }), "{err}");
    assert_eq!(
        sandbox.stats().token_requests,
        3,
        "only one fresh token per request"
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn bad_credentials_never_cause_more_than_three_token_requests() {
    let sandbox = sandbox(1).await;
    let store = Arc::new(MemoryTokenGuardStore::default());
    let mut config = crate::common::client_config(&sandbox);
    config.client_secret = SecretString::from("wrong-secret-value");
    let client = ServiceClient::with_guard_store(config.clone(), store.clone()).unwrap();
    let (q, p) = orgs();
    let mut errors = Vec::new();
    for _ in 0..6 {
        errors.push(client.organizations_page(&q, &p).await.unwrap_err());
    }
    assert_eq!(sandbox.stats().token_requests, 3);
    assert_eq!(sandbox.stats().api_requests, 0);
    assert!(
        matches!(
            errors[0],
            ClientError::TokenRejected {
                status: 401,
                consecutive_failures: 1
            }
        ),
        "{}",
        errors[0]
    );
    assert!(
        matches!(
            errors[2],
            ClientError::TokenBlocked {
                consecutive_failures: 3,
                ..
            }
        ),
        "{}",
        errors[2]
    );
    assert!(matches!(errors[5], ClientError::TokenBlocked { .. }));
    assert!(
        errors[5].to_string().contains("client_secret"),
        "the error says what to check"
    );
    for error in &errors {
        assert!(!error.to_string().contains("wrong-secret-value"));
    }
    let saved = store.snapshot();
    assert_eq!(saved.consecutive_failures, 3);
    assert!(
        saved
            .blocked_until
            .is_some_and(|t| t > chrono::Utc::now() + chrono::Duration::minutes(14))
    );

    // A restart with the same store (as the daemon's database) asks no more.
    let restarted =
        ServiceClient::with_guard_store(crate::common::client_config(&sandbox), store.clone())
            .unwrap();
    let err = restarted.organizations_page(&q, &p).await.unwrap_err();
    assert!(matches!(err, ClientError::TokenBlocked { .. }), "{err}");
    assert_eq!(sandbox.stats().token_requests, 3);
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_success_clears_earlier_token_failures() {
    let sandbox = sandbox(1).await;
    let store = Arc::new(MemoryTokenGuardStore::new(TokenGuardState {
        consecutive_failures: 2,
        blocked_until: Some(chrono::Utc::now() - chrono::Duration::seconds(1)),
    }));
    let client =
        ServiceClient::with_guard_store(crate::common::client_config(&sandbox), store.clone())
            .unwrap();
    client.ensure_token().await.unwrap();
    assert_eq!(store.load().await.unwrap(), TokenGuardState::default());
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_429_storm_is_ridden_out_by_retries() {
    let sandbox = sandbox(2).await;
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    sandbox.fail_next(&[429, 429, 503, 429]);
    let (q, p) = orgs();
    let page = client.organizations_page(&q, &p).await.unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(sandbox.stats().api_requests, 5);
    sandbox.shutdown().await;
}

#[tokio::test]
async fn retries_are_bounded_and_then_the_service_error_is_returned() {
    let sandbox = sandbox(2).await;
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    sandbox.fail_next(&[429; 50]);
    let (q, p) = orgs();
    let err = client.organizations_page(&q, &p).await.unwrap_err();
    match &err {
        ClientError::RetriesExhausted { attempts, last } => {
            assert_eq!(*attempts, 6, "the first try and 5 retries");
            assert_eq!(last.status(), Some(429));
        }
        other => panic!("unexpected {other}"),
    }
    assert_eq!(err.status(), Some(429));
    assert_eq!(sandbox.stats().api_requests, 6);
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_random_429_rate_is_absorbed_by_retries() {
    let sandbox = sandbox(40).await;
    sandbox.set_api_faults(ApiFaults {
        rate_429: 0.3,
        ..ApiFaults::default()
    });
    let mut config = crate::common::client_config(&sandbox);
    config.max_retries = 20;
    let client = ServiceClient::new(config).unwrap();
    let leads: Vec<Lead> = client
        .leads(ListLeads::default(), Some(3))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        leads,
        crate::common::as_client::<Vec<Lead>>(&sandbox.leads())
    );
    assert!(sandbox.stats().injected_faults > 0);
    sandbox.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured() {
    let sandbox = sandbox(1).await;
    sandbox.set_api_faults(ApiFaults {
        retry_after_secs: Some(1),
        ..ApiFaults::default()
    });
    let mut config = crate::common::client_config(&sandbox);
    config.retry_after_max = Duration::from_secs(5);
    let client = ServiceClient::new(config).unwrap();
    client.ensure_token().await.unwrap();
    sandbox.fail_next(&[429]);
    let start = Instant::now();
    let (q, p) = orgs();
    client.organizations_page(&q, &p).await.unwrap();
    // Paused time: the only wait is the one the 429 asked for.
    assert_eq!(start.elapsed().as_secs(), 1, "{:?}", start.elapsed());
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_creation_is_not_repeated_after_a_server_error() {
    let sandbox = sandbox(1).await;
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    client.ensure_token().await.unwrap();
    let org = sandbox.truth().organizations.remove(0);
    sandbox.fail_next(&[500]);
    let err = client
        .create_custom_field(&CreateCustomField {
            name: "once_only".into(),
            agent_visible: false,
            organization_id: org.id,
        })
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(500));
    assert_eq!(
        sandbox.stats().api_requests,
        1,
        "a 500 may have been acted on: not retried"
    );
    sandbox.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_rate_limiter_spaces_requests() {
    let sandbox = sandbox(1).await;
    let mut config = crate::common::client_config(&sandbox);
    config.requests_per_second = 20;
    let client = ServiceClient::new(config).unwrap();
    let (q, p) = orgs();
    let start = Instant::now();
    for _ in 0..11 {
        client.organizations_page(&q, &p).await.unwrap();
    }
    // Eleven requests at 20/s take ten intervals of 50 ms (paused time: nothing else waits).
    assert_eq!(start.elapsed().as_millis(), 500, "{:?}", start.elapsed());
    sandbox.shutdown().await;
}

#[tokio::test]
async fn secrets_never_appear_in_debug_output() {
    let sandbox = sandbox(1).await;
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    client.ensure_token().await.unwrap();
    let text = format!("{client:?} {:?}", client.config());
    assert!(!text.contains("sandbox-secret"), "{text}");
    assert!(!text.contains("sbx_"), "no token in {text}");
    let create = CreateWebhookRegistration {
        target_url: "http://127.0.0.1:9/".into(),
        secret_for_hmac: SecretString::from("hook-secret"),
        config: WebhookConfig::all_messages(),
    };
    assert!(!format!("{create:?}").contains("hook-secret"));
    sandbox.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_token_is_reused_until_shortly_before_it_expires() {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: 1,
        token_lifetime: Duration::from_secs(1),
        ..SandboxConfig::default()
    })
    .await
    .unwrap();
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).unwrap();
    let (q, p) = orgs();
    for _ in 0..3 {
        client.organizations_page(&q, &p).await.unwrap();
    }
    assert_eq!(sandbox.stats().token_requests, 1);
    // The margin is at most half the lifetime: past 0.5 s a 1 s token is replaced before use,
    // so the service never sees it expire.
    tokio::time::advance(Duration::from_millis(600)).await;
    client.organizations_page(&q, &p).await.unwrap();
    assert_eq!(sandbox.stats().token_requests, 2);
    sandbox.shutdown().await;
}
