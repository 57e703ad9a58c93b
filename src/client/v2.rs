//! The v2.1 endpoints the daemon needs when configured for v2: organizations, the leads of
//! an organization or a group, one lead, and `PUT /leads/{id}` for consent.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use reqwest::{Method, Url};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::ServiceClient;
use super::core::{Call, Replay};
use super::error::ClientError;
use super::models::Paging;
use super::paging::{CursorTrail, append_query};
use super::validate;

/// The v2.1 list envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct V2List<T> {
    pub items: Vec<T>,
    pub pagination: V2Pagination,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct V2Pagination {
    #[serde(default)]
    pub cursor: Option<String>,
    pub has_next_page: bool,
    /// Size of the whole result set.
    #[serde(default)]
    pub total: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct V2Organization {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct V2Lead {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub custom_fields: BTreeMap<String, String>,
    pub global_opted_out: bool,
    #[serde(default)]
    pub group_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<String>,
    pub organization_id: String,
    pub phone_number: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default)]
    pub tag_ids: Vec<String>,
    pub created_at: String,
}

/// Body of `PUT /leads/{id}`; every field optional. `tagIds` replaces the whole list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct V2LeadUpdate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_opted_out: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag_ids: Option<Vec<String>>,
}

/// `scope` of `GET /groups/{id}/leads`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum V2GroupScope {
    #[default]
    Active,
    Inactive,
    All,
}

/// The v2.1 endpoints of a [`ServiceClient`], sharing its token and rate limiter.
#[derive(Debug, Clone)]
pub struct V2Client {
    pub(crate) client: ServiceClient,
}

#[derive(Serialize)]
struct ScopeQuery {
    scope: V2GroupScope,
}

impl V2Client {
    pub async fn organizations_page(
        &self,
        paging: &Paging,
    ) -> Result<V2List<V2Organization>, ClientError> {
        self.list_page(vec!["organizations".into()], None, paging)
            .await
    }

    pub fn organizations(
        &self,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<V2Organization, ClientError>> {
        self.list(vec!["organizations".into()], None, limit)
    }

    pub async fn organization(&self, id: &str) -> Result<V2Organization, ClientError> {
        self.get(&["organizations", id]).await
    }

    pub async fn organization_leads_page(
        &self,
        organization_id: &str,
        paging: &Paging,
    ) -> Result<V2List<V2Lead>, ClientError> {
        self.list_page(
            segments(&["organizations", organization_id, "leads"]),
            None,
            paging,
        )
        .await
    }

    pub fn organization_leads(
        &self,
        organization_id: &str,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<V2Lead, ClientError>> {
        self.list(
            segments(&["organizations", organization_id, "leads"]),
            None,
            limit,
        )
    }

    pub async fn group_leads_page(
        &self,
        group_id: &str,
        scope: V2GroupScope,
        paging: &Paging,
    ) -> Result<V2List<V2Lead>, ClientError> {
        self.list_page(
            segments(&["groups", group_id, "leads"]),
            Some(scope),
            paging,
        )
        .await
    }

    pub fn group_leads(
        &self,
        group_id: &str,
        scope: V2GroupScope,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<V2Lead, ClientError>> {
        self.list(segments(&["groups", group_id, "leads"]), Some(scope), limit)
    }

    pub async fn lead(&self, id: &str) -> Result<V2Lead, ClientError> {
        self.get(&["leads", id]).await
    }

    /// `PUT /leads/{id}`: how v2 sets `globalOptedOut`.
    pub async fn update_lead(&self, id: &str, body: &V2LeadUpdate) -> Result<V2Lead, ClientError> {
        let bytes =
            serde_json::to_vec(body).map_err(|e| ClientError::invalid("body", e.to_string()))?;
        let call = Call {
            method: Method::PUT,
            url: self.url(&["leads", id]),
            body: Some(Bytes::from(bytes)),
            replay: Replay::Safe,
        };
        self.client.inner.execute(&call).await?.json("v2/leads")
    }

    fn url(&self, segments: &[&str]) -> Url {
        let mut path = vec!["v2"];
        path.extend_from_slice(segments);
        self.client.inner.url(&path)
    }

    async fn get<T: DeserializeOwned>(&self, segments: &[&str]) -> Result<T, ClientError> {
        let call = Call {
            method: Method::GET,
            url: self.url(segments),
            body: None,
            replay: Replay::Safe,
        };
        self.client
            .inner
            .execute(&call)
            .await?
            .json(&segments.join("/"))
    }

    async fn list_page<T: DeserializeOwned>(
        &self,
        path: Vec<String>,
        scope: Option<V2GroupScope>,
        paging: &Paging,
    ) -> Result<V2List<T>, ClientError> {
        validate::limit(paging.limit)?;
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        let mut url = self.url(&refs);
        if let Some(scope) = scope {
            append_query(&mut url, &ScopeQuery { scope })?;
        }
        append_query(&mut url, paging)?;
        let call = Call {
            method: Method::GET,
            url,
            body: None,
            replay: Replay::Safe,
        };
        match self.client.inner.execute(&call).await {
            Ok(answer) => answer.json(&path.join("/")),
            // v2 refuses to page past 100,000 objects: a reader must switch strategy, not
            // retry, so this gets its own variant.
            Err(ClientError::Api { status: 422, body }) => Err(ClientError::CursorDepthExceeded {
                message: body.message,
            }),
            Err(other) => Err(other),
        }
    }

    fn list<T: DeserializeOwned + Send + 'static>(
        &self,
        path: Vec<String>,
        scope: Option<V2GroupScope>,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<T, ClientError>> {
        let this = self.clone();
        let trail = CursorTrail::new(format!("v2/{}", path.join("/")), None);
        stream::try_unfold(
            (Some(Paging::first(limit)), trail),
            move |(next, mut trail)| {
                let this = this.clone();
                let path = path.clone();
                async move {
                    let Some(paging) = next else {
                        return Ok(None);
                    };
                    let page: V2List<T> = this.list_page(path, scope, &paging).await?;
                    let following = match (&page.pagination.cursor, page.pagination.has_next_page) {
                        (Some(cursor), true) => {
                            trail.follow(cursor)?;
                            Some(Paging::after(cursor.clone(), paging.limit))
                        }
                        _ => None,
                    };
                    Ok(Some((page.items, (following, trail))))
                }
            },
        )
        .map_ok(|items| stream::iter(items.into_iter().map(Ok)))
        .try_flatten()
        .boxed()
    }
}

fn segments(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_owned()).collect()
}
