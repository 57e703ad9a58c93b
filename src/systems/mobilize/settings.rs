//! The keys of a `[[source]]` of kind `mobilize`: the organization whose people are read
//! (the key is the common `api_key`, sent as a Bearer token). Compiled into the settings
//! layer (`crate::settings::kinds::mobilize`): it imports the model and the settings alone.

use serde::{Deserialize, Serialize};

use crate::settings::SettingsError;
use crate::settings::kinds::{Kind, Named, SourceKind};

/// The keys of a Mobilize source beside the common ones.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MobilizeSettings {
    /// The organization whose people are read: the number in its dashboard's URL
    /// (`mobilize.us/dashboard/{id}`), which the key must be one of.
    #[serde(default)]
    pub organization_id: Option<u64>,
}

impl MobilizeSettings {
    /// The organization's id (checked to be there when the settings were read).
    pub fn organization(&self) -> u64 {
        self.organization_id.unwrap_or_default()
    }
}

impl Kind for MobilizeSettings {
    const KIND: &'static str = "mobilize";
    const KEYS: &'static [&'static str] = &["organization_id"];
}

impl SourceKind for MobilizeSettings {
    fn source(&self) -> crate::model::Source {
        crate::model::Source::Mobilize
    }

    /// An organization, by its number.
    fn validate(&self, _name: &str, named: Named<'_>) -> Result<(), SettingsError> {
        match self.organization_id {
            Some(id) if id > 0 => Ok(()),
            Some(_) => Err(SettingsError::invalid(
                "source.organization_id",
                named("must be the organization's number, above 0"),
            )),
            None => Err(SettingsError::invalid(
                "source.organization_id",
                named(
                    "the organization whose people are read is required (the number in its dashboard's URL)",
                ),
            )),
        }
    }
}
