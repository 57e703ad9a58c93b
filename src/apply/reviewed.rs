//! A person's decision of a reply kept for review ([`crate::model::review`]): recorded with
//! who made it, when and why; an opt-out decided is recorded as the source's records are
//! (each target account, account-wide, pushed to the service and sent to every destination
//! by the machinery every opt-out goes through), as of the reply's receipt, its evidence
//! the post and the decision. The decision and its entries commit together.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::InForce;
use crate::model::read::{ReadRecord, Said};
use crate::model::review::{Decision, ReviewDecision, StoredReply};
use crate::model::{MAX_REASON_CHARS, Timestamp, text};
use crate::store::{Pool, ReviewStore as _, SourceTx as _};

/// Most characters of who decided.
pub const MAX_BY_CHARS: usize = 200;

/// Why a decision was not recorded.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("{0}")]
    Invalid(String),
    #[error("no reply {0} is kept for review")]
    NotFound(i64),
    #[error("reply {id} was decided already ({decision})")]
    Decided { id: i64, decision: String },
    #[error(
        "reply {id} was posted to source {name:?}, which is not configured now: an opt-out is recorded where that source's opt-outs hold"
    )]
    SourceGone { id: i64, name: String },
    #[error("cannot record the decision: {0}")]
    Database(#[from] crate::store::Error),
}

impl ReviewDecision {
    /// Checks who decided and why.
    pub fn validate(&self) -> Result<(), ReviewError> {
        let by = self.by.trim();
        if by.is_empty() {
            return Err(ReviewError::Invalid("by: who decided is required".into()));
        }
        if by.chars().count() > MAX_BY_CHARS || by.chars().any(text::is_unsafe_char) {
            return Err(ReviewError::Invalid(format!(
                "by: at most {MAX_BY_CHARS} characters, none a control character"
            )));
        }
        if self
            .reason
            .as_ref()
            .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
        {
            return Err(ReviewError::Invalid(format!(
                "reason: at most {MAX_REASON_CHARS} characters"
            )));
        }
        Ok(())
    }
}

/// Records `decision` of reply `id` at `now`: the reply as it then stands.
pub async fn decide(
    pool: &Pool,
    sources: &InForce,
    id: i64,
    decision: &ReviewDecision,
    now: DateTime<Utc>,
) -> Result<StoredReply, ReviewError> {
    decision.validate()?;
    let reply = pool
        .review_reply(id)
        .await?
        .ok_or(ReviewError::NotFound(id))?;
    if let Some(decided) = reply.decision.clone() {
        return Err(ReviewError::Decided {
            id,
            decision: decided,
        });
    }
    let recorder = match decision.decision {
        Decision::NotOptOut => None,
        Decision::OptOut => {
            Some(
                sources
                    .recorder(&reply.source)
                    .ok_or_else(|| ReviewError::SourceGone {
                        id,
                        name: reply.source.clone(),
                    })?,
            )
        }
    };
    let by = decision.by.trim();
    let reason = decision.reason.as_deref().filter(|r| !r.trim().is_empty());
    let mut tx = pool.begin_write().await?;
    let at = Timestamp(now);
    if !tx
        .decide_reply(id, decision.decision, (by, reason), at)
        .await?
    {
        // Decided by someone else in the meantime.
        return Err(ReviewError::Decided {
            id,
            decision: "by another".into(),
        });
    }
    if let Some(recorder) = recorder {
        let record = opt_out_of(&reply, (by, reason), at);
        recorder.record_slice(&mut tx, &[record]).await?;
    }
    tx.commit().await?;
    crate::signal::ledger_grew();
    tracing::info!(
        reply = id,
        source = %reply.source,
        decision = decision.decision.as_str(),
        by,
        "reply decided"
    );
    pool.review_reply(id)
        .await?
        .ok_or(ReviewError::NotFound(id))
}

/// The opt-out `reply` is, decided by `by` at `at`: as of the reply's receipt, standing on
/// the post and the decision.
fn opt_out_of(
    reply: &StoredReply,
    (by, reason): (&str, Option<&str>),
    at: Timestamp,
) -> ReadRecord {
    let post: serde_json::Value = serde_json::from_str(&reply.stands_on).unwrap_or_default();
    let matched: serde_json::Value = serde_json::from_str(&reply.matched).unwrap_or_default();
    ReadRecord {
        key: format!("{}:decided", reply.record),
        said: Said::Consent {
            phone_number: reply.phone_number.clone(),
            opted_out: true,
            occurred_at: reply.received_at.0,
        },
        stands_on: json!({
            "reply": reply.body,
            "matched": matched,
            "receivedAt": reply.received_at,
            "post": post,
            "decision": {"decision": "opt_out", "by": by, "reason": reason, "at": at},
        }),
    }
}
