//! What every v3 answer shares: the list envelope, the error body, the resource kinds and
//! the documented enumerations.

use serde::{Deserialize, Serialize};

/// The list envelope of every v3 list: all three fields are required, and `cursor` is null
/// when no items were returned for the last cursor.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Page<T> {
    pub items: Vec<T>,
    pub cursor: Option<String>,
    pub has_more: bool,
}

/// The error response: `code` (usually the HTTP status), `message`, and sometimes (generally
/// with 422) `serviceErrorCode`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ErrorBody {
    pub code: u16,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_error_code: Option<&'static str>,
}

/// The `type` constant every resource carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Agent,
    CustomField,
    Group,
    Integration,
    Lead,
    Organization,
    Tag,
    WebhookRegistration,
}

/// `countryCode` of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum CountryCode {
    US,
    CA,
    PR,
}

/// `agentVisibility` of a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum AgentVisibility {
    /// Agents see and collect it while messaging (the default use).
    #[serde(rename = "LEAD_PROFILES")]
    LeadProfiles,
    /// Shown only when an agent opts a contact out.
    #[serde(rename = "OPT_OUT")]
    OptOut,
    /// Admins only.
    #[serde(rename = "NEVER")]
    Never,
}

/// `phoneNumberType` of a lead; absent for older leads and leads not messaged recently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhoneNumberType {
    Mobile,
    Landline,
    Voip,
    Invalid,
    Blacklisted,
}

/// `type` of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MessageType {
    SMS,
    MMS,
}

/// `integrationType`, in the document's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum IntegrationType {
    FundraisingA,
    FundraisingB,
    CrmA,
    AdvocacyA,
    CrmBManagedPackage,
    VoterFileA,
    VoterFileAAlt,
    Webhook,
}

impl IntegrationType {
    /// The token on the wire.
    pub(crate) fn token(self) -> &'static str {
        match self {
            Self::FundraisingA => "fundraising_a",
            Self::FundraisingB => "fundraising_b",
            Self::CrmA => "crm_a",
            Self::AdvocacyA => "advocacy_a",
            Self::CrmBManagedPackage => "crm_b_managed_package",
            Self::VoterFileA => "voter_file_a",
            Self::VoterFileAAlt => "voter_file_a_alt",
            Self::Webhook => "webhook",
        }
    }
}

/// `leadStatusInGroup` of GET /leads: whether `groupId` is matched against the lead's
/// active groups (the default), inactive groups, or both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LeadStatusInGroup {
    #[default]
    Active,
    Inactive,
    All,
}

/// The event kind a webhook registration selects (`config.type`), and the `type` of a
/// delivered event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) enum EventKind {
    #[serde(rename = "consentUpdate-v1")]
    ConsentUpdate,
    #[serde(rename = "messageStatus-v1")]
    MessageStatus,
}

impl EventKind {
    /// The token on the wire.
    pub(crate) fn token(self) -> &'static str {
        match self {
            Self::ConsentUpdate => "consentUpdate-v1",
            Self::MessageStatus => "messageStatus-v1",
        }
    }
}
