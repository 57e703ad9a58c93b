//! The keys of kind `van` (NGP VAN / EveryAction, API v4), a `[[destination]]`'s and a
//! `[[source]]`'s: one struct, each key written once; a source takes the keys it reads with
//! and refuses the ones only writing uses. Compiled into the settings layer
//! (`crate::settings::kinds::van`).

use serde::{Deserialize, Serialize};

use crate::model::AccountId;
use crate::settings::SettingsError;
use crate::settings::kinds::{Foreign, Kind, KindSettings, Named, SourceKind};

/// What is written into VAN for each entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VanAction {
    /// A canvass response with the configured result code ("Do Not Text").
    CanvassResult,
    /// The phone's opt-in status (`O`, or `I` for an opt-in).
    PhoneStatus,
}

/// The keys a VAN destination or source takes beside the common ones; each has a default.
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
    pub foreign: Foreign,
}

impl Kind for VanSettings {
    const KIND: &'static str = "van";
    const KEYS: &'static [&'static str] = &[
        "application_name",
        "database_mode",
        "van_id_field",
        "result_code",
        "contact_type",
        "actions",
    ];
}

/// The keys a VAN source takes (what it reads with): the others are a destination's alone.
const SOURCE_KEYS: &[&str] = &["application_name", "database_mode", "result_code"];

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
        self.validate_common(named, "destination")?;
        for (key, value) in [
            ("destination.van_id_field", self.van_id_field()),
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

impl VanSettings {
    /// The keys both a source and a destination take: `table` names the table in errors.
    fn validate_common(&self, named: Named<'_>, table: &str) -> Result<(), SettingsError> {
        let key = |name: &str| -> &'static str {
            match (table, name) {
                ("source", "database_mode") => "source.database_mode",
                ("source", _) => "source.result_code",
                (_, "database_mode") => "destination.database_mode",
                (_, "application_name") => "destination.application_name",
                _ => "destination.result_code",
            }
        };
        if !matches!(self.database_mode(), 0 | 1) {
            return Err(SettingsError::invalid(
                key("database_mode"),
                named("1 (MyCampaign / EveryAction) or 0 (MyVoters)"),
            ));
        }
        for (name, value) in [
            ("application_name", self.application_name()),
            ("result_code", self.result_code()),
        ] {
            if value.trim().is_empty() {
                let message = match table {
                    "source" => "result_code and application_name must not be empty",
                    _ => "must not be empty",
                };
                return Err(SettingsError::invalid(key(name), named(message)));
            }
        }
        Ok(())
    }
}

impl SourceKind for VanSettings {
    fn source(&self) -> crate::model::Source {
        crate::model::Source::Van
    }

    fn validate(&self, _name: &str, named: Named<'_>) -> Result<(), SettingsError> {
        let given = [
            ("van_id_field", self.van_id_field.is_some()),
            ("contact_type", self.contact_type.is_some()),
            ("actions", self.actions.is_some()),
        ];
        let written = given.iter().find(|(_, set)| *set).map(|(key, _)| *key);
        if let Some(key) = written.or(self.foreign.0.first().map(String::as_str)) {
            let takes = SOURCE_KEYS.join(", ");
            return Err(SettingsError::invalid(
                "source.kind",
                named(&format!(
                    "`{key}` is not a key of a van source (it takes {takes} beside the common keys)"
                )),
            ));
        }
        self.validate_common(named, "source")
    }
}
