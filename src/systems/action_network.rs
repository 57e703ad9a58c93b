//! Action Network, API v2: each opt-out written through the person signup helper as the
//! person's mobile number, unsubscribed (`subscribed` for an opt-in). Action Network
//! matches the person by the number itself, so no lead is needed.

use secrecy::{ExposeSecret as _, SecretString};
use serde_json::json;

use super::{Api, Destination, Pending, Plan, Step, Stop};
use crate::model::LedgerEntry;
use crate::settings::destinations::action_network::ActionNetworkSettings;

const PERSON: i64 = 1;

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
        request.header(
            "OSDI-API-Token",
            super::http::sensitive(key.expose_secret()),
        )
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
        body.get("error")?.as_str().map(str::to_owned)
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

#[cfg(test)]
mod tests {
    use super::*;

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
