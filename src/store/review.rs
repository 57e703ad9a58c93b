//! Replies kept for a person to decide: the listing, one reply, and what waits (the
//! metrics' and the compliance report's counts). Held and decided in a write transaction
//! ([`super::SourceTx::hold_replies`], [`super::SourceTx::decide_reply`]).
#![allow(async_fn_in_trait)] // Called on the concrete `Pool`, whose futures are Send.

use super::backend::on_backend;
use super::{Error, Pool};
use crate::model::Timestamp;
use crate::model::review::StoredReply;

const COLUMNS: &str = "id, source, record, phone_number, body, matched, stands_on, received_at,
     decision, decided_by, decided_at, reason";

/// The replies kept for review.
pub trait ReviewStore {
    /// Replies waiting for a decision, oldest first; with `decided_too`, the decided ones
    /// after them, newest first; `limit` at most.
    async fn review_replies(
        &self,
        decided_too: bool,
        limit: i64,
    ) -> Result<Vec<StoredReply>, Error>;

    /// Reply `id`.
    async fn review_reply(&self, id: i64) -> Result<Option<StoredReply>, Error>;

    /// How many wait, and when the oldest of them was received.
    async fn review_waiting(&self) -> Result<(i64, Option<Timestamp>), Error>;

    /// What the compliance report says of the replies: how many wait now and when the
    /// oldest of them was received, and of those received in `since..until`, how many
    /// were decided an opt-out and how many not.
    async fn review_tally(&self, since: Timestamp, until: Timestamp) -> Result<ReviewTally, Error>;
}

/// [`ReviewStore::review_tally`]: waiting, the oldest's receipt, decided an opt-out, not.
pub type ReviewTally = (i64, Option<Timestamp>, i64, i64);

impl ReviewStore for Pool {
    async fn review_replies(
        &self,
        decided_too: bool,
        limit: i64,
    ) -> Result<Vec<StoredReply>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(&format!(
                "SELECT {COLUMNS} FROM review_replies WHERE decision IS NULL OR $1
                     ORDER BY decision IS NOT NULL,
                         CASE WHEN decision IS NULL THEN received_at END,
                         decided_at DESC, id
                     LIMIT $2"
            ))
            .bind(decided_too)
            .bind(limit)
            .fetch_all(pool)
            .await?)
        })
    }

    async fn review_reply(&self, id: i64) -> Result<Option<StoredReply>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(&format!(
                "SELECT {COLUMNS} FROM review_replies WHERE id = $1"
            ))
            .bind(id)
            .fetch_optional(pool)
            .await?)
        })
    }

    async fn review_waiting(&self) -> Result<(i64, Option<Timestamp>), Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT COUNT(*), MIN(received_at) FROM review_replies WHERE decision IS NULL",
            )
            .fetch_one(pool)
            .await?)
        })
    }

    async fn review_tally(&self, since: Timestamp, until: Timestamp) -> Result<ReviewTally, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(
                "SELECT COUNT(*) FILTER (WHERE decision IS NULL),
                        MIN(received_at) FILTER (WHERE decision IS NULL),
                        COUNT(*) FILTER (WHERE decision = 'opt_out'
                            AND received_at >= $1 AND received_at < $2),
                        COUNT(*) FILTER (WHERE decision = 'not_opt_out'
                            AND received_at >= $1 AND received_at < $2)
                     FROM review_replies",
            )
            .bind(since)
            .bind(until)
            .fetch_one(pool)
            .await?)
        })
    }
}
