//! The keys of kind `action_network` (Action Network, API v2), a `[[destination]]`'s and a
//! `[[source]]`'s: the common ones alone. Compiled into the settings layer
//! (`crate::settings::kinds::action_network`).

use serde::{Deserialize, Serialize};

use crate::settings::SettingsError;
use crate::settings::kinds::{Foreign, Kind, KindSettings, Named, SourceKind};

/// An Action Network destination or source takes no key beside the common ones.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ActionNetworkSettings {
    #[serde(flatten)]
    pub foreign: Foreign,
}

impl Kind for ActionNetworkSettings {
    const KIND: &'static str = "action_network";
    const KEYS: &'static [&'static str] = &[];
}

impl KindSettings for ActionNetworkSettings {
    fn foreign(&self) -> &Foreign {
        &self.foreign
    }
}

impl SourceKind for ActionNetworkSettings {
    fn source(&self) -> crate::model::Source {
        crate::model::Source::ActionNetwork
    }

    fn validate(&self, _name: &str, named: Named<'_>) -> Result<(), SettingsError> {
        match self.foreign.0.first() {
            Some(key) => Err(SettingsError::invalid(
                "source.kind",
                named(&format!(
                    "`{key}` is not a key of an action_network source (it takes the common keys alone)"
                )),
            )),
            None => Ok(()),
        }
    }
}
