//! The v3 client against the sandbox over real loopback HTTP: every endpoint once.

use futures::TryStreamExt;
use outreach_sync::client::models::*;
use outreach_sync::client::{ClientError, ServiceClient};
use outreach_sync_sandbox::{RunningSandbox, Sandbox, SandboxConfig};
use secrecy::SecretString;

async fn sandbox(leads: usize) -> (RunningSandbox, ServiceClient) {
    let sandbox = Sandbox::spawn(SandboxConfig {
        leads,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox starts");
    let client = ServiceClient::new(crate::common::client_config(&sandbox)).expect("client");
    (sandbox, client)
}

async fn first_org(client: &ServiceClient) -> Organization {
    client
        .organizations_page(&ListOrganizations::default(), &Paging::default())
        .await
        .expect("organizations")
        .items
        .remove(0)
}

#[tokio::test]
async fn organizations_are_listed_and_filtered_by_id() {
    let (sandbox, client) = sandbox(4).await;
    let all: Vec<Organization> = client
        .organizations(ListOrganizations::default(), None)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    assert!(
        all.iter()
            .all(|o| o.kind == "organization" && !o.integrations.is_empty())
    );
    let one = client
        .organizations_page(
            &ListOrganizations {
                id: Some(all[1].id.clone()),
            },
            &Paging::default(),
        )
        .await
        .unwrap();
    assert_eq!(one.items, vec![all[1].clone()]);
    assert!(!one.has_more);
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_stream_of_leads_follows_cursors_to_the_end() {
    let (sandbox, client) = sandbox(57).await;
    let streamed: Vec<Lead> = client
        .leads(ListLeads::default(), Some(10))
        .try_collect()
        .await
        .unwrap();
    let truth: Vec<Lead> = crate::common::as_client(&sandbox.leads());
    assert_eq!(streamed, truth);
    // A page at a time, resuming from a checkpointed cursor.
    let first = client
        .leads_page(&ListLeads::default(), &Paging::first(Some(10)))
        .await
        .unwrap();
    assert!(first.has_more);
    let cursor = first.next_cursor().expect("a cursor").to_owned();
    let second = client
        .leads_page(&ListLeads::default(), &Paging::after(cursor, Some(10)))
        .await
        .unwrap();
    assert_eq!(second.items, truth[10..20].to_vec());
    sandbox.shutdown().await;
}

#[tokio::test]
async fn leads_are_filtered_by_organization_phone_and_group_status() {
    let (sandbox, client) = sandbox(30).await;
    let org = first_org(&client).await;
    let truth = sandbox.leads();
    let in_org: Vec<Lead> = client
        .leads(ListLeads::in_organization(&org.id), None)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(
        in_org.len(),
        truth.iter().filter(|l| l.organization_id == org.id).count()
    );
    let phone = truth[0].phone_number.clone();
    let by_phone: Vec<Lead> = client
        .leads(
            ListLeads {
                phone_number: Some(phone.clone()),
                ..ListLeads::default()
            },
            None,
        )
        .try_collect()
        .await
        .unwrap();
    assert!(!by_phone.is_empty() && by_phone.iter().all(|l| l.phone_number == phone));
    let inactive = truth
        .iter()
        .find(|l| !l.inactive_group_ids.is_empty())
        .expect("seeded inactive member");
    let group = inactive.inactive_group_ids[0].clone();
    let listed: Vec<Lead> = client
        .leads(
            ListLeads {
                group_id: Some(group.clone()),
                lead_status_in_group: Some(LeadStatusInGroup::Inactive),
                ..ListLeads::default()
            },
            None,
        )
        .try_collect()
        .await
        .unwrap();
    assert!(listed.iter().any(|l| l.id == inactive.id));
    assert!(listed.iter().all(|l| l.inactive_group_ids.contains(&group)));
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_lead_is_created_then_updated_and_operated_on() {
    let (sandbox, client) = sandbox(2).await;
    let org = first_org(&client).await;
    let groups: Vec<Group> = client
        .groups(
            ListGroups {
                organization_id: Some(org.id.clone()),
                ..ListGroups::default()
            },
            None,
        )
        .try_collect()
        .await
        .unwrap();
    let body = UpsertLead {
        phone_number: "+15559990001".into(),
        organization_id: org.id.clone(),
        active_group_ids: Some(vec![groups[0].id.clone()]),
        first_name: Some("Rosa".into()),
        ..UpsertLead::default()
    };
    let created = client.upsert_lead(&body).await.unwrap();
    assert!(created.was_created());
    let id = created.lead().id.clone();
    let updated = client
        .upsert_lead(&UpsertLead {
            last_name: Some("Parks".into()),
            ..body
        })
        .await
        .unwrap();
    assert!(!updated.was_created());
    assert_eq!(updated.lead().id, id);
    assert_eq!(updated.lead().first_name.as_deref(), Some("Rosa"));

    let tags: Vec<Tag> = client
        .tags(
            ListTags {
                organization_id: Some(org.id.clone()),
                ..ListTags::default()
            },
            None,
        )
        .try_collect()
        .await
        .unwrap();
    let opt_out_tag = tags
        .iter()
        .find(|t| t.agent_visibility == AgentVisibility::OptOut)
        .unwrap();
    let profile_tag = tags
        .iter()
        .find(|t| t.agent_visibility == AgentVisibility::LeadProfiles)
        .unwrap();
    let ops = [
        LeadOperation::MakeActiveInGroup {
            group_id: groups[1].id.clone(),
        },
        LeadOperation::MakeInactiveInGroup {
            group_id: groups[0].id.clone(),
        },
        LeadOperation::ApplyTag {
            tag_id: profile_tag.id.clone(),
        },
        LeadOperation::SetCustomField {
            custom_field_name: "county".into(),
            value: "Franklin".into(),
        },
        LeadOperation::AttachLeadToIntegration {
            integration_id: org.integrations[0].clone(),
            external: ExternalLeadObject::VoterFileA(VoterFileObject {
                version: VersionV4::V4,
                voter_file_id: "VF-1".into(),
                voter_file_phone_id: Some(7.0),
            }),
        },
        LeadOperation::OptOut {
            tag_id: Some(opt_out_tag.id.clone()),
        },
    ];
    for op in ops {
        client.patch_lead(&id, op).await.unwrap();
    }
    let lead = client.lead(&id).await.unwrap().expect("the lead");
    assert_eq!(lead.active_group_ids, vec![groups[1].id.clone()]);
    assert_eq!(lead.inactive_group_ids, vec![groups[0].id.clone()]);
    assert!(lead.tag_ids.contains(&profile_tag.id) && lead.tag_ids.contains(&opt_out_tag.id));
    assert_eq!(
        lead.custom_fields.get("county").map(String::as_str),
        Some("Franklin")
    );
    assert!(lead.global_opted_out);
    client
        .patch_lead(
            &id,
            LeadOperation::RemoveTag {
                tag_id: profile_tag.id.clone(),
            },
        )
        .await
        .unwrap();
    client.opt_in(&id).await.unwrap();
    let lead = client.lead(&id).await.unwrap().unwrap();
    assert!(!lead.global_opted_out && !lead.tag_ids.contains(&profile_tag.id));
    sandbox.shutdown().await;
}

#[tokio::test]
async fn agents_groups_custom_fields_and_integrations_are_created_and_listed() {
    let (sandbox, client) = sandbox(1).await;
    let org = first_org(&client).await;
    let group = client
        .create_group(&CreateGroup {
            name: "Phone bank".into(),
            country_code: CountryCode::US,
            location: Location {
                label: "Boston, MA".into(),
                coordinates: Coordinates {
                    lat: 42.36,
                    lng: -71.06,
                },
            },
            organization_id: org.id.clone(),
            description: None,
        })
        .await
        .unwrap();
    assert_eq!(group.timezone, "America/New_York");
    let active: Vec<Group> = client
        .groups(
            ListGroups {
                active: Some(true),
                ..ListGroups::default()
            },
            None,
        )
        .try_collect()
        .await
        .unwrap();
    assert!(active.iter().any(|g| g.id == group.id));

    let agent = client
        .create_agent(&CreateAgent {
            name: "Sam".into(),
            full_name: "Sam Lee".into(),
            email: "sam@example.org".into(),
            group_id: group.id.clone(),
        })
        .await
        .unwrap();
    let renamed = client
        .update_agent(
            &agent.id,
            &UpdateAgent {
                name: "Samuel".into(),
                full_name: "Samuel Lee".into(),
                send_invite: Some(false),
            },
        )
        .await
        .unwrap();
    assert_eq!(renamed.name, "Samuel");
    let agents = client
        .agents_page(
            &ListAgents {
                group_id: Some(group.id.clone()),
                ..ListAgents::default()
            },
            &Paging::default(),
        )
        .await
        .unwrap();
    assert_eq!(agents.items, vec![renamed]);

    let field = client
        .create_custom_field(&CreateCustomField {
            name: "shift_pref".into(),
            agent_visible: true,
            organization_id: org.id.clone(),
        })
        .await
        .unwrap();
    let fields: Vec<CustomField> = client
        .custom_fields(ListCustomFields::default(), None)
        .try_collect()
        .await
        .unwrap();
    assert!(fields.iter().any(|f| f.id == field.id));
    assert!(
        fields.iter().any(|f| f.organization_id.is_none()),
        "account-scoped fields are listed too"
    );

    let integration = client
        .create_integration(&CreateIntegration {
            organization_id: org.id.clone(),
            integration: NewIntegration::AdvocacyA {
                name: "Advocacy".into(),
                credentials: AdvocacyCredentials {
                    username: "u".into(),
                    password: SecretString::from("p"),
                    api_key: SecretString::from("k"),
                },
            },
        })
        .await
        .unwrap();
    assert_eq!(integration.integration_type, IntegrationType::AdvocacyA);
    let updated = client
        .update_integration(&UpdateIntegration {
            integration_id: integration.id.clone(),
            operation: IntegrationOperation::UpdateAdvocacyACredentials {
                credentials: AdvocacyCredentials {
                    username: "u2".into(),
                    password: SecretString::from("p2"),
                    api_key: SecretString::from("k2"),
                },
            },
        })
        .await
        .unwrap();
    assert_eq!(updated.id, integration.id);
    let listed = client
        .integrations_page(
            &ListIntegrations {
                integration_type: Some(IntegrationType::AdvocacyA),
                ..ListIntegrations::default()
            },
            &Paging::default(),
        )
        .await
        .unwrap();
    assert_eq!(listed.items, vec![integration]);
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_message_status_is_read_and_an_unknown_message_is_not_found() {
    let (sandbox, client) = sandbox(3).await;
    let lead = sandbox
        .leads()
        .into_iter()
        .find(|l| !l.global_opted_out)
        .unwrap();
    let sent = sandbox
        .send_message(&lead.id, outreach_sync_sandbox::wire::MessageType::SMS)
        .unwrap();
    let read = client.message(&sent.id).await.unwrap();
    assert_eq!(
        read,
        crate::common::as_client::<MessageStatus>(&sent.status_resource())
    );
    assert!(!read.is_terminal());
    let err = client.message("msg_missing").await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert_eq!(err.body().map(|b| b.code), Some(404));
    sandbox.shutdown().await;
}

#[tokio::test]
async fn webhook_registrations_are_created_listed_updated_mocked_and_deleted() {
    let (sandbox, client) = sandbox(1).await;
    let created = client
        .create_webhook_registration(&CreateWebhookRegistration {
            target_url: "http://127.0.0.1:9/hook".into(),
            secret_for_hmac: SecretString::from("s3cret"),
            config: WebhookConfig::all_consent(),
        })
        .await
        .unwrap();
    assert!(created.secret_for_hmac);
    let listed = client
        .webhook_registrations_page(
            &ListWebhookRegistrations {
                config_type: Some(EventKind::ConsentUpdate),
                ..ListWebhookRegistrations::default()
            },
            &Paging::default(),
        )
        .await
        .unwrap();
    assert_eq!(listed.items, vec![created.clone()]);
    let moved = client
        .update_webhook_registration(
            &created.id,
            &UpdateWebhookRegistration {
                target_url: Some("http://127.0.0.1:9/other".into()),
                ..UpdateWebhookRegistration::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(moved.target_url, "http://127.0.0.1:9/other");
    // Nothing listens on port 9: the mock event cannot pass validation.
    let mock = client
        .mock_event(&MockEvent::WebhookRegistrationId {
            webhook_registration_id: created.id.clone(),
        })
        .await
        .unwrap();
    assert!(!mock.will_pass_validation);
    assert_eq!(mock.account_id, sandbox.config().account_id);
    assert!(
        client
            .delete_webhook_registration(&created.id)
            .await
            .unwrap()
            .success
    );
    assert!(
        !client
            .delete_webhook_registration(&created.id)
            .await
            .unwrap()
            .success
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn documented_constraints_are_refused_before_anything_is_sent() {
    let (sandbox, client) = sandbox(1).await;
    let before = sandbox.stats().api_requests;
    for limit in [0, 1001] {
        let err = client
            .leads_page(&ListLeads::default(), &Paging::first(Some(limit)))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ClientError::Invalid { field: "limit", .. }),
            "{err}"
        );
    }
    let err = client
        .upsert_lead(&UpsertLead {
            phone_number: "555-1234".into(),
            organization_id: "org".into(),
            ..UpsertLead::default()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Invalid {
                field: "phoneNumber",
                ..
            }
        ),
        "{err}"
    );
    let err = client
        .create_custom_field(&CreateCustomField {
            name: "2bad name".into(),
            agent_visible: false,
            organization_id: "org".into(),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Invalid { field: "name", .. }),
        "{err}"
    );
    let err = client
        .patch_lead(
            "lead",
            LeadOperation::SetCustomField {
                custom_field_name: "has-dash".into(),
                value: "x".into(),
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Invalid { .. }), "{err}");
    assert_eq!(sandbox.stats().api_requests, before);
    sandbox.shutdown().await;
}

#[tokio::test]
async fn service_errors_carry_code_message_and_service_error_code() {
    let (sandbox, client) = sandbox(2).await;
    let lead = sandbox.leads().remove(0);
    let err = client
        .patch_lead(
            &lead.id,
            LeadOperation::SetCustomField {
                custom_field_name: "no_such_field".into(),
                value: "x".into(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(422));
    let body = err.body().expect("error body");
    assert_eq!(body.code, 422);
    assert!(body.message.contains("no_such_field"));
    assert_eq!(
        body.service_error_code.as_deref(),
        Some("CUSTOM_FIELD_NOT_FOUND")
    );
    assert!(err.to_string().contains("CUSTOM_FIELD_NOT_FOUND"));
    sandbox.shutdown().await;
}
