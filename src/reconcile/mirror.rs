//! The service's resources in the mirror's form: one observation, whichever API version
//! or endpoint it came from.

use crate::client::{V2Lead, models};
use crate::model::phone::{self, PhoneError};
use crate::model::{Lead, MessageStatus};

/// The service's custom fields (text values) as the mirror keeps them (JSON values).
fn custom_fields_as_json<'a>(
    fields: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> serde_json::Map<String, serde_json::Value> {
    fields
        .into_iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect()
}

/// The mirror's form of a lead fetched from the service, its number as the ledger keeps
/// numbers ([`phone::canonical`]); an error when the number is not one.
pub fn mirror_lead(lead: &models::Lead) -> Result<Lead, PhoneError> {
    Ok(Lead {
        id: lead.id.clone(),
        phone_number: phone::canonical(&lead.phone_number)?,
        organization_id: lead.organization_id.clone(),
        active_group_ids: lead.active_group_ids.clone(),
        inactive_group_ids: lead.inactive_group_ids.clone(),
        custom_fields: custom_fields_as_json(&lead.custom_fields),
        first_name: lead.first_name.clone(),
        last_name: lead.last_name.clone(),
        notes: lead.notes.clone(),
        follow_up: lead.follow_up.clone(),
        email: lead.email.clone(),
        postal_code: lead.postal_code.clone(),
        phone_number_type: lead.phone_number_type.as_ref().and_then(|t| {
            serde_json::to_value(t)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
        }),
        tag_ids: lead.tag_ids.clone(),
        global_opted_out: lead.global_opted_out,
        created_at: Some(lead.created_at.clone()),
        account_id: None,
    })
}

/// The mirror's form of a lead read through v2, the same observation as [`mirror_lead`]'s.
/// v2's Lead has `groupIds` without saying which memberships are active, nor
/// `postalCode` and `phoneNumberType`: its groups are mirrored as active ones and the other
/// two as unknown.
pub fn mirror_v2_lead(lead: &V2Lead) -> Result<Lead, PhoneError> {
    Ok(Lead {
        id: lead.id.clone(),
        phone_number: phone::canonical(&lead.phone_number)?,
        organization_id: lead.organization_id.clone(),
        active_group_ids: lead.group_ids.clone(),
        inactive_group_ids: Vec::new(),
        custom_fields: custom_fields_as_json(&lead.custom_fields),
        first_name: lead.first_name.clone(),
        last_name: lead.last_name.clone(),
        notes: lead.notes.clone(),
        follow_up: lead.follow_up.clone(),
        email: lead.email.clone(),
        postal_code: None,
        phone_number_type: None,
        tag_ids: lead.tag_ids.clone(),
        global_opted_out: lead.global_opted_out,
        created_at: Some(lead.created_at.clone()),
        account_id: None,
    })
}

/// A mirrored lead, or `None` (logged) when its number is not one. The service checks the
/// form of the numbers it takes, so that is a service off its documents; mirroring the lead
/// would put in the ledger a number that no lookup finds.
pub(super) fn kept(lead_id: &str, mirrored: Result<Lead, PhoneError>) -> Option<Lead> {
    mirrored
        .inspect_err(|error| {
            tracing::warn!(lead = lead_id, %error, "lead not mirrored: its phone number is not a number");
        })
        .ok()
}

/// The mirror's form of a message status fetched from the service.
pub fn mirror_status(message: &models::MessageStatus) -> MessageStatus {
    MessageStatus {
        id: message.id.clone(),
        thread_id: Some(message.thread_id.clone()),
        status: message.status.clone(),
        kind: serde_json::to_value(message.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned)),
        created_at: Some(message.created_at.clone()),
        error_code: message.error_code.clone(),
    }
}
