//! The v2.1 client against the sandbox's minimal /v2: envelope, paging, consent by PUT, and
//! the distinct error past the cursor depth.

use futures::TryStreamExt;
use outreach_sync::client::models::Paging;
use outreach_sync::client::{ClientError, ServiceClient, V2GroupScope, V2Lead, V2LeadUpdate};
use outreach_sync::settings::ApiVersion;
use outreach_sync_sandbox::{RunningSandbox, Sandbox, SandboxConfig};

async fn sandbox(leads: usize, depth: usize) -> (RunningSandbox, ServiceClient) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads,
        v2_cursor_depth: depth,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox starts");
    let mut config = crate::common::client_config(&sandbox);
    config.api_version = ApiVersion::V2;
    let client = ServiceClient::new(config).expect("client");
    (sandbox, client)
}

#[tokio::test]
async fn organizations_and_their_leads_are_read_through_v2() {
    let (sandbox, client) = sandbox(21, 100_000).await;
    let v2 = client.v2();
    let orgs: Vec<_> = v2.organizations(Some(1)).try_collect().await.unwrap();
    assert_eq!(orgs.len(), 2);
    assert_eq!(v2.organization(&orgs[0].id).await.unwrap(), orgs[0]);
    let page = v2
        .organization_leads_page(&orgs[0].id, &Paging::first(Some(4)))
        .await
        .unwrap();
    let expected = sandbox
        .leads()
        .into_iter()
        .filter(|l| l.organization_id == orgs[0].id)
        .count();
    assert_eq!(page.pagination.total, Some(expected as u64));
    assert!(page.pagination.has_next_page);
    let all: Vec<V2Lead> = v2
        .organization_leads(&orgs[0].id, Some(4))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all.len(), expected);
    assert_eq!(
        sandbox.stats().token_requests,
        1,
        "minted at /v2/oauth/token once"
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn leads_of_a_group_honour_the_scope() {
    let (sandbox, client) = sandbox(30, 100_000).await;
    let member = sandbox
        .leads()
        .into_iter()
        .find(|l| !l.inactive_group_ids.is_empty())
        .unwrap();
    let group = member.inactive_group_ids[0].clone();
    let v2 = client.v2();
    let inactive: Vec<V2Lead> = v2
        .group_leads(&group, V2GroupScope::Inactive, None)
        .try_collect()
        .await
        .unwrap();
    assert!(inactive.iter().any(|l| l.id == member.id));
    let active: Vec<V2Lead> = v2
        .group_leads(&group, V2GroupScope::Active, None)
        .try_collect()
        .await
        .unwrap();
    assert!(active.iter().all(|l| l.id != member.id));
    sandbox.shutdown().await;
}

#[tokio::test]
async fn consent_is_set_with_put_and_read_back() {
    let (sandbox, client) = sandbox(5, 100_000).await;
    let lead = sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .unwrap();
    let v2 = client.v2();
    let updated = v2
        .update_lead(
            &lead.id,
            &V2LeadUpdate {
                global_opted_out: Some(true),
                ..V2LeadUpdate::default()
            },
        )
        .await
        .unwrap();
    assert!(updated.global_opted_out);
    assert!(v2.lead(&lead.id).await.unwrap().global_opted_out);
    let err = v2.lead("lead_missing").await.unwrap_err();
    assert!(err.is_not_found());
    sandbox.shutdown().await;
}

#[tokio::test]
async fn paging_past_the_cursor_depth_is_a_distinct_error() {
    let (sandbox, client) = sandbox(24, 5).await;
    let org = sandbox.truth().organizations.remove(0);
    let result: Result<Vec<V2Lead>, ClientError> = client
        .v2()
        .organization_leads(&org.id, Some(2))
        .try_collect()
        .await;
    let err = result.unwrap_err();
    assert!(
        matches!(err, ClientError::CursorDepthExceeded { .. }),
        "{err}"
    );
    assert_eq!(
        sandbox.stats().api_requests,
        4,
        "pages at 0, 2 and 4, then the refused one"
    );
    sandbox.shutdown().await;
}
