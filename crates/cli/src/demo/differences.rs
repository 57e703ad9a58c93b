//! The one figure a newcomer wants: for how many leads the mirror (the daemon's database)
//! holds another consent than the service, right now.

use std::collections::HashMap;

use outreach_sync_sandbox::wire::Lead;

use outreach_sync::store::{DemoStore as _, Pool};

/// The mirror's consent beside the service's, lead by lead.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsentDifferences {
    /// Leads of the service compared.
    pub leads: usize,
    /// Leads the mirror has with the other consent (opted out where the service says opted
    /// in, or the reverse).
    pub wrong: usize,
    /// Leads the mirror holds no consent for at all (not mirrored yet).
    pub missing: usize,
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
            Some(_) => {}
        }
    }
    Ok(differences)
}
