//! Webhook registrations, mock events and the delivered event envelope. The registration
//! resource is in the v3 document; its endpoints and mock_event are in
//! `beyond-the-docs.md`; the envelope is the daemon's contract (DESIGN.md, "events
//! accepted"), since the service's own is not published.

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::common::{EventKind, Kind};

/// Which leads a registration covers, discriminated by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Scope {
    /// Leads in the listed organizations.
    #[serde(rename = "organizations", rename_all = "camelCase")]
    Organizations { organization_ids: Vec<String> },
    /// The whole account.
    #[serde(rename = "account")]
    Account,
}

impl Scope {
    /// Whether a lead of `organization_id` is in scope.
    pub(crate) fn covers(&self, organization_id: &str) -> bool {
        match self {
            Self::Account => true,
            Self::Organizations { organization_ids } => {
                organization_ids.iter().any(|id| id == organization_id)
            }
        }
    }
}

/// A registration's `config`, discriminated by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum WebhookConfig {
    /// Consent changes; the two flags choose the directions.
    #[serde(rename = "consentUpdate-v1", rename_all = "camelCase")]
    ConsentUpdate {
        scope: Scope,
        include_opt_out: bool,
        include_opt_in: bool,
    },
    /// Message status changes.
    #[serde(rename = "messageStatus-v1")]
    MessageStatus { scope: Scope },
}

impl WebhookConfig {
    /// Opt-outs and opt-ins of the whole account.
    pub fn all_consent() -> Self {
        Self::ConsentUpdate {
            scope: Scope::Account,
            include_opt_out: true,
            include_opt_in: true,
        }
    }

    /// Message statuses of the whole account.
    pub fn all_messages() -> Self {
        Self::MessageStatus {
            scope: Scope::Account,
        }
    }

    pub(crate) fn kind(&self) -> EventKind {
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
}

/// A registration as answered: `secretForHMAC` only says whether a signing secret is active;
/// the secret is never returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookRegistration {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub target_url: String,
    pub config: WebhookConfig,
    pub created_at: String,
    #[serde(rename = "secretForHMAC")]
    pub secret_for_hmac: bool,
}

/// POST /webhook_registrations: here `secretForHMAC` is the secret itself, chosen by the
/// caller.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CreateWebhookRegistration {
    pub target_url: String,
    #[serde(rename = "secretForHMAC")]
    pub secret_for_hmac: SecretString,
    pub config: WebhookConfig,
}

/// PUT /webhook_registrations/{id}: each field optional (moving the target, rotating the
/// secret).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UpdateWebhookRegistration {
    #[serde(default)]
    pub target_url: Option<String>,
    #[serde(rename = "secretForHMAC", default)]
    pub secret_for_hmac: Option<SecretString>,
    #[serde(default)]
    pub config: Option<WebhookConfig>,
}

/// DELETE /webhook_registrations/{id}.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct DeleteOutcome {
    pub success: bool,
}

/// POST /webhook_registrations/mock_event, discriminated by `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
pub(crate) enum MockEvent {
    /// To an existing registration.
    #[serde(rename = "webhookRegistrationId", rename_all = "camelCase")]
    WebhookRegistrationId { webhook_registration_id: String },
    /// To a registration described in the body.
    #[serde(rename = "mockWebhookRegistration", rename_all = "camelCase")]
    MockWebhookRegistration {
        target_url: String,
        #[serde(rename = "secretForHMAC")]
        secret_for_hmac: SecretString,
        config: WebhookConfig,
    },
}

/// The answer of mock_event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MockEventOutcome {
    pub will_pass_validation: bool,
    pub account_id: String,
}

/// A delivered event: `{"type","id","createdAt","data"}`, in that order.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Event<'a, T> {
    #[serde(rename = "type")]
    pub kind: EventKind,
    pub id: &'a str,
    pub created_at: String,
    pub data: &'a T,
}
