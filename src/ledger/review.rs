//! The replies kept for review as people read them: each with the date it is due by, the
//! compliance calendar's deadline from its receipt (`[compliance]`).

use crate::model::Timestamp;
use crate::model::business_days::BusinessDays;
use crate::model::review::{ReviewItem, StoredReply};
use crate::store::{Pool, ReviewStore as _};

/// The replies waiting, oldest first (with `decided_too`, the decided ones after them),
/// `limit` at most, each due on `calendar`'s deadline from its receipt.
pub async fn items(
    pool: &Pool,
    calendar: &BusinessDays,
    decided_too: bool,
    limit: i64,
) -> Result<Vec<ReviewItem>, crate::store::Error> {
    let stored = pool.review_replies(decided_too, limit).await?;
    Ok(stored
        .into_iter()
        .map(|reply| item(calendar, reply))
        .collect())
}

/// `reply` as listed.
pub fn item(calendar: &BusinessDays, reply: StoredReply) -> ReviewItem {
    let due = Timestamp(calendar.deadline(reply.received_at.0));
    ReviewItem::of(reply, due)
}
