//! `[[caller]]` and `[consent] revoke_all_from`: who a revocation binds, and from when
//! ([`crate::model::caller`]).

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::{Settings, SettingsError};
use crate::model::AccountId;
use crate::model::caller::{Binds, Caller, Member};

/// The date the FCC's revoke-all rule takes effect, by the order of 2026-01-06.
pub const REVOKE_ALL_FROM: &str = "2027-01-31";

/// `[[caller]]`: a campaign, a committee: who sends.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct CallerSettings {
    pub name: String,
    /// Accounts (`party`), or organizations of one (`party/org_00000002`).
    pub members: Vec<String>,
}

impl Settings {
    /// The callers: each `[[caller]]` from the rule's date, or, with `[consent]
    /// share_across_accounts` and several accounts, one caller of every account always.
    /// An error names the key at fault.
    pub fn callers(&self) -> Result<Vec<Caller>, SettingsError> {
        let accounts = self.account_ids()?;
        if self.consent.share_across_accounts && !self.caller.is_empty() {
            return Err(SettingsError::invalid(
                "consent.share_across_accounts",
                "is one caller of every account: with [[caller]] sections, name that caller instead (its members every account)",
            ));
        }
        if self.consent.share_across_accounts {
            if accounts.len() < 2 {
                return Ok(Vec::new());
            }
            return Ok(vec![Caller {
                name: None,
                members: accounts.into_iter().map(Member::Account).collect(),
                binds: Binds::Always,
            }]);
        }
        let binds = self.revoke_all_binds()?;
        let mut callers: Vec<Caller> = Vec::with_capacity(self.caller.len());
        for section in &self.caller {
            super::validate::name("caller.name", "caller", &section.name)?;
            if callers
                .iter()
                .any(|c| c.name.as_deref() == Some(&section.name))
            {
                return Err(SettingsError::invalid(
                    "caller.name",
                    format!("caller {:?} is named twice", section.name),
                ));
            }
            let members = section
                .members
                .iter()
                .map(|text| member(text, &accounts))
                .collect::<Result<Vec<_>, _>>()?;
            if members.len() < 2 && !members.iter().any(|m| matches!(m, Member::Account(_))) {
                return Err(SettingsError::invalid(
                    "caller.members",
                    format!(
                        "caller {:?}: an organization alone binds nothing beyond itself; name two members at least, or an account",
                        section.name
                    ),
                ));
            }
            for (i, one) in members.iter().enumerate() {
                let mine = members[..i].iter().find(|m| m.overlaps(one));
                let theirs = callers.iter().find_map(|c| {
                    let other = c.members.iter().find(|m| m.overlaps(one))?;
                    Some((c.shown().to_owned(), other))
                });
                if let Some(other) = mine {
                    return Err(SettingsError::invalid(
                        "caller.members",
                        format!(
                            "caller {:?}: {other} and {one} are named twice over",
                            section.name
                        ),
                    ));
                }
                if let Some((caller, other)) = theirs {
                    return Err(SettingsError::invalid(
                        "caller.members",
                        format!(
                            "{one} of caller {:?} is also caller {caller:?}'s ({other}): a member is of one caller",
                            section.name
                        ),
                    ));
                }
            }
            callers.push(Caller {
                name: Some(section.name.clone()),
                members,
                binds,
            });
        }
        Ok(callers)
    }

    /// From when the callers' opt-outs bind every member: `[consent] revoke_all_from` at
    /// midnight in `[compliance] timezone`.
    fn revoke_all_binds(&self) -> Result<Binds, SettingsError> {
        let text = self.consent.revoke_all_from.trim();
        if text.is_empty() {
            return Ok(Binds::Never);
        }
        let key = "consent.revoke_all_from";
        let day = NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| {
            SettingsError::invalid(
                key,
                format!(
                    "{} is not a YYYY-MM-DD date (or \"\": never)",
                    crate::model::text::quoted(text)
                ),
            )
        })?;
        let calendar = self.compliance.business_days()?;
        let from = calendar.day_start(day).ok_or_else(|| {
            SettingsError::invalid(key, format!("{day} has no midnight in the time zone"))
        })?;
        Ok(Binds::From(from))
    }
}

/// `party` or `party/org_00000002`, of one of `accounts`.
fn member(text: &str, accounts: &[AccountId]) -> Result<Member, SettingsError> {
    let key = "caller.members";
    let shown = crate::model::text::quoted(text);
    let (account, organization) = match text.split_once('/') {
        Some((account, organization)) => (account, Some(organization)),
        None => (text, None),
    };
    let Some(account) = accounts.iter().find(|a| a.as_str() == account) else {
        let served: Vec<&str> = accounts.iter().map(AccountId::as_str).collect();
        return Err(SettingsError::invalid(
            key,
            format!(
                "{shown}: no account is named {} (the accounts: {})",
                crate::model::text::quoted(account),
                served.join(", ")
            ),
        ));
    };
    match organization {
        None => Ok(Member::Account(account.clone())),
        Some(organization)
            if !organization.is_empty()
                && !organization.contains('/')
                && organization != crate::model::ACCOUNT_WIDE
                && organization.chars().count() <= crate::model::MAX_ID_CHARS
                && !organization.chars().any(crate::model::text::is_unsafe_char) =>
        {
            Ok(Member::Organization(
                account.clone(),
                organization.to_owned(),
            ))
        }
        Some(_) => Err(SettingsError::invalid(
            key,
            format!("{shown}: an account, or an account, `/` and one of its organizations' ids"),
        )),
    }
}
