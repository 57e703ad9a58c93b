//! The v3 endpoints, one typed method each (lists are in `paging`, with named shorthands
//! here).

use bytes::Bytes;
use futures::stream::BoxStream;
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ServiceClient;
use super::core::{Call, Replay};
use super::error::ClientError;
use super::models::*;
use super::validate;

impl ServiceClient {
    async fn send_v3<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<&B>,
        replay: Replay,
    ) -> Result<(StatusCode, T), ClientError> {
        let answer = self.send_v3_raw(method, segments, body, replay).await?;
        let value = answer.json(&segments.join("/"))?;
        Ok((answer.status, value))
    }

    async fn send_v3_raw<B: Serialize>(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<&B>,
        replay: Replay,
    ) -> Result<super::core::Answer, ClientError> {
        let mut path = vec!["v3"];
        path.extend_from_slice(segments);
        let body = match body {
            Some(body) => Some(Bytes::from(
                serde_json::to_vec(body)
                    .map_err(|e| ClientError::invalid("body", e.to_string()))?,
            )),
            None => None,
        };
        let call = Call {
            method,
            url: self.inner.url(&path),
            body,
            replay,
        };
        self.inner.execute(&call).await
    }

    // Agents

    pub async fn agents_page(
        &self,
        query: &ListAgents,
        paging: &Paging,
    ) -> Result<ListPage<Agent>, ClientError> {
        self.list_page(query, paging).await
    }

    pub fn agents(
        &self,
        query: ListAgents,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<Agent, ClientError>> {
        self.list(query, limit)
    }

    /// Sends an invitation email if the person is not already a user.
    pub async fn create_agent(&self, body: &CreateAgent) -> Result<Agent, ClientError> {
        let (_, agent) = self
            .send_v3(Method::POST, &["agents"], Some(body), Replay::Unsafe)
            .await?;
        Ok(agent)
    }

    pub async fn update_agent(&self, id: &str, body: &UpdateAgent) -> Result<Agent, ClientError> {
        let (_, agent) = self
            .send_v3(Method::PUT, &["agents", id], Some(body), Replay::Safe)
            .await?;
        Ok(agent)
    }

    // Custom fields

    pub async fn custom_fields_page(
        &self,
        query: &ListCustomFields,
        paging: &Paging,
    ) -> Result<ListPage<CustomField>, ClientError> {
        self.list_page(query, paging).await
    }

    pub fn custom_fields(
        &self,
        query: ListCustomFields,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<CustomField, ClientError>> {
        self.list(query, limit)
    }

    pub async fn create_custom_field(
        &self,
        body: &CreateCustomField,
    ) -> Result<CustomField, ClientError> {
        validate::custom_field_name("name", &body.name)?;
        let (_, field) = self
            .send_v3(Method::POST, &["custom_fields"], Some(body), Replay::Unsafe)
            .await?;
        Ok(field)
    }

    // Groups

    pub async fn groups_page(
        &self,
        query: &ListGroups,
        paging: &Paging,
    ) -> Result<ListPage<Group>, ClientError> {
        self.list_page(query, paging).await
    }

    pub fn groups(
        &self,
        query: ListGroups,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<Group, ClientError>> {
        self.list(query, limit)
    }

    pub async fn create_group(&self, body: &CreateGroup) -> Result<Group, ClientError> {
        let (_, group) = self
            .send_v3(Method::POST, &["groups"], Some(body), Replay::Unsafe)
            .await?;
        Ok(group)
    }

    // Integrations

    pub async fn integrations_page(
        &self,
        query: &ListIntegrations,
        paging: &Paging,
    ) -> Result<ListPage<Integration>, ClientError> {
        self.list_page(query, paging).await
    }

    pub fn integrations(
        &self,
        query: ListIntegrations,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<Integration, ClientError>> {
        self.list(query, limit)
    }

    pub async fn create_integration(
        &self,
        body: &CreateIntegration,
    ) -> Result<Integration, ClientError> {
        let (_, integration) = self
            .send_v3(Method::POST, &["integrations"], Some(body), Replay::Unsafe)
            .await?;
        Ok(integration)
    }

    /// Applies only if the new credentials are valid.
    pub async fn update_integration(
        &self,
        body: &UpdateIntegration,
    ) -> Result<Integration, ClientError> {
        let (_, integration) = self
            .send_v3(Method::PATCH, &["integrations"], Some(body), Replay::Safe)
            .await?;
        Ok(integration)
    }

    // Leads

    pub async fn leads_page(
        &self,
        query: &ListLeads,
        paging: &Paging,
    ) -> Result<ListPage<Lead>, ClientError> {
        self.list_page(query, paging).await
    }

    pub fn leads(
        &self,
        query: ListLeads,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<Lead, ClientError>> {
        self.list(query, limit)
    }

    /// One lead by id (GET /leads?id=), `None` if there is none.
    pub async fn lead(&self, id: &str) -> Result<Option<Lead>, ClientError> {
        let query = ListLeads {
            id: Some(id.to_owned()),
            ..ListLeads::default()
        };
        let page = self.list_page(&query, &Paging::first(Some(1))).await?;
        Ok(page.items.into_iter().next())
    }

    /// Upsert by `organizationId` + `phoneNumber`: 201 created, 200 updated.
    pub async fn upsert_lead(&self, body: &UpsertLead) -> Result<Upserted, ClientError> {
        validate::phone("phoneNumber", &body.phone_number)?;
        if let Some(fields) = &body.custom_fields {
            for name in fields.keys() {
                validate::custom_field_name("customFields", name)?;
            }
        }
        let (status, lead) = self
            .send_v3(Method::POST, &["leads"], Some(body), Replay::Safe)
            .await?;
        Ok(if status == StatusCode::CREATED {
            Upserted::Created(lead)
        } else {
            Upserted::Updated(lead)
        })
    }

    /// One operation on one lead (204); read the result back with [`ServiceClient::lead`].
    pub async fn patch_lead(&self, id: &str, operation: LeadOperation) -> Result<(), ClientError> {
        if let LeadOperation::SetCustomField {
            custom_field_name, ..
        } = &operation
        {
            validate::custom_field_name("customFieldName", custom_field_name)?;
        }
        let body = PatchLead {
            id: id.to_owned(),
            operation,
        };
        self.send_v3_raw(Method::PATCH, &["leads"], Some(&body), Replay::Safe)
            .await?;
        Ok(())
    }

    /// Opts a lead out, optionally applying a tag of visibility `OPT_OUT`.
    pub async fn opt_out(&self, lead_id: &str, tag_id: Option<String>) -> Result<(), ClientError> {
        self.patch_lead(lead_id, LeadOperation::OptOut { tag_id })
            .await
    }

    pub async fn opt_in(&self, lead_id: &str) -> Result<(), ClientError> {
        self.patch_lead(lead_id, LeadOperation::OptIn).await
    }

    // Messages

    /// The delivery status of one message.
    pub async fn message(&self, id: &str) -> Result<MessageStatus, ClientError> {
        let (_, message) = self
            .send_v3::<(), _>(Method::GET, &["messages", id], None, Replay::Safe)
            .await?;
        Ok(message)
    }

    // Organizations

    pub async fn organizations_page(
        &self,
        query: &ListOrganizations,
        paging: &Paging,
    ) -> Result<ListPage<Organization>, ClientError> {
        self.list_page(query, paging).await
    }

    pub fn organizations(
        &self,
        query: ListOrganizations,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<Organization, ClientError>> {
        self.list(query, limit)
    }

    // Tags

    pub async fn tags_page(
        &self,
        query: &ListTags,
        paging: &Paging,
    ) -> Result<ListPage<Tag>, ClientError> {
        self.list_page(query, paging).await
    }

    pub fn tags(
        &self,
        query: ListTags,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<Tag, ClientError>> {
        self.list(query, limit)
    }

    // Webhook registrations

    pub async fn webhook_registrations_page(
        &self,
        query: &ListWebhookRegistrations,
        paging: &Paging,
    ) -> Result<ListPage<WebhookRegistration>, ClientError> {
        self.list_page(query, paging).await
    }

    pub fn webhook_registrations(
        &self,
        query: ListWebhookRegistrations,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<WebhookRegistration, ClientError>> {
        self.list(query, limit)
    }

    pub async fn create_webhook_registration(
        &self,
        body: &CreateWebhookRegistration,
    ) -> Result<WebhookRegistration, ClientError> {
        let (_, registration) = self
            .send_v3(
                Method::POST,
                &["webhook_registrations"],
                Some(body),
                Replay::Unsafe,
            )
            .await?;
        Ok(registration)
    }

    /// Moves the target, replaces the secret or changes the config.
    pub async fn update_webhook_registration(
        &self,
        id: &str,
        body: &UpdateWebhookRegistration,
    ) -> Result<WebhookRegistration, ClientError> {
        let (_, registration) = self
            .send_v3(
                Method::PUT,
                &["webhook_registrations", id],
                Some(body),
                Replay::Safe,
            )
            .await?;
        Ok(registration)
    }

    pub async fn delete_webhook_registration(
        &self,
        id: &str,
    ) -> Result<DeleteOutcome, ClientError> {
        let (_, outcome) = self
            .send_v3::<(), _>(
                Method::DELETE,
                &["webhook_registrations", id],
                None,
                Replay::Safe,
            )
            .await?;
        Ok(outcome)
    }

    /// Has the service send a mock event to a registration's (or a described) target.
    pub async fn mock_event(&self, body: &MockEvent) -> Result<MockEventOutcome, ClientError> {
        let (_, outcome) = self
            .send_v3(
                Method::POST,
                &["webhook_registrations", "mock_event"],
                Some(body),
                Replay::Safe,
            )
            .await?;
        Ok(outcome)
    }
}
