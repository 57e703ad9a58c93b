//! The lead and the message status as the mirror keeps them: the v3 resources, as far as
//! the daemon reads them.

use serde::Deserialize;
use serde_json::{Map, Value};

/// The Lead resource of the v3 API.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lead {
    pub id: String,
    pub phone_number: String,
    pub organization_id: String,
    #[serde(default)]
    pub active_group_ids: Vec<String>,
    #[serde(default)]
    pub inactive_group_ids: Vec<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub custom_fields: Map<String, Value>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
    pub notes: Option<String>,
    pub follow_up: Option<String>,
    pub email: Option<String>,
    pub postal_code: Option<String>,
    pub phone_number_type: Option<String>,
    #[serde(default)]
    pub tag_ids: Vec<String>,
    pub global_opted_out: bool,
    pub created_at: Option<String>,
    /// The account of the service it is of: the mirror's, never sent by the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
}

/// The Message status resource of the v3 API.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageStatus {
    pub id: String,
    pub thread_id: Option<String>,
    pub status: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub created_at: Option<String>,
    pub error_code: Option<String>,
}

/// `sent` is final as a status class, yet a carrier receipt usually follows it
/// (`delivered`, `undelivered`): a message `sent` within this window is still looked up
/// by the reconciler, and kept in the mirror by retention.
pub const RECEIPT_WINDOW: chrono::Duration = chrono::Duration::hours(72);

/// Statuses after which a message still changes; every other status is terminal.
pub const NON_TERMINAL: &[&str] = &["pending_lookup", "queued"];

pub fn is_terminal(status: &str) -> bool {
    !NON_TERMINAL.contains(&status)
}
