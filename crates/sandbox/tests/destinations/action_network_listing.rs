//! Action Network's people collection: pages of 25 at most, `_links.next`, the OData filter
//! on `modified_date`, a supporter unsubscribing, and a `next` that never ends.

use outreach_sync_sandbox::DEFAULT_ACTION_NETWORK_KEY;
use serde_json::Value;

use super::common::*;

impl Fakes {
    /// `GET /people` with these query parameters.
    pub(crate) async fn an_list(&self, query: &[(&str, &str)]) -> Answer {
        Self::answer(
            self.http
                .get(format!("{}/people", self.sandbox.action_network_url()))
                .header("OSDI-API-Token", DEFAULT_ACTION_NETWORK_KEY)
                .query(query),
        )
        .await
    }

    /// Every page from the first, following `next` (at most `pages`).
    pub(crate) async fn an_all(&self, filter: &str, pages: usize) -> (Vec<Value>, usize) {
        let mut people = Vec::new();
        let mut answer = self.an_list(&[("filter", filter)]).await;
        let mut fetched = 1;
        loop {
            assert_eq!(answer.status, 200, "{}", answer.body);
            people.extend(
                answer.body["_embedded"]["osdi:people"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
            );
            let Some(next) = answer.body["_links"]["next"]["href"]
                .as_str()
                .map(str::to_owned)
            else {
                return (people, fetched);
            };
            if fetched == pages {
                return (people, fetched);
            }
            answer = Self::answer(
                self.http
                    .get(next)
                    .header("OSDI-API-Token", DEFAULT_ACTION_NETWORK_KEY),
            )
            .await;
            fetched += 1;
        }
    }
}

fn numbers(people: &[Value]) -> Vec<String> {
    people
        .iter()
        .map(|p| {
            p["phone_numbers"][0]["number"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn people_come_25_a_page_with_next_until_the_last() {
    let fakes = Fakes::default().await;
    fakes.sandbox.action_network_seed(30);
    let first = fakes.an_list(&[("per_page", "100")]).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["per_page"], 25, "25 at most");
    assert_eq!(first.body["page"], 1);
    assert_eq!(
        first.body["_embedded"]["osdi:people"]
            .as_array()
            .map(Vec::len),
        Some(25)
    );
    assert!(
        first.body.get("total_pages").is_none(),
        "the people collection has no totals"
    );
    let next = first.body["_links"]["next"]["href"]
        .as_str()
        .expect("a next link");
    assert!(next.contains("page=2"), "{next}");
    let (all, pages) = fakes.an_all("modified_date gt '2000-01-01'", 10).await;
    assert_eq!((all.len(), pages), (30, 2));
    let last = fakes.an_list(&[("page", "2")]).await;
    assert!(last.body["_links"].get("next").is_none(), "{}", last.body);
    assert_eq!(
        last.body["_embedded"]["osdi:people"][0]["phone_numbers"][0]["status"],
        "subscribed"
    );
}

#[tokio::test]
async fn the_filter_finds_who_unsubscribed_or_signed_up_since_a_watermark() {
    let fakes = Fakes::default().await;
    fakes.sandbox.action_network_seed(40);
    let watermark = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (person, created) = fakes
        .sandbox
        .action_network_unsubscribe("+12014000003")
        .expect("a number");
    assert!(!created, "the seeded supporter");
    assert_eq!(person.phone_numbers[0].status, "unsubscribed");
    let signup = fakes.an_signup("12025550143", "unsubscribed").await;
    assert_eq!(signup.status, 200);
    let filter = format!("modified_date gt '{watermark}'");
    let (since, _) = fakes.an_all(&filter, 10).await;
    assert_eq!(numbers(&since), ["12014000003", "12025550143"]);
    assert_eq!(since[0]["phone_numbers"][0]["status"], "unsubscribed");
    let before = format!("modified_date lt '{watermark}' and modified_date gt '2000-01-01'");
    let (earlier, _) = fakes.an_all(&before, 10).await;
    assert_eq!(earlier.len(), 39);
    let over_http = fakes
        .control(
            reqwest::Method::POST,
            "/actionnetwork/unsubscribe",
            Some(serde_json::json!({"phoneNumber": "+12025550177"})),
        )
        .await;
    assert_eq!(over_http.status, 200, "{}", over_http.body);
    assert_eq!(over_http.body["created"], true);
}

#[tokio::test]
async fn a_filter_it_cannot_read_is_400() {
    let fakes = Fakes::default().await;
    for filter in [
        "modified_date after '2026-01-01'",
        "modified_date gt 2026",
        "color eq 'red'",
    ] {
        let answer = fakes.an_list(&[("filter", filter)]).await;
        assert_eq!(answer.status, 400, "{filter}: {}", answer.body);
        assert!(answer.body["error"].is_string(), "{}", answer.body);
    }
}

#[tokio::test]
async fn with_the_fault_next_never_ends() {
    let fakes = Fakes::default().await;
    fakes.sandbox.action_network_seed(3);
    let set = fakes
        .control(
            reqwest::Method::PUT,
            "/actionnetwork/endless_next",
            Some(serde_json::json!({"on": true})),
        )
        .await;
    assert_eq!(set.status, 204);
    let (people, pages) = fakes.an_all("modified_date gt '2000-01-01'", 6).await;
    assert_eq!((people.len(), pages), (3, 6));
    fakes.sandbox.action_network_endless_next(false);
    let (_, pages) = fakes.an_all("modified_date gt '2000-01-01'", 6).await;
    assert_eq!(pages, 1);
}
