//! Replies posted to a source (a person's reply to a Twilio number), applied with the
//! outbox rows they came in: recorded as that source's records are
//! ([`super::sourced::Recorder`]: each record once, an opt-out held in the source's
//! accounts and organizations, a number that says so already `confirmed`), in the batch's
//! transaction, so a reply's row is applied exactly when its entries are written.

use chrono::{DateTime, Utc};

use super::InForce;
use super::{Outcome, Pending, Settle};
use crate::events::Event;
use crate::model::Timestamp;
use crate::store::{ApplyTx, SourceTx};
use crate::systems::source::ReadRecord;

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
    let mut by_source: Vec<(&str, Vec<(i64, &ReadRecord)>)> = Vec::new();
    for row in rows {
        let Ok(Event::Heard(heard)) = &row.event else {
            continue;
        };
        let entry = (row.id, &heard.record);
        match by_source.iter_mut().find(|(name, _)| *name == heard.source) {
            Some((_, records)) => records.push(entry),
            None => by_source.push((heard.source.as_str(), vec![entry])),
        }
    }
    let mut applied = Vec::new();
    let mut quarantined = Vec::new();
    for (name, records) in by_source {
        let Some(recorder) = sources.recorder(name) else {
            let reason = format!(
                "source {name:?} is not configured (a reload removed it?): requeue the row once it is"
            );
            quarantined.extend(records.iter().map(|(id, _)| (*id, reason.clone())));
            continue;
        };
        tx.posted_at(name, recorder.kind.as_str(), Timestamp(now))
            .await?;
        let these: Vec<ReadRecord> = records.iter().map(|(_, r)| (*r).clone()).collect();
        let counts = recorder.record_slice(tx, &these).await?;
        outcome.heard.push((name.to_owned(), counts));
        applied.extend(records.iter().map(|(id, _)| *id));
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
