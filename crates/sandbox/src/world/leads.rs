//! Lead rules of the v3 document: upsert (200 vs 201, group rules), the PATCH operations,
//! the group-membership state machine and consent with account sync.

use chrono::Utc;

use super::{Attachment, Change, Refusal, World};
use crate::validate;
use crate::wire::{AgentVisibility, ExternalLead, Kind, Lead, LeadOperation, LeadUpsert, Tag};

impl World {
    /// POST /leads. Returns the lead and whether it was created.
    pub(crate) fn upsert_lead(&mut self, body: LeadUpsert) -> Result<(Lead, bool), Refusal> {
        if !validate::is_phone(&body.phone_number) {
            return Err(Refusal::bad_request(format!(
                "phoneNumber `{}` does not match the PHONE pattern",
                body.phone_number
            )));
        }
        self.organization(&body.organization_id)?;
        let org = body.organization_id.clone();
        // Rule 3: every group named must be of the lead's organization.
        for group_id in body
            .active_group_ids
            .iter()
            .chain(body.inactive_group_ids.iter())
            .flatten()
        {
            self.group_of(&org, group_id)?;
        }
        for tag_id in body.tag_ids.iter().flatten() {
            self.tag_of(&org, tag_id)?;
        }
        let existing = self
            .lead_by_phone(&org, &body.phone_number)
            .map(|l| l.id.clone());
        let created = existing.is_none();
        let mut lead = match existing {
            Some(id) => self.leads[&id].clone(),
            None => Lead {
                id: self.id("lead"),
                kind: Kind::Lead,
                phone_number: body.phone_number.clone(),
                organization_id: org,
                active_group_ids: Vec::new(),
                inactive_group_ids: Vec::new(),
                custom_fields: Default::default(),
                first_name: None,
                last_name: None,
                notes: None,
                follow_up: None,
                email: None,
                postal_code: None,
                phone_number_type: None,
                tag_ids: Vec::new(),
                global_opted_out: false,
                created_at: super::now(),
            },
        };
        // Rule 1: active groups are joined or reactivated; omitted groups are untouched.
        for group_id in body.active_group_ids.iter().flatten() {
            make_active(&mut lead, group_id);
        }
        // Rule 2: inactive groups apply only where the lead is already a member.
        for group_id in body.inactive_group_ids.iter().flatten() {
            if lead.active_group_ids.contains(group_id) {
                make_inactive(&mut lead, group_id);
            }
        }
        if let Some(fields) = body.custom_fields {
            lead.custom_fields.extend(fields);
        }
        let overwrite = |slot: &mut Option<String>, value: Option<String>| {
            if value.is_some() {
                *slot = value;
            }
        };
        overwrite(&mut lead.first_name, body.first_name);
        overwrite(&mut lead.last_name, body.last_name);
        overwrite(&mut lead.notes, body.notes);
        overwrite(&mut lead.follow_up, body.follow_up);
        overwrite(&mut lead.email, body.email);
        overwrite(&mut lead.postal_code, body.postal_code);
        if body.phone_number_type.is_some() {
            lead.phone_number_type = body.phone_number_type;
        }
        if let Some(tags) = body.tag_ids {
            lead.tag_ids = dedup(tags);
        }
        self.leads.insert(lead.id.clone(), lead.clone());
        Ok((lead, created))
    }

    /// PATCH /leads.
    pub(crate) fn patch_lead(&mut self, id: &str, operation: LeadOperation) -> Result<(), Refusal> {
        let org = self.lead(id)?.organization_id.clone();
        match operation {
            LeadOperation::MakeActiveInGroup { group_id } => {
                self.group_of(&org, &group_id)?;
                self.edit_lead(id, |lead| make_active(lead, &group_id));
            }
            LeadOperation::MakeInactiveInGroup { group_id } => {
                self.group_of(&org, &group_id)?;
                // Only members can be inactive; for others this changes nothing.
                self.edit_lead(id, |lead| {
                    if lead.active_group_ids.contains(&group_id) {
                        make_inactive(lead, &group_id);
                    }
                });
            }
            LeadOperation::AttachLeadToIntegration {
                integration_id,
                external,
            } => self.attach(id, &org, integration_id, external)?,
            LeadOperation::ApplyTag { tag_id } => {
                self.tag_of(&org, &tag_id)?;
                self.edit_lead(id, |lead| {
                    if !lead.tag_ids.contains(&tag_id) {
                        lead.tag_ids.push(tag_id.clone());
                    }
                });
            }
            LeadOperation::RemoveTag { tag_id } => {
                self.edit_lead(id, |lead| lead.tag_ids.retain(|t| *t != tag_id));
            }
            LeadOperation::SetCustomField {
                custom_field_name,
                value,
            } => self.set_custom_field(id, &org, custom_field_name, value)?,
            LeadOperation::OptOut { tag_id } => {
                if let Some(tag_id) = &tag_id {
                    let tag = self.tag_of(&org, tag_id)?;
                    if tag.agent_visibility != AgentVisibility::OptOut {
                        return Err(Refusal::unprocessable(
                            "TAG_NOT_OPT_OUT",
                            format!("tag {tag_id} does not have agentVisibility OPT_OUT"),
                        ));
                    }
                }
                self.set_consent(id, true, tag_id.as_deref());
            }
            LeadOperation::OptIn => {
                self.set_consent(id, false, None);
            }
        }
        Ok(())
    }

    /// `attachLeadToIntegration`: the integration must be of the lead's organization.
    fn attach(
        &mut self,
        id: &str,
        org: &str,
        integration_id: String,
        external: ExternalLead,
    ) -> Result<(), Refusal> {
        let integration = self
            .integrations
            .get(&integration_id)
            .ok_or_else(|| Refusal::not_found("integration", &integration_id))?;
        if integration.organization_id != org {
            return Err(Refusal::unprocessable(
                "INTEGRATION_NOT_IN_ORGANIZATION",
                "the integration belongs to another organization",
            ));
        }
        self.attachments.push(Attachment {
            lead_id: id.to_owned(),
            integration_id,
            external,
        });
        Ok(())
    }

    /// `setCustomField`: the name must exist in the lead's organization (or the account).
    fn set_custom_field(
        &mut self,
        id: &str,
        org: &str,
        name: String,
        value: String,
    ) -> Result<(), Refusal> {
        let known = self
            .custom_fields
            .values()
            .any(|f| f.name == name && f.organization_id.as_deref().is_none_or(|o| o == org));
        if !known {
            return Err(Refusal::unprocessable(
                "CUSTOM_FIELD_NOT_FOUND",
                format!("no custom field named `{name}` in the organization"),
            ));
        }
        self.edit_lead(id, |lead| {
            lead.custom_fields.insert(name, value);
        });
        Ok(())
    }

    /// Opts a lead out or in; with account sync, every lead of the account with the same
    /// number follows. Returns the leads whose consent changed.
    pub(crate) fn set_consent(
        &mut self,
        id: &str,
        opted_out: bool,
        tag_id: Option<&str>,
    ) -> Vec<Lead> {
        let Some(phone) = self.leads.get(id).map(|l| l.phone_number.clone()) else {
            return Vec::new();
        };
        let targets: Vec<String> = if self.account_sync {
            self.leads
                .values()
                .filter(|l| l.phone_number == phone)
                .map(|l| l.id.clone())
                .collect()
        } else {
            vec![id.to_owned()]
        };
        let at = Utc::now();
        let mut changed = Vec::new();
        for target in targets {
            let Some(lead) = self.leads.get_mut(&target) else {
                continue;
            };
            // The opt-out tag belongs to the lead's organization, so only that lead gets it.
            if let Some(tag) = tag_id.filter(|_| target == id)
                && !lead.tag_ids.iter().any(|t| t == tag)
            {
                lead.tag_ids.push(tag.to_owned());
            }
            if lead.global_opted_out != opted_out {
                lead.global_opted_out = opted_out;
                changed.push(lead.clone());
            }
        }
        for lead in &changed {
            self.record(Change::Consent {
                lead: lead.clone(),
                at,
            });
        }
        changed
    }

    /// A person texts STOP (or START) to an organization: the lead with that number there
    /// changes consent, with account sync as configured.
    pub(crate) fn text_keyword(
        &mut self,
        organization_id: &str,
        phone: &str,
        stop: bool,
    ) -> Result<Vec<Lead>, Refusal> {
        self.organization(organization_id)?;
        let id = self
            .lead_by_phone(organization_id, phone)
            .map(|l| l.id.clone())
            .ok_or_else(|| Refusal::not_found("lead with phone number", phone))?;
        Ok(self.set_consent(&id, stop, None))
    }

    fn edit_lead(&mut self, id: &str, edit: impl FnOnce(&mut Lead)) {
        if let Some(lead) = self.leads.get_mut(id) {
            edit(lead);
        }
    }

    fn group_of(&self, organization_id: &str, group_id: &str) -> Result<(), Refusal> {
        let group = self.groups.get(group_id).ok_or_else(|| {
            Refusal::unprocessable("GROUP_NOT_FOUND", format!("group {group_id} not found"))
        })?;
        if group.organization_id != organization_id {
            return Err(Refusal::unprocessable(
                "GROUP_NOT_IN_ORGANIZATION",
                format!("group {group_id} belongs to another organization"),
            ));
        }
        Ok(())
    }

    fn tag_of(&self, organization_id: &str, tag_id: &str) -> Result<&Tag, Refusal> {
        let tag = self.tags.get(tag_id).ok_or_else(|| {
            Refusal::unprocessable("TAG_NOT_FOUND", format!("tag {tag_id} not found"))
        })?;
        if tag
            .organization_id
            .as_deref()
            .is_some_and(|o| o != organization_id)
        {
            return Err(Refusal::unprocessable(
                "TAG_NOT_IN_ORGANIZATION",
                format!("tag {tag_id} belongs to another organization"),
            ));
        }
        Ok(tag)
    }
}

/// Joins or reactivates: membership is permanent, so the group moves between the lists.
fn make_active(lead: &mut Lead, group_id: &str) {
    lead.inactive_group_ids.retain(|g| g != group_id);
    if !lead.active_group_ids.iter().any(|g| g == group_id) {
        lead.active_group_ids.push(group_id.to_owned());
    }
}

fn make_inactive(lead: &mut Lead, group_id: &str) {
    lead.active_group_ids.retain(|g| g != group_id);
    if !lead.inactive_group_ids.iter().any(|g| g == group_id) {
        lead.inactive_group_ids.push(group_id.to_owned());
    }
}

fn dedup(mut ids: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    ids.retain(|id| seen.insert(id.clone()));
    ids
}
