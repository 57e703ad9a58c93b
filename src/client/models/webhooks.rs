//! Webhook registrations (beyond the v3 document: see `spec/beyond-the-docs.md`) and the
//! event envelope the sandbox delivers and the daemon accepts.

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::common::EventKind;
use super::integrations::expose;

/// Which leads a registration covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Scope {
    #[serde(rename_all = "camelCase")]
    Organizations {
        organization_ids: Vec<String>,
    },
    Account,
}

impl Scope {
    pub fn covers(&self, organization_id: &str) -> bool {
        match self {
            Scope::Account => true,
            Scope::Organizations { organization_ids } => {
                organization_ids.iter().any(|id| id == organization_id)
            }
        }
    }
}

/// What a registration receives, discriminated by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum WebhookConfig {
    #[serde(rename = "consentUpdate-v1", rename_all = "camelCase")]
    ConsentUpdate {
        scope: Scope,
        include_opt_out: bool,
        include_opt_in: bool,
    },
    #[serde(rename = "messageStatus-v1")]
    MessageStatus { scope: Scope },
}

impl WebhookConfig {
    pub fn kind(&self) -> EventKind {
        match self {
            Self::ConsentUpdate { .. } => EventKind::ConsentUpdate,
            Self::MessageStatus { .. } => EventKind::MessageStatus,
        }
    }

    pub fn scope(&self) -> &Scope {
        match self {
            Self::ConsentUpdate { scope, .. } | Self::MessageStatus { scope } => scope,
        }
    }

    /// Consent updates of both directions, for the whole account.
    pub fn all_consent() -> Self {
        Self::ConsentUpdate {
            scope: Scope::Account,
            include_opt_out: true,
            include_opt_in: true,
        }
    }

    /// Message statuses for the whole account.
    pub fn all_messages() -> Self {
        Self::MessageStatus {
            scope: Scope::Account,
        }
    }
}

/// A registration as the service returns it: `secretForHMAC` only says whether a secret is
/// active; the secret itself is never returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookRegistration {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub target_url: String,
    pub config: WebhookConfig,
    pub created_at: String,
    #[serde(rename = "secretForHMAC")]
    pub secret_for_hmac: bool,
}

/// Body of POST /webhook_registrations.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateWebhookRegistration {
    pub target_url: String,
    #[serde(rename = "secretForHMAC", serialize_with = "expose")]
    pub secret_for_hmac: SecretString,
    pub config: WebhookConfig,
}

/// Body of PUT /webhook_registrations/{id}: how a secret is rotated or the target moved.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateWebhookRegistration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_url: Option<String>,
    #[serde(
        rename = "secretForHMAC",
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "expose_opt"
    )]
    pub secret_for_hmac: Option<SecretString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<WebhookConfig>,
}

fn expose_opt<S: serde::Serializer>(
    secret: &Option<SecretString>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match secret {
        Some(secret) => expose(secret, s),
        None => s.serialize_none(),
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListWebhookRegistrations {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_type: Option<EventKind>,
}

/// Answer of DELETE /webhook_registrations/{id}.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteOutcome {
    pub success: bool,
}

/// Body of POST /webhook_registrations/mock_event.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum MockEvent {
    #[serde(rename_all = "camelCase")]
    WebhookRegistrationId { webhook_registration_id: String },
    #[serde(rename_all = "camelCase")]
    MockWebhookRegistration {
        target_url: String,
        #[serde(rename = "secretForHMAC", serialize_with = "expose")]
        secret_for_hmac: SecretString,
        config: WebhookConfig,
    },
}

/// Answer of POST /webhook_registrations/mock_event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MockEventOutcome {
    pub will_pass_validation: bool,
    pub account_id: String,
}

/// The envelope of a delivered event (DESIGN.md, "events accepted").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventEnvelope {
    #[serde(rename = "type")]
    pub kind: EventKind,
    pub id: String,
    pub created_at: String,
    pub data: serde_json::Value,
}
