//! Simulated message traffic: messages to leads and their status progression
//! (`pending_lookup`/`queued` -> `sent` -> `delivered`/`failed`/`undelivered`).

use chrono::Utc;
use rand::Rng as _;
use serde::{Deserialize, Serialize};

use super::{Change, Refusal, World};
use crate::wire::{MessageStatus, MessageType};

/// A message as the sandbox keeps it: the Message status resource plus whom it went to.
/// Serialized, it is exactly the `data` of a `messageStatus-v1` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxMessage {
    pub id: String,
    pub thread_id: String,
    pub status: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub created_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    pub lead_id: String,
    pub organization_id: String,
}

impl SandboxMessage {
    /// The Message status resource (GET /messages/{id}).
    pub fn status_resource(&self) -> MessageStatus {
        MessageStatus {
            id: self.id.clone(),
            thread_id: self.thread_id.clone(),
            status: self.status.clone(),
            kind: self.kind,
            created_at: self.created_at.clone(),
            error_code: self.error_code.clone(),
        }
    }

    /// Whether a later step may still change the status (`sent` still becomes delivered or
    /// undelivered, as carriers report back).
    pub(crate) fn can_advance(&self) -> bool {
        matches!(self.status.as_str(), "pending_lookup" | "queued" | "sent")
    }
}

/// Carrier error codes for undelivered messages.
const CARRIER_CODES: [&str; 4] = ["30003", "30005", "30006", "30007"];

impl World {
    /// Sends a message to a lead. A number of unknown type starts with a lookup.
    pub(crate) fn send_message(
        &mut self,
        lead_id: &str,
        kind: MessageType,
    ) -> Result<SandboxMessage, Refusal> {
        let lead = self.lead(lead_id)?.clone();
        if lead.global_opted_out {
            return Err(Refusal::unprocessable(
                "LEAD_OPTED_OUT",
                format!("lead {lead_id} is opted out and receives no messages"),
            ));
        }
        let thread_id = self
            .messages
            .values()
            .find(|m| m.lead_id == lead_id)
            .map(|m| m.thread_id.clone())
            .unwrap_or_else(|| self.id("thr"));
        let status = if lead.phone_number_type.is_none() {
            "pending_lookup"
        } else {
            "queued"
        };
        let message = SandboxMessage {
            id: self.id("msg"),
            thread_id,
            status: status.into(),
            kind,
            created_at: super::now(),
            error_code: None,
            lead_id: lead.id.clone(),
            organization_id: lead.organization_id.clone(),
        };
        self.messages.insert(message.id.clone(), message.clone());
        self.record(Change::Message {
            message: message.clone(),
            at: Utc::now(),
        });
        Ok(message)
    }

    /// Moves each named message (every advanceable one if `ids` is empty) one step on.
    /// Returns the messages that changed.
    pub(crate) fn advance_messages(&mut self, ids: &[String]) -> Vec<SandboxMessage> {
        let chosen: Vec<String> = if ids.is_empty() {
            self.messages
                .values()
                .filter(|m| m.can_advance())
                .map(|m| m.id.clone())
                .collect()
        } else {
            ids.to_vec()
        };
        let mut changed = Vec::new();
        for id in chosen {
            if let Some(message) = self.advance_one(&id) {
                changed.push(message);
            }
        }
        changed
    }

    fn advance_one(&mut self, id: &str) -> Option<SandboxMessage> {
        let status = self
            .messages
            .get(id)
            .filter(|m| m.can_advance())?
            .status
            .clone();
        let roll: f64 = self.rng.gen_range(0.0..1.0);
        let (next, error) = match status.as_str() {
            "pending_lookup" if roll < 0.05 => ("failed", Some("lookup_timeout".to_owned())),
            "pending_lookup" if roll < 0.12 => ("failed", Some("not_textable".to_owned())),
            "pending_lookup" => ("queued", None),
            "queued" if roll < 0.04 => ("failed", Some(CARRIER_CODES[0].to_owned())),
            "queued" => ("sent", None),
            _ if roll < 0.10 => {
                let code = CARRIER_CODES[self.rng.gen_range(0..CARRIER_CODES.len())];
                ("undelivered", Some(code.to_owned()))
            }
            _ => ("delivered", None),
        };
        let message = self.messages.get_mut(id)?;
        message.status = next.into();
        message.error_code = error;
        let message = message.clone();
        self.record(Change::Message {
            message: message.clone(),
            at: Utc::now(),
        });
        Some(message)
    }
}
