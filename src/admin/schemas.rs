//! The schemas of answers whose Rust form is not a record of their own: the mirror's
//! lead and message, kept as the service's JSON. Each is only described here; the handlers say which they answer.
#![allow(dead_code)]

use crate::model::Lead;

/// Mirrored leads with a number.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct LeadItems {
    items: Vec<Lead>,
}

/// The tracked delivery status of one message, as the service's v3 Message status
/// resource with what the mirror adds.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = Message)]
pub struct MessageRecord {
    id: String,
    thread_id: Option<String>,
    status: String,
    #[serde(rename = "type")]
    kind: Option<String>,
    created_at: Option<String>,
    error_code: Option<String>,
    lead_id: Option<String>,
    organization_id: Option<String>,
    terminal: Option<bool>,
    status_at: Option<String>,
    source: Option<String>,
    updated_at: Option<String>,
    /// The account it is of.
    account_id: String,
}
