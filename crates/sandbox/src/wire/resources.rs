//! The v3 resources the sandbox serves, field by field as the document's tables give them
//! (in their order). A field the table marks "no" under Required is left out when absent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{
    AgentVisibility, CountryCode, IntegrationType, Kind, MessageType, PhoneNumberType,
};

/// An agent: contacts leads for an organization, in one group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Agent {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub name: String,
    pub full_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone_number: Option<String>,
    pub organization_id: String,
    pub group_id: String,
    pub created_at: String,
}

/// A custom field: an organization's (or, without `organizationId`, the account's) lead
/// property.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CustomField {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub name: String,
    pub agent_visible: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<String>,
    pub created_at: String,
}

/// A group's location: a human-readable `label` and its coordinates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Location {
    pub label: String,
    pub coordinates: Coordinates,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Coordinates {
    pub lat: f64,
    pub lng: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Group {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub country_code: CountryCode,
    pub active: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    pub organization_id: String,
    /// An IANA zone id, assigned from the location.
    pub timezone: String,
    pub created_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Integration {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub name: String,
    pub integration_type: IntegrationType,
    pub organization_id: String,
    pub created_at: String,
}

/// A lead: a person messages are sent to, identified by `organizationId` + `phoneNumber`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lead {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub phone_number: String,
    pub organization_id: String,
    pub active_group_ids: Vec<String>,
    /// Groups the lead is inactive in: a lead is never removed from a group.
    pub inactive_group_ids: Vec<String>,
    pub custom_fields: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postal_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone_number_type: Option<PhoneNumberType>,
    pub tag_ids: Vec<String>,
    /// When true the lead receives no messages.
    pub global_opted_out: bool,
    pub created_at: String,
}

/// GET /messages/{id}: the delivery status of one message. `status` is an open string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageStatus {
    pub id: String,
    pub thread_id: String,
    pub status: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub created_at: String,
    /// Present when the status is a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Organization {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub name: String,
    /// Ids of the integrations it owns.
    pub integrations: Vec<String>,
    /// Present only when balances are enabled for the organization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balances: Option<Balances>,
    pub created_at: String,
}

/// Remaining SMS, MMS and calls.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Balances {
    pub sms_balance: f64,
    pub mms_balance: f64,
    pub call_balance: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Tag {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<String>,
    pub created_at: String,
    pub agent_visibility: AgentVisibility,
}
