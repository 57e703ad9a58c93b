//! The read side of the consent ledger and the mirror: the JSON records of the contract,
//! shared by the CLI and the admin API, the same on either backend (the statements are in
//! `store::{sqlite, postgres}::read`). Only reads.

use crate::model::{AccountId, Scope};
use crate::store::ReadStore;
use serde::Serialize;
use serde_json::Value;

pub use crate::model::{
    Backlog, ConsentRecord, KeptRejection, LastError, LedgerEntry, OrganizationPass, Status,
    StoredEvent,
};
use crate::store::Pool;

/// The hash chain as stored: the walk that checks it, its head, its hourly log.
pub mod chain;
/// The replies kept for review, with their due dates.
pub mod review;

/// `{"items": [...]}`, the list shape of the contract.
#[derive(Debug, Serialize)]
pub struct Items<T> {
    pub items: Vec<T>,
}

/// Current consent of `phone` in every organization, or in one.
pub async fn current(
    pool: impl Into<Pool>,
    phone: &str,
    organization: Option<&str>,
) -> Result<Vec<ConsentRecord>, crate::store::Error> {
    (pool.into()).current(phone, organization).await
}

/// Those of `records` of the account `account` (all of them without one).
pub fn in_account<T: OfAccount>(mut records: Vec<T>, account: Option<&AccountId>) -> Vec<T> {
    if let Some(account) = account {
        records.retain(|r| *account == r.account_id());
    }
    records
}

/// A record of one account.
pub trait OfAccount {
    fn account_id(&self) -> &str;
}

impl OfAccount for ConsentRecord {
    fn account_id(&self) -> &str {
        &self.account_id
    }
}

impl OfAccount for crate::model::LedgerEntry {
    fn account_id(&self) -> &str {
        &self.account_id
    }
}

/// A number's current consent, and whether it is suppressed for the whole account.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ConsentItems)]
pub struct CurrentConsent {
    pub items: Vec<ConsentRecord>,
    /// Opted out for the whole account: a lead that appears with the number is opted out.
    pub suppressed: bool,
    /// The account-wide opt-out's time, when suppressed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed_since: Option<crate::model::Timestamp>,
    /// The ledger entry that suppressed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed_by: Option<i64>,
}

/// [`current`], and the suppression in force of `phone`.
pub async fn current_with_suppression(
    pool: impl Into<Pool>,
    phone: &str,
    scope: Scope<'_>,
) -> Result<CurrentConsent, crate::store::Error> {
    let pool = pool.into();
    // The suppression first: the states read after it are at least as new, so one that
    // says the number is suppressed comes with the states its transaction wrote.
    let suppression = pool.suppression(phone, scope.account_name()).await?;
    let current = pool.current(phone, scope.organization).await?;
    let items = in_account(current, scope.account);
    Ok(CurrentConsent {
        items,
        suppressed: suppression.is_some(),
        suppressed_since: suppression.map(|s| s.since),
        suppressed_by: suppression.map(|s| s.seq),
    })
}

/// Current consent of each of `phones` (without duplicates), in their order, organizations
/// sorted; in every organization or in one. Numbers without a record are left out.
pub async fn lookup(
    pool: impl Into<Pool>,
    phones: &[&str],
    organization: Option<&str>,
) -> Result<Vec<ConsentRecord>, crate::store::Error> {
    (pool.into()).lookup(phones, organization).await
}

/// Every ledger entry of `phone`, oldest first.
pub async fn history(
    pool: impl Into<Pool>,
    phone: &str,
    organization: Option<&str>,
) -> Result<Vec<LedgerEntry>, crate::store::Error> {
    (pool.into()).history(phone, organization).await
}

/// Ledger entries after `after`, in `seq` order: the change feed. On either backend seqs
/// become visible in seq order, so reading `seq > after` never skips an entry that commits
/// later with a smaller seq.
pub async fn changes(
    pool: impl Into<Pool>,
    after: i64,
    limit: i64,
) -> Result<Vec<LedgerEntry>, crate::store::Error> {
    (pool.into()).changes(after, limit).await
}

/// The outbox and push backlog, for `/metrics`.
pub async fn backlog(pool: impl Into<Pool>) -> Result<Backlog, crate::store::Error> {
    (pool.into()).backlog().await
}

/// The kept deliveries that failed verification, newest first.
pub async fn rejected(pool: impl Into<Pool>) -> Result<Vec<KeptRejection>, crate::store::Error> {
    (pool.into()).rejected().await
}

/// The most recent stored deliveries, newest first.
pub async fn events(
    pool: impl Into<Pool>,
    quarantined_only: bool,
    limit: i64,
) -> Result<Vec<StoredEvent>, crate::store::Error> {
    (pool.into()).events(quarantined_only, limit).await
}

/// The daemon's state at a glance: counts, the last error, reconciliation, pushes,
/// replicas and the last check of the webhook registrations.
pub async fn status(pool: impl Into<Pool>) -> Result<Status, crate::store::Error> {
    status_of(pool, &[AccountId::default_account()]).await
}

/// [`status`] of a daemon serving `accounts`: the registration check shown is that of the
/// account most in need of attention.
pub async fn status_of(
    pool: impl Into<Pool>,
    accounts: &[AccountId],
) -> Result<Status, crate::store::Error> {
    let pool = pool.into();
    let mut status = pool.status().await?;
    status.replicas = crate::replica::seen(&pool).await?;
    status.registration_check = crate::registrations::last_check(&pool, accounts).await?;
    status.chain_head = crate::ledger::chain::head(pool).await?;
    Ok(status)
}

/// The mirrored lead `id` of `account` as the v3 Lead resource (its `globalOptedOut` from
/// the consent state of its number) with its `accountId`, with nulls.
pub async fn lead(
    pool: impl Into<Pool>,
    id: &str,
    account: &AccountId,
) -> Result<Option<Value>, crate::store::Error> {
    (pool.into()).lead(id, account).await
}

/// The mirrored leads of `phone` as v3 Lead resources, in every organization or in one,
/// by organization and id.
pub async fn leads(
    pool: impl Into<Pool>,
    phone: &str,
    organization: Option<&str>,
) -> Result<Vec<Value>, crate::store::Error> {
    leads_in(pool, phone, Scope::organization(organization)).await
}

/// [`leads`] of one account, or of every one.
pub async fn leads_in(
    pool: impl Into<Pool>,
    phone: &str,
    scope: Scope<'_>,
) -> Result<Vec<Value>, crate::store::Error> {
    (pool.into())
        .leads(phone, scope.organization, scope.account_name())
        .await
}

/// The tracked message `id` of `account`, with nulls.
pub async fn message(
    pool: impl Into<Pool>,
    id: &str,
    account: &AccountId,
) -> Result<Option<Value>, crate::store::Error> {
    (pool.into()).message(id, account).await
}

/// Deliveries received since `since`, per minute (`"YYYY-MM-DDTHH:MM"` in UTC, oldest
/// first; minutes without any are left out).
pub async fn deliveries_per_minute(
    pool: impl Into<Pool>,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<(String, i64)>, crate::store::Error> {
    (pool.into()).deliveries_per_minute(since).await
}
