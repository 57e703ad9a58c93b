//! Shapes shared by every v3 resource: the list envelope, the error body, enumerations.

use serde::{Deserialize, Serialize};

/// One page of a v3 list: `items`, `cursor` (null when the last cursor returned nothing),
/// `hasMore`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPage<T> {
    pub items: Vec<T>,
    pub cursor: Option<String>,
    pub has_more: bool,
}

impl<T> ListPage<T> {
    /// The cursor of the next page, if the service says there is one.
    pub fn next_cursor(&self) -> Option<&str> {
        if self.has_more {
            self.cursor.as_deref()
        } else {
            None
        }
    }
}

/// Where a page starts and how long it is. `limit` must be 1..=1000 (checked before sending).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paging {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

impl Paging {
    pub fn first(limit: Option<u32>) -> Self {
        Self {
            cursor: None,
            limit,
        }
    }

    pub fn after(cursor: impl Into<String>, limit: Option<u32>) -> Self {
        Self {
            cursor: Some(cursor.into()),
            limit,
        }
    }
}

/// The service's error body. `message` is kept as text even when the service sends another
/// JSON type (the v2.1 document types it as Boolean).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_error_code: Option<String>,
}

impl ErrorBody {
    pub fn new(code: u16, message: impl Into<String>) -> Self {
        Self {
            code: i64::from(code),
            message: message.into(),
            service_error_code: None,
        }
    }

    pub fn with_service_code(mut self, code: impl Into<String>) -> Self {
        self.service_error_code = Some(code.into());
        self
    }

    /// Reads an error body leniently: any JSON object with whatever of the three fields it
    /// has; anything else becomes the message (cut short, it is only for humans).
    pub fn parse_lenient(status: u16, bytes: &[u8]) -> Self {
        let fallback = || {
            let text = String::from_utf8_lossy(bytes);
            let text: String = text.chars().take(300).collect();
            ErrorBody::new(status, text)
        };
        let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(bytes) else {
            return fallback();
        };
        let code = map
            .get("code")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(i64::from(status));
        let message = match map.get("message") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let service_error_code = match map.get("serviceErrorCode") {
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(serde_json::Value::Null) | None => None,
            Some(other) => Some(other.to_string()),
        };
        Self {
            code,
            message,
            service_error_code,
        }
    }
}

/// Countries a group can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CountryCode {
    US,
    CA,
    PR,
}

/// A group's location: used by the service to pick the timezone and hours of operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Location {
    pub label: String,
    pub coordinates: Coordinates,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Coordinates {
    pub lat: f64,
    pub lng: f64,
}

/// Who sees a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AgentVisibility {
    /// Default use: agents see and collect it while messaging.
    LeadProfiles,
    /// Shown only when an agent opts a contact out.
    OptOut,
    /// Admins only.
    Never,
}

/// What the service knows about a lead's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhoneNumberType {
    Mobile,
    Landline,
    Voip,
    Invalid,
    Blacklisted,
}

/// Message kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MessageType {
    SMS,
    MMS,
}

/// Integration kinds, in the document's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntegrationType {
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
    pub fn as_str(self) -> &'static str {
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

/// `leadStatusInGroup` of GET /leads: which memberships `groupId` is matched against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeadStatusInGroup {
    #[default]
    Active,
    Inactive,
    All,
}

/// The two event kinds a webhook registration can select.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    #[serde(rename = "consentUpdate-v1")]
    ConsentUpdate,
    #[serde(rename = "messageStatus-v1")]
    MessageStatus,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConsentUpdate => "consentUpdate-v1",
            Self::MessageStatus => "messageStatus-v1",
        }
    }
}
