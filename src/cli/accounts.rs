//! The account a command is about: every account served or the one named (`--account`),
//! the account a change is made in, and `--org` with `--account` as the scope of a read.

use super::{CliError, consent};
use crate::model::{AccountId, Scope};
use crate::settings::{Account, Settings};

/// `--org` and `--account` of a read, the account's name checked (a usage error otherwise:
/// no account is named so).
pub(super) struct Filters {
    organization: Option<String>,
    account: Option<AccountId>,
}

impl Filters {
    pub(super) fn of(
        organization: Option<String>,
        account: Option<String>,
    ) -> Result<Self, CliError> {
        let account = account
            .map(|name| {
                AccountId::new(&name).map_err(|e| CliError::Usage(format!("--account: {e}")))
            })
            .transpose()?;
        Ok(Self {
            organization,
            account,
        })
    }

    pub(super) fn scope(&self) -> Scope<'_> {
        Scope::organization(self.organization.as_deref()).in_account(self.account.as_ref())
    }
}

/// The accounts a command is about: the one named, or every account served in turn.
pub(super) fn accounts_of(
    settings: &Settings,
    account: Option<&str>,
) -> Result<Vec<Account>, CliError> {
    let served = settings.accounts()?;
    let Some(name) = account else {
        return Ok(served);
    };
    match served.iter().find(|account| account.id == *name) {
        Some(account) => Ok(vec![account.clone()]),
        None => {
            let names: Vec<&str> = served.iter().map(|account| account.id.as_str()).collect();
            Err(CliError::Usage(format!(
                "--account: no account {:?} is configured (accounts: {})",
                crate::model::text::Escaped(name),
                names.join(", ")
            )))
        }
    }
}

/// Records a local change (organization, number, opted out, tag, reason) made with the CLI
/// in the account named, or the first.
pub(super) async fn local_change(
    settings: &Settings,
    account: Option<&str>,
    (organization, phone, opted_out, tag, reason): (
        String,
        String,
        bool,
        Option<String>,
        Option<String>,
    ),
    json: bool,
) -> Result<(), CliError> {
    let account = one_account(settings, account)?;
    let change = consent::local_change(&account, organization, phone, opted_out, tag, reason);
    consent::change(settings, change, json).await
}

/// The account a change is made in: the one named, or the first account.
pub(super) fn one_account(
    settings: &Settings,
    account: Option<&str>,
) -> Result<AccountId, CliError> {
    let accounts = accounts_of(settings, account)?;
    match accounts.into_iter().next() {
        Some(account) => Ok(account.id),
        None => Ok(settings.account_id()?),
    }
}
