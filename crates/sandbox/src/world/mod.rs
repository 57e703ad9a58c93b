//! The sandbox's state: every resource of the account, in id order (ids grow with creation,
//! so a `BTreeMap` gives stable keyset paging), plus the changes waiting to be announced.

mod activity;
mod leads;
mod messages;
mod seed;
mod webhooks;

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use rand::SeedableRng as _;
use rand::rngs::StdRng;

use crate::wire::{Agent, CustomField, ExternalLead, Group, Integration, Lead, Organization, Tag};
pub use messages::SandboxMessage;
pub(crate) use seed::{PHONE_NUMBERS, SeedPlan};
pub(crate) use webhooks::Registration;

/// A refusal in the service's words: status, message, optional `serviceErrorCode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub message: String,
    pub service_code: Option<&'static str>,
}

impl Refusal {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            service_code: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, message)
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        Self::new(404, format!("{what} {id} not found"))
    }

    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status: 422,
            message: message.into(),
            service_code: Some(code),
        }
    }
}

/// Something to announce by webhook, captured when it happened.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// A lead's `globalOptedOut` flipped; the lead as it is after the change.
    Consent { lead: Lead, at: DateTime<Utc> },
    /// A message got a status (including its first one).
    Message {
        message: SandboxMessage,
        at: DateTime<Utc>,
    },
}

/// An attachment made by `attachLeadToIntegration`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Attachment {
    pub lead_id: String,
    pub integration_id: String,
    pub external: ExternalLead,
}

pub(crate) struct World {
    pub rng: StdRng,
    next_id: u64,
    pub account_sync: bool,
    pub organizations: BTreeMap<String, Organization>,
    pub groups: BTreeMap<String, Group>,
    pub agents: BTreeMap<String, Agent>,
    pub tags: BTreeMap<String, Tag>,
    pub custom_fields: BTreeMap<String, CustomField>,
    pub integrations: BTreeMap<String, Integration>,
    pub leads: BTreeMap<String, Lead>,
    pub messages: BTreeMap<String, SandboxMessage>,
    pub registrations: BTreeMap<String, Registration>,
    pub attachments: Vec<Attachment>,
    /// Changes not yet handed to the deliverer.
    changes: Vec<Change>,
}

impl World {
    pub(crate) fn new(seed: u64, account_sync: bool) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            next_id: 0,
            account_sync,
            organizations: BTreeMap::new(),
            groups: BTreeMap::new(),
            agents: BTreeMap::new(),
            tags: BTreeMap::new(),
            custom_fields: BTreeMap::new(),
            integrations: BTreeMap::new(),
            leads: BTreeMap::new(),
            messages: BTreeMap::new(),
            registrations: BTreeMap::new(),
            attachments: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// A new id: `prefix_` and a zero-padded counter, so id order is creation order.
    pub(crate) fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}_{:08}", self.next_id)
    }

    pub(crate) fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.changes)
    }

    fn record(&mut self, change: Change) {
        self.changes.push(change);
    }

    pub(crate) fn organization(&self, id: &str) -> Result<&Organization, Refusal> {
        self.organizations
            .get(id)
            .ok_or_else(|| Refusal::not_found("organization", id))
    }

    pub(crate) fn lead(&self, id: &str) -> Result<&Lead, Refusal> {
        self.leads
            .get(id)
            .ok_or_else(|| Refusal::not_found("lead", id))
    }

    /// The lead of an organization with a number, if any (the upsert key).
    pub(crate) fn lead_by_phone(&self, organization_id: &str, phone: &str) -> Option<&Lead> {
        self.leads
            .values()
            .find(|l| l.organization_id == organization_id && l.phone_number == phone)
    }
}

/// RFC 3339 with seconds, as the service writes `createdAt`.
pub(crate) fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

pub(crate) fn now() -> String {
    timestamp(Utc::now())
}
