//! Action Network, API v2: each opt-out written through the person signup helper as the
//! person's mobile number, unsubscribed (`subscribed` for an opt-in). Action Network
//! matches the person by the number itself, so no lead is needed. Read back ([`People`]):
//! the people modified since a watermark, their mobile numbers' statuses.

use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::source::{
    Listed, ReadError, ReadRecord, Records, Said, Source, SourceApi, Window, json_page,
    read_listing,
};
use super::{Api, Body, Destination, Pending, Plan, Step, Stop};
use crate::model::LedgerEntry;
use crate::settings::kinds::action_network::ActionNetworkSettings;

const PERSON: i64 = 1;

/// Action Network's words in an error body: `{"error": "..."}`.
fn error_words(body: &serde_json::Value) -> Option<String> {
    body.get("error")?.as_str().map(str::to_owned)
}

/// `request` with the key as Action Network takes it: the `OSDI-API-Token` header.
fn with_token(request: reqwest::RequestBuilder, key: &SecretString) -> reqwest::RequestBuilder {
    request.header(
        "OSDI-API-Token",
        super::http::sensitive(key.expose_secret()),
    )
}

/// An Action Network group, reached with its API key: nothing to keep between requests.
#[derive(Debug)]
pub struct ActionNetwork;

impl ActionNetwork {
    pub fn new(_own: &ActionNetworkSettings) -> Self {
        Self
    }
}

impl Destination for ActionNetwork {
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: &SecretString,
    ) -> reqwest::RequestBuilder {
        with_token(request, key)
    }

    /// The API's entry point answers any valid key; there is nothing to look up.
    fn prepare<'a>(&'a self, api: Api<'a>) -> Pending<'a, Result<(), Stop>> {
        Box::pin(async move {
            api.get_json::<serde_json::Value>("/", "the API entry point")
                .await
                .map(drop)
        })
    }

    /// `{"error": "..."}`.
    fn error_words(&self, body: &serde_json::Value) -> Option<String> {
        error_words(body)
    }

    /// The one request of `entry`: its number, its status. The person is the number.
    fn plan(&self, entry: &LedgerEntry, _lead: Option<&serde_json::Value>) -> Result<Plan, String> {
        let number = entry.phone_number.trim_start_matches('+');
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err("not a number in E.164".to_owned());
        }
        let status = if entry.opted_out {
            "unsubscribed"
        } else {
            "subscribed"
        };
        let steps = vec![Step {
            bit: PERSON,
            action: "person",
            path: "/people".to_owned(),
            body: Body::Json(json!({
                "person": {
                    "phone_numbers": [{
                        "number": number,
                        "number_type": "Mobile",
                        "status": status,
                    }],
                },
            })),
        }];
        Ok(Plan {
            person: entry.phone_number.clone(),
            steps,
        })
    }
}

/// Action Network's people, read back: every person modified since the watermark (an
/// overlap of [`OVERLAP`] behind it), a page at a time by `_links.next`; a mobile number
/// whose `status` is `unsubscribed` is an opt-out, `subscribed` an opt-in.
#[derive(Debug)]
pub struct People;

/// How far behind the watermark a read starts: a person modified in the second a read
/// ended (or listed late) is read again, and recorded once.
pub const OVERLAP: chrono::Duration = chrono::Duration::minutes(5);

/// One page of `GET /people`.
#[derive(Debug, Deserialize)]
struct PeoplePage {
    #[serde(default, rename = "_links")]
    links: Option<Links>,
    #[serde(default, rename = "_embedded")]
    embedded: Option<Embedded>,
}

#[derive(Debug, Deserialize)]
struct Links {
    #[serde(default)]
    next: Option<Href>,
}

#[derive(Debug, Deserialize)]
struct Href {
    href: String,
}

#[derive(Debug, Deserialize)]
struct Embedded {
    #[serde(default, rename = "osdi:people")]
    people: Vec<serde_json::Value>,
}

impl Source for People {
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: &SecretString,
    ) -> reqwest::RequestBuilder {
        with_token(request, key)
    }

    fn error_words(&self, body: &serde_json::Value) -> Option<String> {
        error_words(body)
    }

    /// A page of one person answers any valid key. The people collection gives no count
    /// (Action Network leaves `total_pages` out of it): what the page holds is said.
    fn check<'a>(&'a self, api: SourceApi<'a>) -> Pending<'a, Result<Vec<String>, ReadError>> {
        Box::pin(async move {
            let page: PeoplePage = api.get_json("/people?per_page=1", "the people").await?;
            let some = page.embedded.is_some_and(|e| !e.people.is_empty());
            Ok(vec![if some {
                "the key reads the people (a page of one person answered)".to_owned()
            } else {
                "the key reads the people (none yet)".to_owned()
            }])
        })
    }

    fn read<'a>(
        &'a self,
        api: SourceApi<'a>,
        window: Window,
        out: Records,
    ) -> Pending<'a, Result<DateTime<Utc>, ReadError>> {
        Box::pin(async move {
            let since = (window.from - OVERLAP).format("%Y-%m-%dT%H:%M:%SZ");
            let first = api.url(&format!("/people?filter=modified_date%20gt%20'{since}'"))?;
            read_listing(&api, ("the people", first), &window, &out, |text| {
                let page: PeoplePage = json_page(text, "the people")?;
                let people = page.embedded.map(|e| e.people).unwrap_or_default();
                let items = people
                    .iter()
                    .map(|person| records_of(person, window.region))
                    .collect();
                Ok((items, page.links.and_then(|l| l.next).map(|next| next.href)))
            })
            .await
        })
    }
}

/// A record per mobile number of `person` (a person without one, or without the fields a
/// record needs, is one ignored record).
fn records_of(person: &serde_json::Value, region: crate::model::phone::Region) -> Listed {
    let identifier = person
        .get("identifiers")
        .and_then(|ids| ids.as_array())
        .and_then(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str())
                .find(|id| id.starts_with("action_network:"))
        })
        .or_else(|| person.get("identifier").and_then(|id| id.as_str()))
        .unwrap_or_default()
        .to_owned();
    let modified_text = person
        .get("modified_date")
        .and_then(|m| m.as_str())
        .unwrap_or_default();
    let modified = DateTime::parse_from_rfc3339(modified_text)
        .ok()
        .map(|t| t.with_timezone(&Utc));
    let ignored = |why: &str| ReadRecord {
        key: format!("{identifier}:-:{modified_text}"),
        said: Said::Nothing(why.to_owned()),
        stands_on: person.clone(),
    };
    let Some(occurred_at) = modified else {
        return Listed {
            modified,
            records: vec![ignored("no modified_date in RFC 3339")],
        };
    };
    let phones = person
        .get("phone_numbers")
        .and_then(|p| p.as_array())
        .cloned()
        .unwrap_or_default();
    let mut records = Vec::new();
    for phone in &phones {
        let field = |name: &str| phone.get(name).and_then(|v| v.as_str()).unwrap_or_default();
        let number = field("number");
        let key = format!("{identifier}:{number}:{modified_text}");
        let said = if !field("number_type").eq_ignore_ascii_case("mobile") {
            Said::Nothing("not a mobile number".to_owned())
        } else {
            match (normalized(number, region), field("status")) {
                (Err(why), _) => Said::Nothing(why),
                (Ok(phone_number), "unsubscribed") => Said::Consent {
                    phone_number,
                    opted_out: true,
                    occurred_at,
                },
                (Ok(phone_number), "subscribed") => Said::Consent {
                    phone_number,
                    opted_out: false,
                    occurred_at,
                },
                (Ok(_), other) => Said::Nothing(format!("status {other:?}")),
            }
        };
        let stands_on = json!({
            "identifier": identifier,
            "modifiedDate": modified_text,
            "person": person,
        });
        records.push(ReadRecord {
            key,
            said,
            stands_on,
        });
    }
    if records.is_empty() {
        records.push(ignored("no phone number"));
    }
    Listed { modified, records }
}

/// Action Network's number in E.164: its documented form is country code first without
/// `+` (`442079460958`), read by [`super::source::number_code_first`].
fn normalized(number: &str, region: crate::model::phone::Region) -> Result<String, String> {
    super::source::number_code_first(number, region)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_without_its_country_code_is_one_of_the_region_never_a_foreign_one() {
        let us = crate::model::phone::Region::US;
        let read = |n: &str| normalized(n, us);
        assert_eq!(read("2025550103").as_deref(), Ok("+12025550103"));
        assert_eq!(read("12025550103").as_deref(), Ok("+12025550103"));
        assert_eq!(read("+12025550103").as_deref(), Ok("+12025550103"));
        assert_eq!(read("(202) 555-0103").as_deref(), Ok("+12025550103"));
        assert_eq!(read("442079460958").as_deref(), Ok("+442079460958"));
        assert_eq!(read("+442079460958").as_deref(), Ok("+442079460958"));
        let gb: crate::model::phone::Region = "GB".parse().unwrap();
        assert_eq!(
            normalized("02079460958", gb).as_deref(),
            Ok("+442079460958")
        );
        assert_eq!(
            normalized("00442079460958", gb).as_deref(),
            Ok("+442079460958")
        );
        for invalid in ["555", "", "call me", "+999 123", "00442079460958x"] {
            let error = read(invalid).unwrap_err();
            assert!(error.starts_with("number "), "{invalid}: {error}");
        }
    }

    #[test]
    fn action_networks_own_words_are_its_error() {
        let an = ActionNetwork;
        let words = |body: &str| super::super::http::words(body, &an);
        assert_eq!(words(r#"{"error":"API Key invalid"}"#), "API Key invalid");
        assert_eq!(
            words(r#"{"errors":[{"text":"not its format"}]}"#),
            r#"{"errors":[{"text":"not its format"}]}"#
        );
    }
}
