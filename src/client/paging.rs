//! v3 lists: one page for a cursor, or a stream that follows `cursor`/`hasMore` holding one
//! page at a time.

use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ServiceClient;
use super::core::{Call, Replay};
use super::error::ClientError;
use super::models::*;
use super::validate;

/// The filters of one v3 list endpoint, naming its path and item type.
pub trait ListQuery: Serialize + Clone + Send + Sync + 'static {
    /// Path under `/v3`.
    const PATH: &'static str;
    type Item: DeserializeOwned + Send + 'static;

    /// Documented constraints on the filters, checked before sending.
    fn validate(&self) -> Result<(), ClientError> {
        Ok(())
    }
}

macro_rules! list_query {
    ($query:ty, $path:literal, $item:ty) => {
        impl ListQuery for $query {
            const PATH: &'static str = $path;
            type Item = $item;
        }
    };
}

list_query!(ListAgents, "agents", Agent);
list_query!(ListCustomFields, "custom_fields", CustomField);
list_query!(ListGroups, "groups", Group);
list_query!(ListIntegrations, "integrations", Integration);
list_query!(ListOrganizations, "organizations", Organization);
list_query!(ListTags, "tags", Tag);
list_query!(
    ListWebhookRegistrations,
    "webhook_registrations",
    WebhookRegistration
);

impl ListQuery for ListLeads {
    const PATH: &'static str = "leads";
    type Item = Lead;

    fn validate(&self) -> Result<(), ClientError> {
        match &self.phone_number {
            Some(phone) => validate::e164("phoneNumber", phone),
            None => Ok(()),
        }
    }
}

impl ServiceClient {
    /// One page of a v3 list. Pass the returned `cursor` back (when `hasMore`) for the next.
    pub async fn list_page<Q: ListQuery>(
        &self,
        query: &Q,
        paging: &Paging,
    ) -> Result<ListPage<Q::Item>, ClientError> {
        validate::limit(paging.limit)?;
        query.validate()?;
        let mut url = self.inner.url(&["v3", Q::PATH]);
        append_query(&mut url, query)?;
        append_query(&mut url, paging)?;
        let call = Call {
            method: Method::GET,
            url,
            body: None,
            replay: Replay::Safe,
        };
        self.inner.execute(&call).await?.json(Q::PATH)
    }

    /// Every item of a v3 list, page after page; only one page is held at a time.
    pub fn list<Q: ListQuery>(
        &self,
        query: Q,
        limit: Option<u32>,
    ) -> BoxStream<'static, Result<Q::Item, ClientError>> {
        self.list_pages(query, Paging::first(limit))
            .map_ok(|page| stream::iter(page.items.into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    /// The pages of a v3 list from `start`, for callers that checkpoint cursors.
    pub fn list_pages<Q: ListQuery>(
        &self,
        query: Q,
        start: Paging,
    ) -> BoxStream<'static, Result<ListPage<Q::Item>, ClientError>> {
        let client = self.clone();
        stream::try_unfold(Some(start), move |next| {
            let client = client.clone();
            let query = query.clone();
            async move {
                let Some(paging) = next else {
                    return Ok(None);
                };
                let page = client.list_page(&query, &paging).await?;
                let following = match page.next_cursor() {
                    // A cursor that does not move would loop for ever.
                    Some(cursor) if Some(cursor) != paging.cursor.as_deref() => {
                        Some(Paging::after(cursor, paging.limit))
                    }
                    _ => None,
                };
                Ok(Some((page, following)))
            }
        })
        .boxed()
    }
}

/// Adds a serializable value's fields to the URL's query.
pub(crate) fn append_query<T: Serialize + ?Sized>(
    url: &mut reqwest::Url,
    value: &T,
) -> Result<(), ClientError> {
    let encoded =
        serde_json::to_value(value).map_err(|e| ClientError::invalid("query", e.to_string()))?;
    let serde_json::Value::Object(map) = encoded else {
        return Err(ClientError::invalid("query", "not an object"));
    };
    if map.is_empty() {
        return Ok(());
    }
    let mut pairs = url.query_pairs_mut();
    for (key, value) in map {
        match value {
            serde_json::Value::Null => {}
            serde_json::Value::String(s) => {
                pairs.append_pair(&key, &s);
            }
            other => {
                pairs.append_pair(&key, &other.to_string());
            }
        }
    }
    drop(pairs);
    Ok(())
}
