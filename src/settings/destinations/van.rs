//! The keys of a `[[destination]]` of kind `van` (NGP VAN / EveryAction, API v4).

use serde::{Deserialize, Serialize};

use super::{Foreign, KindSettings, Named, SettingsError};
use crate::model::AccountId;

/// What is written into VAN for each entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VanAction {
    /// A canvass response with the configured result code ("Do Not Text").
    CanvassResult,
    /// The phone's opt-in status (`O`, or `I` for an opt-in).
    PhoneStatus,
}

/// The keys a VAN destination takes beside the common ones; each has a default.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct VanSettings {
    /// The user of HTTP Basic.
    #[serde(default)]
    pub application_name: Option<String>,
    /// 1 (MyCampaign / EveryAction) or 0 (MyVoters), after the key's `|`.
    #[serde(default)]
    pub database_mode: Option<u8>,
    /// The lead's custom field that holds its VAN ID.
    #[serde(default)]
    pub van_id_field: Option<String>,
    /// The canvass result code, by name.
    #[serde(default)]
    pub result_code: Option<String>,
    /// The contact type of the canvass response, by name.
    #[serde(default)]
    pub contact_type: Option<String>,
    /// What is written for each entry.
    #[serde(default)]
    pub actions: Option<Vec<VanAction>>,
    #[serde(flatten)]
    pub(super) foreign: Foreign,
}

/// The keys of kind `van`, for [`Foreign`].
pub(super) const KEYS: &[&str] = &[
    "application_name",
    "database_mode",
    "van_id_field",
    "result_code",
    "contact_type",
    "actions",
];

impl VanSettings {
    pub fn application_name(&self) -> &str {
        self.application_name.as_deref().unwrap_or("outreach-sync")
    }

    pub fn database_mode(&self) -> u8 {
        self.database_mode.unwrap_or(1)
    }

    pub fn van_id_field(&self) -> &str {
        self.van_id_field.as_deref().unwrap_or("VanID")
    }

    pub fn result_code(&self) -> &str {
        self.result_code.as_deref().unwrap_or("Do Not Text")
    }

    pub fn contact_type(&self) -> &str {
        self.contact_type.as_deref().unwrap_or("SMS Text")
    }

    pub fn actions(&self) -> Vec<VanAction> {
        self.actions
            .clone()
            .unwrap_or_else(|| vec![VanAction::CanvassResult, VanAction::PhoneStatus])
    }
}

impl KindSettings for VanSettings {
    fn foreign(&self) -> &Foreign {
        &self.foreign
    }

    fn validate(&self, named: Named<'_>) -> Result<(), SettingsError> {
        if !matches!(self.database_mode(), 0 | 1) {
            return Err(SettingsError::invalid(
                "destination.database_mode",
                named("1 (MyCampaign / EveryAction) or 0 (MyVoters)"),
            ));
        }
        for (key, value) in [
            ("destination.application_name", self.application_name()),
            ("destination.van_id_field", self.van_id_field()),
            ("destination.result_code", self.result_code()),
            ("destination.contact_type", self.contact_type()),
        ] {
            if value.trim().is_empty() {
                return Err(SettingsError::invalid(key, named("must not be empty")));
            }
        }
        if self.actions().is_empty() {
            return Err(SettingsError::invalid(
                "destination.actions",
                named("at least one of canvass_result, phone_status"),
            ));
        }
        Ok(())
    }

    /// A VAN key is one committee's, and a VAN ID means a person only there: with several
    /// accounts served, the destination names its own.
    fn validate_scope(
        &self,
        named: Named<'_>,
        accounts: &[String],
        served: &[AccountId],
    ) -> Result<(), SettingsError> {
        if served.len() > 1 && accounts.is_empty() {
            return Err(SettingsError::invalid(
                "destination.accounts",
                named(&format!(
                    "a van destination must name its accounts when several are served \
                     ({}): its key is one committee's, and a VAN ID means a person \
                     only in that committee, so another account's VAN ID would write into \
                     someone else",
                    served.join(", ")
                )),
            ));
        }
        Ok(())
    }
}
