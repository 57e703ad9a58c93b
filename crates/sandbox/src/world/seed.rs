//! The starting account: organizations with groups, agents, tags (one `OPT_OUT`), custom
//! fields, an integration, and leads, all drawn from the seeded generator so the same seed
//! gives the same account.

use chrono::{DateTime, Duration, Utc};
use rand::Rng as _;
use rand::seq::SliceRandom as _;

use std::collections::HashSet;

use super::World;
use crate::destinations::{VAN_ID_FIELD, van_id_for_lead};
use crate::wire::{
    Agent, AgentVisibility, Balances, Coordinates, CountryCode, CustomField, Group, Integration,
    IntegrationType, Kind, Lead, Location, Organization, PhoneNumberType, Tag,
};

/// How big an account to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SeedPlan {
    pub leads: usize,
    pub organizations: usize,
}

/// Seeded numbers are `+1555` and seven digits: at most this many leads per organization.
pub(crate) const PHONE_NUMBERS: u32 = 10_000_000;

const FIRST_NAMES: [&str; 8] = [
    "Ana", "Ben", "Chloe", "Dev", "Elena", "Femi", "Grace", "Hugo",
];
const LAST_NAMES: [&str; 8] = [
    "Nguyen", "Okafor", "Smith", "Garcia", "Kim", "Rossi", "Haddad", "Berg",
];
const CITIES: [(&str, f64, f64, &str); 3] = [
    ("Columbus, OH", 39.96, -83.0, "America/New_York"),
    ("Denver, CO", 39.74, -104.99, "America/Denver"),
    ("Tucson, AZ", 32.22, -110.97, "America/Phoenix"),
];

/// Seeded data is dated before this instant, so it is the same on every run.
fn epoch() -> DateTime<Utc> {
    DateTime::from_timestamp(1_790_000_000, 0).unwrap_or_default()
}

impl World {
    pub(crate) fn seed(&mut self, plan: SeedPlan) {
        let stamp = |world: &mut World| {
            let back = world.rng.gen_range(0..90 * 24 * 3600);
            super::timestamp(epoch() - Duration::seconds(back))
        };
        let field_id = self.id("cf");
        let at = stamp(self);
        // One account-scoped field: it applies to every organization.
        self.custom_fields.insert(
            field_id.clone(),
            CustomField {
                id: field_id,
                kind: Kind::CustomField,
                name: "source".into(),
                agent_visible: false,
                organization_id: None,
                created_at: at,
            },
        );
        let mut orgs = Vec::new();
        for n in 0..plan.organizations.max(1) {
            let at = stamp(self);
            orgs.push(self.seed_organization(n, at));
        }
        let mut phones: Vec<String> = Vec::new();
        // A set beside the leads: looking each number up in the leads would make seeding
        // quadratic in their count.
        let mut taken: HashSet<(String, String)> = self
            .leads
            .values()
            .map(|l| (l.organization_id.clone(), l.phone_number.clone()))
            .collect();
        for n in 0..plan.leads {
            let org = orgs[n % orgs.len()].clone();
            let phone = self.draw_phone(&org, &phones, &taken);
            taken.insert((org.clone(), phone.clone()));
            phones.push(phone.clone());
            let at = stamp(self);
            self.seed_lead(&org, phone, at);
        }
    }

    /// Gives most seeded leads a VAN ID, in the custom field the daemon's VAN destination
    /// reads, and returns them as (VAN ID, lead id, phone number) for the fake VAN's people.
    /// Which leads, and their ids, follow from each lead's position alone: nothing is drawn
    /// from the generator, so the rest of the seeded account is as it was without them.
    pub(crate) fn seed_van_ids(&mut self) -> Vec<(u64, String, String)> {
        // Account-scoped, like `source`; an id off the counter, so no other id moves.
        let field_id = "cf_van_id".to_owned();
        self.custom_fields.insert(
            field_id.clone(),
            CustomField {
                id: field_id,
                kind: Kind::CustomField,
                name: VAN_ID_FIELD.into(),
                agent_visible: false,
                organization_id: None,
                created_at: super::timestamp(epoch()),
            },
        );
        let mut people = Vec::new();
        for (index, lead) in self.leads.values_mut().enumerate() {
            let Some(van_id) = van_id_for_lead(index) else {
                continue;
            };
            lead.custom_fields
                .insert(VAN_ID_FIELD.into(), van_id.to_string());
            people.push((van_id, lead.id.clone(), lead.phone_number.clone()));
        }
        people
    }

    /// A number not yet used in `org`: about one time in eight a person already known (to
    /// another organization), so account sync has something to do; otherwise a new number.
    /// A draw that falls on a number `org` already has is drawn again, never skipped, so
    /// the account has exactly the leads asked for.
    fn draw_phone(
        &mut self,
        org: &str,
        phones: &[String],
        taken: &HashSet<(String, String)>,
    ) -> String {
        let is_free = |phone: &str| !taken.contains(&(org.to_owned(), phone.to_owned()));
        if !phones.is_empty()
            && self.rng.gen_bool(0.125)
            && let Some(known) = phones.choose(&mut self.rng).filter(|p| is_free(p))
        {
            return known.clone();
        }
        // Ends while `org` has fewer than PHONE_NUMBERS leads (`Sandbox::spawn` checks).
        loop {
            let phone = format!("+1555{:07}", self.rng.gen_range(0..PHONE_NUMBERS));
            if is_free(&phone) {
                return phone;
            }
        }
    }

    fn seed_organization(&mut self, n: usize, at: String) -> String {
        let org_id = self.id("org");
        let integration_id = self.id("int");
        self.integrations.insert(
            integration_id.clone(),
            Integration {
                id: integration_id.clone(),
                kind: Kind::Integration,
                name: format!("Voter file {}", n + 1),
                integration_type: IntegrationType::VoterFileA,
                organization_id: org_id.clone(),
                created_at: at.clone(),
            },
        );
        self.organizations.insert(
            org_id.clone(),
            Organization {
                id: org_id.clone(),
                kind: Kind::Organization,
                name: format!("Organization {}", n + 1),
                integrations: vec![integration_id],
                balances: (n == 0).then_some(Balances {
                    sms_balance: 10_000.0,
                    mms_balance: 2_000.0,
                    call_balance: 500.0,
                }),
                created_at: at.clone(),
            },
        );
        self.seed_teams(n, &org_id, &at);
        self.seed_labels(&org_id, &at);
        org_id
    }

    /// Two groups of the organization, each with an agent.
    fn seed_teams(&mut self, n: usize, org_id: &str, at: &str) {
        for (g, (label, lat, lng, zone)) in CITIES.iter().take(2).enumerate() {
            let group_id = self.id("grp");
            self.groups.insert(
                group_id.clone(),
                Group {
                    id: group_id.clone(),
                    kind: Kind::Group,
                    name: format!("{} team {}", label, g + 1),
                    description: Some("seeded".into()),
                    country_code: CountryCode::US,
                    active: true,
                    location: Some(Location {
                        label: (*label).into(),
                        coordinates: Coordinates {
                            lat: *lat,
                            lng: *lng,
                        },
                    }),
                    organization_id: org_id.to_owned(),
                    timezone: (*zone).into(),
                    created_at: at.to_owned(),
                },
            );
            let agent_id = self.id("agt");
            self.agents.insert(
                agent_id.clone(),
                Agent {
                    id: agent_id,
                    kind: Kind::Agent,
                    name: format!("Agent {}-{}", n + 1, g + 1),
                    full_name: format!("Agent {} of group {}", n + 1, g + 1),
                    phone_number: None,
                    organization_id: org_id.to_owned(),
                    group_id,
                    created_at: at.to_owned(),
                },
            );
        }
    }

    /// The organization's tags (one of each visibility) and custom fields.
    fn seed_labels(&mut self, org_id: &str, at: &str) {
        for (name, visibility) in [
            ("Volunteer", AgentVisibility::LeadProfiles),
            ("Texted STOP", AgentVisibility::OptOut),
            ("Staff only", AgentVisibility::Never),
        ] {
            let tag_id = self.id("tag");
            self.tags.insert(
                tag_id.clone(),
                Tag {
                    id: tag_id,
                    kind: Kind::Tag,
                    name: name.into(),
                    organization_id: Some(org_id.to_owned()),
                    created_at: at.to_owned(),
                    agent_visibility: visibility,
                },
            );
        }
        for name in ["donor_level", "county"] {
            let field_id = self.id("cf");
            self.custom_fields.insert(
                field_id.clone(),
                CustomField {
                    id: field_id,
                    kind: Kind::CustomField,
                    name: name.into(),
                    agent_visible: true,
                    organization_id: Some(org_id.to_owned()),
                    created_at: at.to_owned(),
                },
            );
        }
    }

    fn seed_lead(&mut self, org: &str, phone: String, at: String) {
        let groups: Vec<String> = self
            .groups
            .values()
            .filter(|g| g.organization_id == org)
            .map(|g| g.id.clone())
            .collect();
        let tags: Vec<String> = self
            .tags
            .values()
            .filter(|t| t.organization_id.as_deref() == Some(org))
            .map(|t| t.id.clone())
            .collect();
        let mut lead = Lead {
            id: self.id("lead"),
            kind: Kind::Lead,
            phone_number: phone,
            organization_id: org.to_owned(),
            active_group_ids: groups.first().cloned().into_iter().collect(),
            inactive_group_ids: Vec::new(),
            custom_fields: Default::default(),
            first_name: FIRST_NAMES.choose(&mut self.rng).map(|s| (*s).to_owned()),
            last_name: LAST_NAMES.choose(&mut self.rng).map(|s| (*s).to_owned()),
            notes: None,
            follow_up: None,
            email: None,
            postal_code: Some(format!("{:05}", self.rng.gen_range(10_000..99_999))),
            phone_number_type: None,
            tag_ids: Vec::new(),
            global_opted_out: self.rng.gen_bool(0.05),
            created_at: at,
        };
        if self.rng.gen_bool(0.8) {
            lead.phone_number_type = Some(PhoneNumberType::Mobile);
        }
        if let Some(second) = groups.get(1).filter(|_| self.rng.gen_bool(0.3)) {
            lead.inactive_group_ids.push(second.clone());
        }
        if let Some(tag) = tags.first().filter(|_| self.rng.gen_bool(0.3)) {
            lead.tag_ids.push(tag.clone());
        }
        if lead.global_opted_out {
            lead.tag_ids.extend(tags.get(1).cloned());
        }
        let level = ["bronze", "silver", "gold"][self.rng.gen_range(0..3)];
        lead.custom_fields
            .insert("donor_level".into(), level.into());
        self.leads.insert(lead.id.clone(), lead);
    }
}
