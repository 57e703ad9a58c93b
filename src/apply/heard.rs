//! Posts a source was given (a person's reply to a campaign's number), applied with the
//! outbox rows they came in: recorded as that source's records are
//! ([`super::sourced::Recorder`]: each record once, an opt-out held in the source's
//! accounts and organizations, a number that says so already `confirmed`), in the batch's
//! transaction, so a reply's row is applied exactly when its entries are written.

use chrono::{DateTime, Utc};

use super::InForce;
use super::{Outcome, Pending, Settle};
use crate::events::Event;
use crate::model::Timestamp;
use crate::model::read::ReadRecord;
use crate::store::{ApplyTx, SourceTx};

/// Records the replies of `rows` (each a [`Event::Heard`]) and settles their rows: applied,
/// or quarantined when their source is no longer configured (a reload removed it; `outbox
/// requeue` once it is back).
pub(super) async fn record<T: ApplyTx + SourceTx + ?Sized>(
    tx: &mut T,
    rows: &[&Pending],
    now: DateTime<Utc>,
    sources: &InForce,
    settle: Settle,
) -> Result<Outcome, crate::store::Error> {
    let mut outcome = Outcome::default();
    if rows.is_empty() {
        return Ok(outcome);
    }
    // Each source's rows, and their records (a post may hold none, or several).
    let mut by_source: Vec<(&str, Vec<i64>, Vec<ReadRecord>)> = Vec::new();
    for row in rows {
        let Ok(Event::Heard(heard)) = &row.event else {
            continue;
        };
        let at = match by_source
            .iter()
            .position(|(name, ..)| *name == heard.source)
        {
            Some(at) => at,
            None => {
                by_source.push((heard.source.as_str(), Vec::new(), Vec::new()));
                by_source.len() - 1
            }
        };
        by_source[at].1.push(row.id);
        by_source[at].2.extend(
            heard
                .records
                .iter()
                .map(|record| kept_under(record, &row.dedup_key)),
        );
    }
    let mut applied = Vec::new();
    let mut quarantined = Vec::new();
    for (name, ids, records) in by_source {
        let Some(recorder) = sources.recorder(name) else {
            let reason = format!(
                "source {name:?} is not configured (a reload removed it?): requeue the row once it is"
            );
            quarantined.extend(ids.iter().map(|id| (*id, reason.clone())));
            continue;
        };
        tx.posted_at(name, recorder.kind.as_str(), Timestamp(now))
            .await?;
        let counts = recorder.record_slice(tx, &records).await?;
        outcome.heard.push((name.to_owned(), counts));
        applied.extend(ids);
    }
    for (id, reason) in &quarantined {
        tracing::warn!(outbox_id = id, %reason, "delivery quarantined");
    }
    let settled: &[i64] = match settle {
        Settle::All => &applied,
        Settle::Quarantined => &[],
    };
    tx.settle_outbox(settled, &quarantined, now).await?;
    outcome.applied = applied.len() as u64;
    outcome.quarantined = quarantined.len() as u64;
    Ok(outcome)
}

/// `record`, naming the post it came in (`post`: the outbox key the post is kept under)
/// when that is not the record's own `event_ref`: a post of several records (a carrier's
/// batch of callbacks) is kept by its bytes, and each record's evidence finds it by that
/// key.
fn kept_under(record: &ReadRecord, post: &str) -> ReadRecord {
    let mut record = record.clone();
    let own = crate::model::read::posted_to(post)
        .map(|(kind, name)| crate::model::read::event_ref(kind, name, &record.key));
    if own.as_deref() != Some(post)
        && let Some(stands_on) = record.stands_on.as_object_mut()
    {
        stands_on.insert(POST.to_owned(), post.into());
    }
    record
}

/// The key of a record's evidence that names the post it came in, when the post is kept
/// under another key than the record's ([`kept_under`]).
pub const POST: &str = "post";
