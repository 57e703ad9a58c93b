//! The keys of kind `action_network` (Action Network, API v2), a `[[destination]]`'s and a
//! `[[source]]`'s: the common ones alone. Compiled into the settings layer
//! (`crate::settings::kinds::action_network`).

use serde::{Deserialize, Serialize};

use crate::settings::SettingsError;
use crate::settings::destinations::{Foreign, KindSettings, Named};
use crate::settings::kinds::Kind;
use crate::settings::sources::{SourceKind, SourceSettings, validate_polled};

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

    fn validate(&self, source: &SourceSettings, named: Named<'_>) -> Result<(), SettingsError> {
        if let Some(key) = self.foreign.0.first() {
            return Err(SettingsError::invalid(
                "source.kind",
                named(&format!(
                    "`{key}` is not a key of an action_network source (it takes the common keys alone)"
                )),
            ));
        }
        validate_polled(source, named)
    }
}
