//! The keys of a `[[destination]]` of kind `action_network` (Action Network, API v2): the
//! common ones alone.

use serde::{Deserialize, Serialize};

use super::{Foreign, KindSettings};

/// An Action Network destination takes no key beside the common ones.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ActionNetworkSettings {
    #[serde(flatten)]
    pub(super) foreign: Foreign,
}

/// The keys of kind `action_network`, for [`Foreign`].
pub(super) const KEYS: &[&str] = &[];

impl KindSettings for ActionNetworkSettings {
    fn foreign(&self) -> &Foreign {
        &self.foreign
    }
}
