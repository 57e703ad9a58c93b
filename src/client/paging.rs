//! v3 lists: one page for a cursor, or a stream that follows `cursor`/`hasMore` holding one
//! page at a time.

use std::collections::HashSet;
use std::hash::BuildHasher as _;

use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ServiceClient;
use super::core::{Call, Replay};
use super::error::ClientError;
use super::models::*;
use super::validate;

/// Most pages one list is followed for: far past any account (at 1,000 items a page, a
/// hundred million), and short of for ever when the service's cursors never end.
pub const MAX_PAGES: u64 = 100_000;

/// The cursors one list has been through, so that following them ends: a cursor that comes
/// back (A, B, A...: a circle, or one that does not move) or more than [`MAX_PAGES`] pages
/// end the list with an error naming it, instead of looping for ever or stopping silently
/// with part of it. Kept as hashes: 8 bytes a page, whatever the cursors' length.
#[derive(Debug)]
pub(crate) struct CursorTrail {
    endpoint: String,
    seen: HashSet<u64>,
    hasher: std::collections::hash_map::RandomState,
    pages: u64,
}

impl CursorTrail {
    /// A list of `endpoint` starting at `start` (`None`: the first page).
    pub fn new(endpoint: impl Into<String>, start: Option<&str>) -> Self {
        let mut trail = Self {
            endpoint: endpoint.into(),
            seen: HashSet::new(),
            hasher: Default::default(),
            pages: 0,
        };
        if let Some(cursor) = start {
            trail.seen.insert(trail.hasher.hash_one(cursor));
        }
        trail
    }

    /// A page was read that points to `next`: an error when following it would go round in
    /// a circle or past [`MAX_PAGES`].
    pub fn follow(&mut self, next: &str) -> Result<(), ClientError> {
        self.pages += 1;
        if !self.seen.insert(self.hasher.hash_one(next)) {
            return Err(ClientError::PagingCycle {
                endpoint: self.endpoint.clone(),
                pages: self.pages,
                cursor: crate::model::text::quoted(next),
            });
        }
        if self.pages >= MAX_PAGES {
            return Err(ClientError::TooManyPages {
                endpoint: self.endpoint.clone(),
                pages: self.pages,
            });
        }
        Ok(())
    }
}

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
        let trail = CursorTrail::new(Q::PATH, start.cursor.as_deref());
        stream::try_unfold((Some(start), trail), move |(next, mut trail)| {
            let client = client.clone();
            let query = query.clone();
            async move {
                let Some(paging) = next else {
                    return Ok(None);
                };
                let page = client.list_page(&query, &paging).await?;
                let following = match page.next_cursor() {
                    Some(cursor) => {
                        trail.follow(cursor)?;
                        Some(Paging::after(cursor, paging.limit))
                    }
                    None => None,
                };
                Ok(Some((page, (following, trail))))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_that_comes_back_ends_the_list_naming_it() {
        let mut trail = CursorTrail::new("webhook_registrations", None);
        trail.follow("cur_A").expect("a new cursor");
        trail.follow("cur_B").expect("a new cursor");
        let error = trail.follow("cur_A").expect_err("a circle").to_string();
        assert!(error.contains("webhook_registrations"), "{error}");
        assert!(error.contains("after 3 pages"), "{error}");
        assert!(error.contains("`cur_A`"), "{error}");
    }

    #[test]
    fn a_cursor_that_does_not_move_is_a_circle_too() {
        let mut trail = CursorTrail::new("leads", Some("cur_A"));
        assert!(trail.follow("cur_A").is_err());
    }

    #[test]
    fn a_list_ends_after_the_most_pages_any_account_holds() {
        let mut trail = CursorTrail::new("leads", None);
        for page in 1..MAX_PAGES {
            trail.follow(&page.to_string()).expect("a new cursor");
        }
        let error = trail
            .follow("last")
            .expect_err("too many pages")
            .to_string();
        assert!(
            error.contains(&format!("went past {MAX_PAGES} pages")),
            "{error}"
        );
    }
}
