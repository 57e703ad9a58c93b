//! Action Network, API v2: each opt-out written through the person signup helper as the
//! person's mobile number, unsubscribed (`subscribed` for an opt-in). Action Network
//! matches the person by the number itself, so no lead is needed.

use secrecy::{ExposeSecret as _, SecretString};
use serde_json::json;

use super::answer::{Plan, Step};
use crate::model::LedgerEntry;
use crate::settings::DestinationSettings;

const PERSON: i64 = 1;

/// An Action Network group, reached with its API key.
pub struct ActionNetwork {
    base_url: String,
}

impl ActionNetwork {
    pub fn new(settings: &DestinationSettings) -> Self {
        Self {
            base_url: settings.base_url.trim_end_matches('/').to_owned(),
        }
    }

    pub(super) fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: &SecretString,
    ) -> reqwest::RequestBuilder {
        let mut value = reqwest::header::HeaderValue::from_str(key.expose_secret())
            .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static(""));
        value.set_sensitive(true);
        request.header("OSDI-API-Token", value)
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// The one request of `entry`: its number, its status. The person is the number.
    pub(super) fn plan(&self, entry: &LedgerEntry) -> Result<Plan, String> {
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
            body: json!({
                "person": {
                    "phone_numbers": [{
                        "number": number,
                        "number_type": "Mobile",
                        "status": status,
                    }],
                },
            }),
        }];
        Ok(Plan {
            person: entry.phone_number.clone(),
            steps,
        })
    }
}

impl std::fmt::Debug for ActionNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActionNetwork")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}
