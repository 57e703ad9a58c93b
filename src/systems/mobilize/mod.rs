//! Mobilize, the events platform campaigns recruit volunteers on: read back only. An
//! organization's people changed since the watermark (`GET
//! /organizations/{id}/people?updated_since=`, Unix seconds, [`OVERLAP`] behind it), a page
//! at a time by `next`; a person whose `sms_opt_in_status` is `OPT_OUT` is an opt-out of
//! each of their numbers, `OPT_IN` an opt-in (recorded only with `opt_ins`).
//!
//! Mobilize's API document: a list is `{"count", "next", "previous", "data"}`; an error is
//! `{"data": null, "error": {...}}`, its object keyed by the parameter at fault or `detail`;
//! a key that does not work is a 403; `modified_date` is Unix seconds; a person's
//! `phone_numbers` are `[{primary, number}]`, the number as it was typed.

use chrono::{DateTime, TimeZone as _, Utc};
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::Pending;
use super::source::{
    Listed, ReadError, ReadRecord, Records, Said, Source, SourceApi, Window, json_page, number_of,
    read_listing,
};
use crate::settings::kinds::mobilize::MobilizeSettings;

/// How far behind the watermark a read starts: a person modified in the second a read
/// ended (or listed late) is read again, and recorded once.
pub const OVERLAP: chrono::Duration = chrono::Duration::minutes(5);

/// People a page asks for: the most Mobilize serves in one.
const PER_PAGE: u32 = 100;

/// An organization's people, read with a key of that organization.
#[derive(Debug)]
pub struct People {
    organization: u64,
}

impl People {
    pub fn new(own: &MobilizeSettings) -> Self {
        Self {
            organization: own.organization(),
        }
    }

    /// The listing's path, from `query`.
    fn path(&self, query: &str) -> String {
        format!("/organizations/{}/people?{query}", self.organization)
    }
}

/// One page of the listing.
#[derive(Debug, Deserialize)]
struct Page {
    #[serde(default)]
    count: Option<u64>,
    #[serde(default)]
    next: Option<String>,
    #[serde(default)]
    data: Vec<serde_json::Value>,
}

impl Source for People {
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: &SecretString,
    ) -> reqwest::RequestBuilder {
        request.header(
            reqwest::header::AUTHORIZATION,
            super::http::sensitive(&format!("Bearer {}", key.expose_secret())),
        )
    }

    /// `{"error": {"detail": "..."}}`, or the parameters at fault: `{"error": {"per_page":
    /// ["..."]}}`.
    fn error_words(&self, body: &serde_json::Value) -> Option<String> {
        let error = body.get("error")?;
        if let Some(detail) = error.get("detail").and_then(|d| d.as_str()) {
            return Some(detail.to_owned());
        }
        let fields = error.as_object()?;
        let words: Vec<String> = fields
            .iter()
            .map(|(field, said)| match said {
                serde_json::Value::Array(lines) => format!(
                    "{field}: {}",
                    lines
                        .iter()
                        .map(|line| line
                            .as_str()
                            .map_or_else(|| line.to_string(), str::to_owned))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                other => format!("{field}: {}", other.as_str().unwrap_or(&other.to_string())),
            })
            .collect();
        (!words.is_empty()).then(|| words.join("; "))
    }

    /// A page of one person answers a key of the organization; the listing's `count` says
    /// how many people it holds.
    fn check<'a>(&'a self, api: SourceApi<'a>) -> Pending<'a, Result<Vec<String>, ReadError>> {
        Box::pin(async move {
            let what = format!("organization {}'s people", self.organization);
            let page: Page = api.get_json(&self.path("per_page=1"), &what).await?;
            Ok(vec![match page.count {
                Some(count) => format!("the key reads {what} ({count} people)"),
                None => format!("the key reads {what}"),
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
            let since = (window.from - OVERLAP).timestamp().max(0);
            let first =
                api.url(&self.path(&format!("updated_since={since}&per_page={PER_PAGE}")))?;
            read_listing(&api, ("the people", first), &window, &out, |text| {
                let page: Page = json_page(text, "the people")?;
                let items = page
                    .data
                    .iter()
                    .map(|person| records_of(person, window.region))
                    .collect();
                Ok((items, page.next))
            })
            .await
        })
    }
}

/// A record per number of `person` (a person without one, or without the fields a record
/// needs, is one ignored record).
fn records_of(person: &serde_json::Value, region: crate::model::phone::Region) -> Listed {
    // `person_id` is `id` in Mobilize's people; either names the person.
    let id = ["id", "person_id"]
        .iter()
        .find_map(|field| person.get(field).and_then(serde_json::Value::as_u64))
        .map(|id| id.to_string())
        .unwrap_or_default();
    let modified_date = person
        .get("modified_date")
        .and_then(serde_json::Value::as_i64);
    let modified = modified_date.and_then(|secs| Utc.timestamp_opt(secs, 0).single());
    let modified_text = modified_date
        .map(|secs| secs.to_string())
        .unwrap_or_default();
    let stands_on = json!({
        "personId": id,
        "modifiedDate": modified_date,
        "person": person,
    });
    let ignored = |why: String| ReadRecord {
        key: format!("{id}:-:{modified_text}"),
        said: Said::Nothing(why),
        stands_on: stands_on.clone(),
    };
    let Some(occurred_at) = modified else {
        return Listed {
            modified,
            records: vec![ignored("no modified_date in Unix seconds".to_owned())],
        };
    };
    let status = person
        .get("sms_opt_in_status")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let opted_out = match status {
        "OPT_OUT" => Some(true),
        "OPT_IN" => Some(false),
        _ => None,
    };
    let numbers: Vec<&str> = person
        .get("phone_numbers")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|phone| phone.get("number").and_then(serde_json::Value::as_str))
        .collect();
    let mut records = Vec::new();
    for number in &numbers {
        let said = match (opted_out, number_of(number, region)) {
            (_, Err(why)) => Said::Nothing(why),
            (Some(opted_out), Ok(phone_number)) => Said::Consent {
                phone_number,
                opted_out,
                occurred_at,
            },
            (None, Ok(_)) => Said::Nothing(format!(
                "sms_opt_in_status {}",
                crate::model::text::quoted(status)
            )),
        };
        records.push(ReadRecord {
            // The status too: a person seeded and opted out within one second (Mobilize's
            // times are whole seconds) is two records, not one read twice.
            key: format!(
                "{id}:{}:{modified_text}:{}",
                crate::model::text::bounded(number, 40),
                crate::model::text::bounded(status, 20)
            ),
            said,
            stands_on: stands_on.clone(),
        });
    }
    if records.is_empty() {
        records.push(ignored("no phone number".to_owned()));
    }
    Listed { modified, records }
}

#[cfg(test)]
mod tests;
