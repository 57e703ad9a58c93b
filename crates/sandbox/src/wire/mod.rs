//! The service's JSON as the sandbox serves and reads it, written from the API documents
//! (`service-api-v3.md`, `service-api-v2.1.md` and `beyond-the-docs.md`), apart from the
//! daemon's client models on purpose: the client and the sandbox check each other, so a
//! mistake in a wire type is not made twice. Only what the sandbox serves or reads is here:
//! answers are `Serialize`, request bodies `Deserialize`. Public are the types the sandbox's
//! API hands out (leads, organizations, registrations); the rest stays inside.

mod common;
mod requests;
mod resources;
mod token;
mod v2;
mod webhooks;

pub(crate) use common::{
    AgentVisibility, CountryCode, ErrorBody, EventKind, IntegrationType, LeadStatusInGroup, Page,
};
pub use common::{Kind, MessageType, PhoneNumberType};
pub(crate) use requests::*;
pub(crate) use resources::{Agent, Coordinates, CustomField, Group, Integration, Location, Tag};
pub use resources::{Balances, Lead, MessageStatus, Organization};
pub(crate) use token::{Token, TokenGrant};
pub(crate) use v2::*;
pub(crate) use webhooks::{
    CreateWebhookRegistration, DeleteOutcome, Event, MockEvent, MockEventOutcome,
    UpdateWebhookRegistration,
};
pub use webhooks::{Scope, WebhookConfig, WebhookRegistration};
