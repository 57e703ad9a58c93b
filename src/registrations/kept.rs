//! The last check of each account's registrations, kept in `daemon_state` for `status`,
//! `GET /v1/status` and `/metrics`.

use crate::model::{AccountId, RegistrationCheck};
use crate::store::Pool;

/// The `daemon_state` key of the last check's result (JSON).
const LAST_CHECK: &str = "webhook_registrations_check";

/// Keeps `check` as the `default` account's last result ([`record_in`]).
pub async fn record(pool: &Pool, check: &RegistrationCheck) -> anyhow::Result<()> {
    record_in(pool, &AccountId::default_account(), check).await
}

/// Keeps `check` as `account`'s last result, for `status`, `GET /v1/status` and
/// `/metrics`.
pub async fn record_in(
    pool: &Pool,
    account: &AccountId,
    check: &RegistrationCheck,
) -> anyhow::Result<()> {
    let value = serde_json::to_string(check)?;
    pool.set_state(&check_key(account), &value).await?;
    Ok(())
}

/// Where an account's last check is kept: `default`'s where it always was.
fn check_key(account: &AccountId) -> String {
    if *account == crate::model::DEFAULT_ACCOUNT {
        LAST_CHECK.to_owned()
    } else {
        format!("{LAST_CHECK}:{account}")
    }
}

/// The last check of `accounts` that most needs attention: the first that failed, else the
/// oldest. With several accounts, each problem names its account. `None` before the first
/// check (an account whose kept check cannot be read, which is logged, counts as never
/// checked).
pub async fn last_check(
    pool: &Pool,
    accounts: &[AccountId],
) -> Result<Option<RegistrationCheck>, crate::store::Error> {
    let mut kept = Vec::new();
    for account in accounts {
        let Some(value) = pool.state(&check_key(account)).await? else {
            continue;
        };
        match serde_json::from_str::<RegistrationCheck>(&value) {
            Ok(mut check) => {
                if accounts.len() > 1 {
                    for problem in &mut check.problems {
                        *problem = format!("account {account}: {problem}");
                    }
                }
                kept.push(check);
            }
            Err(error) => {
                tracing::warn!(%error, %account, "the kept webhook registration check cannot be read");
            }
        }
    }
    Ok(match kept.iter().position(|check| !check.ok) {
        Some(failed) => Some(kept.swap_remove(failed)),
        None => kept.into_iter().min_by_key(|check| check.checked_at),
    })
}
