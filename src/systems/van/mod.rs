//! NGP VAN / EveryAction, API v4: each opt-out written as a canvass response ("Do Not
//! Text" by SMS) and as the phone's opt-in status `O` of the person whose VAN ID the lead
//! holds in a custom field.
//!
//! The result code and contact type are looked up by name for the committee the key
//! belongs to (their ids differ between committees), at start, after an `error` ends, and
//! in `destinations check`.

use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::{Api, Body, Destination, Pending, Plan, Step, Stop};

mod changes;
use crate::model::LedgerEntry;
use crate::settings::kinds::van::{VanAction, VanSettings};
pub use changes::Changes;

/// The input type of a canvass response made by an API ("API" in VAN's list).
const INPUT_TYPE_API: i64 = 11;
const CANVASS_RESULT: i64 = 1;
const PHONE_STATUS: i64 = 2;

/// A VAN committee, reached with one API key.
pub struct Van {
    application_name: String,
    database_mode: u8,
    van_id_field: String,
    result_code: String,
    contact_type: String,
    actions: Vec<VanAction>,
    /// The committee's ids of `result_code` and `contact_type`, once looked up.
    ids: Mutex<Option<Ids>>,
}

#[derive(Debug, Clone, Copy)]
struct Ids {
    result_code: i64,
    contact_type: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResultCode {
    result_code_id: i64,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContactType {
    contact_type_id: i64,
    name: String,
}

impl Van {
    pub fn new(van: &VanSettings) -> Self {
        Self {
            application_name: van.application_name().to_owned(),
            database_mode: van.database_mode(),
            van_id_field: van.van_id_field().to_owned(),
            result_code: van.result_code().to_owned(),
            contact_type: van.contact_type().to_owned(),
            actions: van.actions(),
            ids: Mutex::new(None),
        }
    }

    /// Looks up the result code's and contact type's ids by name (case-insensitive).
    async fn look_up(&self, api: Api<'_>) -> Result<(), Stop> {
        let path = "/canvassResponses/resultCodes";
        let codes: Vec<ResultCode> = api.get_json(path, path).await?;
        let path = "/canvassResponses/contactTypes";
        let types: Vec<ContactType> = api.get_json(path, path).await?;
        let named = |name: &str, wanted: &str| name.trim().eq_ignore_ascii_case(wanted.trim());
        let result_code = codes
            .iter()
            .find(|c| named(&c.name, &self.result_code))
            .map(|c| c.result_code_id);
        let contact_type = types
            .iter()
            .find(|t| named(&t.name, &self.contact_type))
            .map(|t| t.contact_type_id);
        let mut missing = Vec::new();
        if result_code.is_none() {
            missing.push(format!("no result code named {:?}", self.result_code));
        }
        if contact_type.is_none() {
            missing.push(format!("no contact type named {:?}", self.contact_type));
        }
        let (Some(result_code), Some(contact_type)) = (result_code, contact_type) else {
            return Err(Stop::Lookup(format!(
                "{} in this committee",
                missing.join(" and ")
            )));
        };
        if let Ok(mut ids) = self.ids.lock() {
            *ids = Some(Ids {
                result_code,
                contact_type,
            });
        }
        Ok(())
    }
}

/// VAN's words in an error body: `errors[].text`, each with the properties it names.
fn error_words(body: &serde_json::Value) -> Option<String> {
    let errors = body.get("errors")?.as_array()?;
    let texts: Vec<String> = errors
        .iter()
        .filter_map(|e| {
            let text = e.get("text").and_then(|t| t.as_str())?;
            let properties = e
                .get("properties")
                .and_then(|p| p.as_array())
                .map(|p| {
                    p.iter()
                        .filter_map(|p| p.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .filter(|p| !p.is_empty());
            Some(match properties {
                Some(p) => format!("{text} ({p})"),
                None => text.to_owned(),
            })
        })
        .collect();
    (!texts.is_empty()).then(|| texts.join("; "))
}

/// HTTP Basic, as VAN takes it: the application's name, and the key with the database mode
/// after `|`.
fn basic(
    request: reqwest::RequestBuilder,
    application_name: &str,
    key: &SecretString,
    database_mode: u8,
) -> reqwest::RequestBuilder {
    let credentials = format!("{application_name}:{}|{database_mode}", key.expose_secret());
    let value = super::http::sensitive(&format!("Basic {}", STANDARD.encode(credentials)));
    request.header(reqwest::header::AUTHORIZATION, value)
}

impl Destination for Van {
    fn authorize(
        &self,
        request: reqwest::RequestBuilder,
        key: &SecretString,
    ) -> reqwest::RequestBuilder {
        basic(request, &self.application_name, key, self.database_mode)
    }

    /// VAN finds people by the VAN ID their lead holds.
    fn needs_lead(&self) -> bool {
        true
    }

    /// Whether the ids are looked up.
    fn ready(&self) -> bool {
        self.ids.lock().is_ok_and(|ids| ids.is_some())
    }

    /// Forgets the ids: they are looked up again before the next entry.
    fn forget(&self) {
        if let Ok(mut ids) = self.ids.lock() {
            *ids = None;
        }
    }

    fn prepare<'a>(&'a self, api: Api<'a>) -> Pending<'a, Result<(), Stop>> {
        Box::pin(self.look_up(api))
    }

    fn error_words(&self, body: &serde_json::Value) -> Option<String> {
        error_words(body)
    }

    /// What is sent for `entry` (an opt-out: the configured actions; an opt-in: the phone's
    /// status alone), given the mirror's lead of it; an `Err` is why nothing can be. The
    /// person is the VAN ID with the number: a phone's status is the phone's own.
    fn plan(&self, entry: &LedgerEntry, lead: Option<&serde_json::Value>) -> Result<Plan, String> {
        let Some(lead) = lead else {
            return Err("no lead in the mirror".to_owned());
        };
        let van_id = van_id(lead, &self.van_id_field)?;
        let (prefix, national) = crate::model::phone::dialing(&entry.phone_number)
            .map_err(|error| format!("the number: {error}"))?;
        let ids = self
            .ids
            .lock()
            .ok()
            .and_then(|ids| *ids)
            .ok_or_else(|| "the committee's ids are not looked up".to_owned())?;
        let mut steps = Vec::new();
        let canvass = entry.opted_out && self.actions.contains(&VanAction::CanvassResult);
        if canvass {
            steps.push(Step {
                bit: CANVASS_RESULT,
                action: "canvass_result",
                path: format!("/people/{van_id}/canvassResponses"),
                body: Body::Json(json!({
                    "canvassContext": {
                        "contactTypeId": ids.contact_type,
                        "inputTypeId": INPUT_TYPE_API,
                        "dateCanvassed": entry.occurred_at,
                        "phone": {"dialingPrefix": prefix, "phoneNumber": national},
                    },
                    "resultCodeId": ids.result_code,
                    "responses": null,
                })),
            });
        }
        if self.actions.contains(&VanAction::PhoneStatus) || !entry.opted_out {
            steps.push(Step {
                bit: PHONE_STATUS,
                action: "phone_status",
                path: format!("/people/{van_id}"),
                body: Body::Json(json!({
                    "vanId": van_id,
                    "phones": [{
                        "dialingPrefix": prefix,
                        "phoneNumber": national,
                        "phoneType": "C",
                        "phoneOptInStatus": if entry.opted_out { "O" } else { "I" },
                    }],
                })),
            });
        }
        Ok(Plan {
            person: format!("{van_id} {}", entry.phone_number),
            steps,
        })
    }
}

/// The VAN ID the lead holds in its custom field `field`: a positive integer.
fn van_id(lead: &serde_json::Value, field: &str) -> Result<u64, String> {
    let value = lead
        .get("customFields")
        .and_then(|fields| fields.get(field))
        .filter(|v| !v.is_null());
    let Some(value) = value else {
        return Err(format!("no VAN ID: the lead has no custom field {field:?}"));
    };
    let text = match value {
        serde_json::Value::String(text) => text.trim().to_owned(),
        other => other.to_string(),
    };
    match text.parse::<u64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(format!(
            "no VAN ID: the custom field {field:?} holds {}, not a VAN ID",
            crate::model::text::quoted(&text)
        )),
    }
}

impl std::fmt::Debug for Van {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Van")
            .field("result_code", &self.result_code)
            .field("contact_type", &self.contact_type)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_van_id_is_a_positive_integer_in_the_named_field() {
        let lead = json!({"customFields": {"VanID": "12345", "Other": "x"}});
        assert_eq!(van_id(&lead, "VanID"), Ok(12345));
        let error = van_id(&lead, "Missing").expect_err("no field");
        assert!(error.contains("no custom field \"Missing\""), "{error}");
        let lead = json!({"customFields": {"VanID": "12a"}});
        assert!(
            van_id(&lead, "VanID")
                .expect_err("not a number")
                .contains("not a VAN ID")
        );
        let lead = json!({"customFields": {"VanID": "0"}});
        assert!(van_id(&lead, "VanID").is_err());
    }

    #[test]
    fn the_key_does_not_show_in_debug() {
        let settings = crate::settings::DestinationSettings::new(
            "van",
            crate::settings::SystemSettings::Van(VanSettings::default()),
            "http://127.0.0.1:9/v4",
            "van-secret-key-42",
        );
        let keys =
            crate::settings::Live::new(crate::settings::keys_of(std::slice::from_ref(&settings)));
        let record = super::super::Record::new(&settings, keys);
        let shown = format!("{record:?}");
        assert!(shown.contains("Van"), "{shown}");
        assert!(!shown.contains("van-secret-key-42"), "{shown}");
    }

    #[test]
    fn vans_own_words_are_its_errors_texts_with_their_properties() {
        let van = Van::new(&VanSettings::default());
        let body = r#"{"errors":[{"code":"INVALID_PARAMETER","text":"'resultCodeId' and 'responses' cannot both be specified","properties":["resultCodeId"]}]}"#;
        assert_eq!(
            super::super::http::words(body, &van),
            "'resultCodeId' and 'responses' cannot both be specified (resultCodeId)"
        );
        assert_eq!(super::super::http::words("  oops\n", &van), "oops");
        let long = "x".repeat(10_000);
        assert!(super::super::http::words(&long, &van).chars().count() <= 201);
    }
}
