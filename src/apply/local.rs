//! Local consent changes (CLI, admin API): recorded in the ledger with source `local`,
//! applied to the mirror and queued for the service, in one transaction.

use crate::model::AccountId;
use crate::model::PushState;
use crate::model::{MAX_REASON_CHARS, id_problem};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::model::phone;
use crate::model::{ConsentObservation, KeptEvidence, Source};
use crate::store::{ApplyTx, Pool};

/// A consent change made here, for the service.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalChange {
    /// The account of the service it is made in.
    pub account: AccountId,
    pub organization_id: String,
    pub phone_number: String,
    pub opted_out: bool,
    /// Only with an opt-out: a tag of visibility `OPT_OUT` the service applies.
    pub tag_id: Option<String>,
    pub reason: Option<String>,
    /// Who made it: an admin token's name, or `cli:USER`; kept as its evidence.
    pub actor: String,
}

/// Why a local change was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("{0}")]
    Invalid(String),
    #[error("cannot record the change: {0}")]
    Database(#[from] crate::store::Error),
}

/// A recorded local change.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = LocalChangeRecorded)]
pub struct Recorded {
    pub seq: i64,
    pub event_ref: String,
    /// Whether it became the current state (a newer event may already be in place).
    pub current: bool,
    pub push: PushState,
}

impl LocalChange {
    /// Checks the change; gives its number as the ledger keeps it ([`phone::canonical`]:
    /// `+1 (555) 000-1111` is `+15550001111`).
    pub fn validate(&self) -> Result<String, LocalError> {
        let phone_number = phone::canonical(&self.phone_number).map_err(|e| {
            LocalError::Invalid(format!(
                "phoneNumber: {e} (an E.164 number is expected, e.g. +15551234567)"
            ))
        })?;
        if self.organization_id.trim().is_empty() {
            return Err(LocalError::Invalid("organizationId is required".into()));
        }
        // The rule of ids (length, no control character), for the admin API, the console
        // and the CLI alike.
        let ids = [
            ("organizationId", Some(&self.organization_id)),
            ("tagId", self.tag_id.as_ref()),
        ];
        if let Some(problem) = ids
            .into_iter()
            .find_map(|(field, id)| id_problem(field, id?))
        {
            return Err(LocalError::Invalid(problem));
        }
        if self
            .reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
        {
            return Err(LocalError::Invalid(format!(
                "reason is at most {MAX_REASON_CHARS} characters"
            )));
        }
        if self.tag_id.is_some() && !self.opted_out {
            return Err(LocalError::Invalid(
                "tagId applies to an opt-out only".into(),
            ));
        }
        Ok(phone_number)
    }
}

/// Records `change` in the caller's transaction. Older changes of the same (organization,
/// number) never attempted are superseded: only the newest is sent. One already attempted
/// may have reached the service, so it is finished first (and its echo recognised).
pub async fn record<T: ApplyTx + ?Sized>(
    tx: &mut T,
    change: &LocalChange,
    now: DateTime<Utc>,
) -> Result<Recorded, LocalError> {
    let phone_number = change.validate()?;
    let event_ref = format!("local:{:032x}", rand::random::<u128>());
    let observation = ConsentObservation {
        organization_id: change.organization_id.clone(),
        phone_number,
        lead_id: None,
        opted_out: change.opted_out,
        occurred_at: now,
        source: Source::Local,
        event_ref: event_ref.clone(),
        tag_id: change.tag_id.clone(),
        reason: change.reason.clone(),
        evidence: Some(KeptEvidence::Local {
            actor: change.actor.clone(),
        }),
    };
    let key = (
        observation.organization_id.as_str(),
        observation.phone_number.as_str(),
    );
    let account = &change.account;
    let states = super::locked_states(tx, account, &[key]).await?;
    let applied =
        super::consent::apply(tx, account, std::slice::from_ref(&observation), now, states).await?;
    let outcome = applied
        .first()
        .copied()
        .ok_or_else(|| LocalError::Invalid("the change was not recorded".into()))?;
    let seq = outcome
        .seq
        .ok_or_else(|| LocalError::Invalid("the change was already recorded".into()))?;
    tx.queue_push(account, seq, &observation, now).await?;
    Ok(Recorded {
        seq,
        event_ref,
        current: outcome.current,
        push: PushState::Pending,
    })
}

/// Records `change` in a transaction of its own, on either backend.
pub async fn record_local(
    pool: impl Into<Pool>,
    change: &LocalChange,
    now: DateTime<Utc>,
) -> Result<Recorded, LocalError> {
    change.validate()?;
    let mut tx = pool.into().begin_write().await?;
    let recorded = record(&mut tx, change, now).await?;
    tx.commit().await?;
    crate::signal::ledger_grew();
    Ok(recorded)
}
