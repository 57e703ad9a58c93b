//! The one figure a newcomer wants: for how many leads the mirror (the daemon's database)
//! holds another consent than the service, right now.

use std::collections::HashMap;

use outreach_sync_sandbox::wire::Lead;

use outreach_sync::store::{DemoStore as _, Pool};

/// The mirror's consent beside the service's, lead by lead.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsentDifferences {
    /// Leads of the service compared.
    pub leads: usize,
    /// Leads the mirror has with the other consent (opted out where the service says opted
    /// in, or the reverse).
    pub wrong: usize,
    /// Leads the mirror holds no consent for at all (not mirrored yet).
    pub missing: usize,
    /// The first [`NAMED`] of them, named: what a reader looks up in the ledger.
    pub named: Vec<Difference>,
}

/// How many differing leads [`ConsentDifferences`] names.
pub const NAMED: usize = 5;

/// One lead whose consent in the mirror is not the service's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub organization_id: String,
    pub lead_id: String,
    pub phone_number: String,
    /// The service's `globalOptedOut`.
    pub service_opted_out: bool,
    /// The mirror's, or `None` when it holds none.
    pub mirror_opted_out: Option<bool>,
}

impl std::fmt::Display for Difference {
    /// `+1555... (lead L, organization O): opted out at the service, opted in in the mirror`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let word = |opted_out: bool| if opted_out { "opted out" } else { "opted in" };
        let mirror = self.mirror_opted_out.map_or("not mirrored", word);
        write!(
            f,
            "{} (lead {}, organization {}): {} at the service, {} in the mirror",
            self.phone_number,
            self.lead_id,
            self.organization_id,
            word(self.service_opted_out),
            mirror
        )
    }
}

impl ConsentDifferences {
    /// Leads whose consent in the mirror is not the service's: wrong or missing.
    pub fn total(&self) -> usize {
        self.wrong + self.missing
    }
}

/// Compares the service's `leads` (their `globalOptedOut`: the sandbox knows the truth)
/// with the mirror's `consent_current` view, by organization and lead id, or by organization
/// and number when the mirror's row has no lead id (a webhook that named only the number).
pub async fn consent_differences(
    pool: impl Into<Pool>,
    leads: &[Lead],
) -> Result<ConsentDifferences, outreach_sync::store::Error> {
    consent_differences_in(pool, None, leads).await
}

/// [`consent_differences`] against the mirror of the account `account` (of every account
/// with `None`): the service's leads are that account's.
pub async fn consent_differences_in(
    pool: impl Into<Pool>,
    account: Option<&str>,
    leads: &[Lead],
) -> Result<ConsentDifferences, outreach_sync::store::Error> {
    let rows = pool.into().mirrored_consent().await?;
    let mut by_lead = HashMap::new();
    let mut by_number = HashMap::new();
    let of_account =
        |row: &&outreach_sync::model::MirroredConsent| account.is_none_or(|a| row.account_id == a);
    for row in rows.iter().filter(of_account) {
        let organization = row.organization_id.as_str();
        if let Some(lead) = &row.lead_id {
            by_lead.insert((organization, lead.as_str()), row.opted_out);
        }
        by_number.insert((organization, row.phone_number.as_str()), row.opted_out);
    }
    let mut differences = ConsentDifferences {
        leads: leads.len(),
        ..ConsentDifferences::default()
    };
    for lead in leads {
        let organization = lead.organization_id.as_str();
        let mirrored = by_lead
            .get(&(organization, lead.id.as_str()))
            .or_else(|| by_number.get(&(organization, lead.phone_number.as_str())));
        match mirrored {
            None => differences.missing += 1,
            Some(opted_out) if *opted_out != lead.global_opted_out => differences.wrong += 1,
            Some(_) => continue,
        }
        if differences.named.len() < NAMED {
            differences.named.push(Difference {
                organization_id: lead.organization_id.clone(),
                lead_id: lead.id.clone(),
                phone_number: lead.phone_number.clone(),
                service_opted_out: lead.global_opted_out,
                mirror_opted_out: mirrored.copied(),
            });
        }
    }
    Ok(differences)
}
