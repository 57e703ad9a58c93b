//! PATCH /leads: the operations on one lead, discriminated by `type`.

use serde::{Deserialize, Serialize};

use super::integrations::ExternalLeadObject;

/// `operation` of PATCH /leads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum LeadOperation {
    /// Adds the lead to the group if absent; membership is permanent.
    MakeActiveInGroup {
        group_id: String,
    },
    MakeInactiveInGroup {
        group_id: String,
    },
    AttachLeadToIntegration {
        integration_id: String,
        external: ExternalLeadObject,
    },
    ApplyTag {
        tag_id: String,
    },
    RemoveTag {
        tag_id: String,
    },
    /// The name must exist as a custom field of the lead's organization.
    SetCustomField {
        custom_field_name: String,
        value: String,
    },
    /// `tag_id`, if given, must be a tag with visibility `OPT_OUT`.
    OptOut {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tag_id: Option<String>,
    },
    OptIn,
}

/// Body of PATCH /leads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatchLead {
    pub id: String,
    pub operation: LeadOperation,
}
