//! The v2.1 shapes of what the sandbox serves under `/v2`: the list envelope with
//! `pagination`, organizations and leads, and the body of `PUT /leads/{id}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::Kind;

/// The v2.1 list envelope.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct V2Page<T> {
    pub items: Vec<T>,
    pub pagination: V2Pagination,
}

/// `cursor` (null on the last page), `hasNextPage`, and `total`: the size of the whole
/// result set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct V2Pagination {
    pub cursor: Option<String>,
    pub has_next_page: bool,
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct V2Organization {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub name: String,
    pub created_at: String,
}

/// A v2.1 lead: one `groupIds` list (no active/inactive split), no `postalCode`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct V2Lead {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub custom_fields: BTreeMap<String, String>,
    pub global_opted_out: bool,
    pub group_ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follow_up: Option<String>,
    pub organization_id: String,
    pub phone_number: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    pub tag_ids: Vec<String>,
    pub created_at: String,
}

/// PUT /leads/{id}: every field optional; `tagIds` replaces the whole list.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct V2LeadUpdate {
    #[serde(default)]
    pub first_name: Option<String>,
    #[serde(default)]
    pub last_name: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub global_opted_out: Option<bool>,
    #[serde(default)]
    pub notes: Option<String>,
    #[serde(default)]
    pub follow_up: Option<String>,
    #[serde(default)]
    pub tag_ids: Option<Vec<String>>,
}

/// `scope` of GET /groups/{id}/leads: only active leads unless asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum V2GroupScope {
    #[default]
    Active,
    Inactive,
    All,
}
