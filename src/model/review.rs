//! Replies put to a person: a reply holding a revocation word among other words is no
//! opt-out by itself, and never dropped ([`super::revocation::Reply::Review`]). It waits,
//! its deadline running from its receipt, until a person decides: an opt-out (recorded as
//! of the reply's receipt, its evidence the post and the decision) or not.

use serde::{Deserialize, Serialize};

use super::Timestamp;

/// A reply waiting (or decided), as stored.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct StoredReply {
    pub id: i64,
    pub source: String,
    /// Its key at the source (Twilio: the `MessageSid`).
    pub record: String,
    pub phone_number: String,
    pub body: String,
    /// The revocation words it holds, a JSON array.
    pub matched: String,
    /// What it stands on (the post as received), JSON.
    pub stands_on: String,
    pub received_at: Timestamp,
    pub decision: Option<String>,
    pub decided_by: Option<String>,
    pub decided_at: Option<Timestamp>,
    pub reason: Option<String>,
}

/// A reply as `review` and `GET /v1/review` list it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = ReviewItem)]
pub struct ReviewItem {
    pub id: i64,
    pub source: String,
    pub phone_number: String,
    /// What the person wrote.
    pub text: String,
    /// The revocation words and phrases it holds.
    pub matched: Vec<String>,
    pub received_at: Timestamp,
    /// When an opt-out it may be must be honoured by (the compliance calendar's deadline
    /// from its receipt).
    pub due: Timestamp,
    /// `opt_out` or `not_opt_out`, once decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ReviewItem {
    /// `stored` as listed, due at `due`.
    pub fn of(stored: StoredReply, due: Timestamp) -> Self {
        Self {
            id: stored.id,
            source: stored.source,
            phone_number: stored.phone_number,
            text: stored.body,
            matched: serde_json::from_str(&stored.matched).unwrap_or_default(),
            received_at: stored.received_at,
            due,
            decision: stored.decision,
            decided_by: stored.decided_by,
            decided_at: stored.decided_at,
            reason: stored.reason,
        }
    }
}

/// What a person decided a reply is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    OptOut,
    NotOptOut,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::OptOut => "opt_out",
            Decision::NotOptOut => "not_opt_out",
        }
    }
}

/// A person's decision of a reply (`POST /v1/review/{id}`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewDecision {
    pub decision: Decision,
    /// Who decided: kept with the decision, and in an opt-out's evidence.
    #[schema(min_length = 1, max_length = 200)]
    pub by: String,
    /// Why, when a reason is worth keeping.
    #[serde(default)]
    #[schema(max_length = 500)]
    pub reason: Option<String>,
}

/// A reply held for review, as a source's record gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldReply<'a> {
    pub record: &'a str,
    pub phone_number: &'a str,
    pub body: &'a str,
    pub matched: &'a [String],
    pub stands_on: &'a serde_json::Value,
    pub received_at: Timestamp,
}
