//! The report's opt-outs a page at a time: each page read in one statement, then its
//! subscribers' acknowledgements, its destinations' outcomes and its messages, so that
//! memory holds one page whatever the window. Where the destinations stand is
//! `items/destinations.rs`; the messages after each opt-out, `items/messages.rs`.

/// The destinations' outcomes of a page, and when they had its opt-outs.
mod destinations;
/// The confirmation and the messages sent after each opt-out of a page.
mod messages;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{DestinationTime, Item, Message, Rules, SERVICE, State, Window};
use crate::model::{AckSpan, OptOutRow, OutcomeKind, PushState, SharedCopy, Source, Timestamp};
use crate::store::{ComplianceStore, Pool, SubscriberStore};
use destinations::{destination_outcomes, had_by, through_leads};
use messages::messages_after;

/// Opt-outs read, and laid out, at a time.
pub const PAGE: usize = 1000;

/// The opt-outs of a window, as [`Item`]s, a page at a time in seq order.
pub struct Items {
    pool: Pool,
    rules: Arc<Rules>,
    window: Window,
    now: DateTime<Utc>,
    /// The last seq read.
    after: i64,
    done: bool,
}

impl Items {
    pub fn new(pool: Pool, rules: Arc<Rules>, window: Window, now: DateTime<Utc>) -> Self {
        Self {
            pool,
            rules,
            window,
            now,
            after: 0,
            done: false,
        }
    }

    /// The sources as they stand now ([`super::standings`]).
    pub async fn sources(&self) -> Result<Vec<super::SourceStanding>, crate::store::Error> {
        super::standings(&self.pool, &self.rules, self.now).await
    }

    /// The replies kept for review as they stand now ([`super::review_standing`]).
    pub async fn review(&self) -> Result<super::ReviewStanding, crate::store::Error> {
        super::review_standing(&self.pool, &self.rules, &self.window, self.now).await
    }

    /// The next page, or `None` once every opt-out of the window was given.
    pub async fn next_page(&mut self) -> Result<Option<Vec<Item>>, crate::store::Error> {
        if self.done {
            return Ok(None);
        }
        let rows = self
            .pool
            .opt_outs(
                self.window.since,
                self.window.until,
                self.window.scope(),
                self.after,
                PAGE as i64,
            )
            .await?;
        self.done = rows.len() < PAGE;
        let Some(last) = rows.last() else {
            return Ok(None);
        };
        self.after = last.seq;
        let rules = &self.rules;
        let acks = subscriber_acks(&self.pool, rules, &rows).await?;
        let outcomes = destination_outcomes(&self.pool, rules, &rows).await?;
        let through = through_leads(&self.pool, rules, &rows, &outcomes).await?;
        let mut messages = messages_after(&self.pool, rules, &rows).await?;
        let mut shared = shared_times(&self.pool, rules, &rows).await?;
        let service_through = service_through_leads(&self.pool, &rows).await?;
        let items = rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                let mut destinations = Vec::new();
                if let Some(at) = service_time(row) {
                    destinations.push(DestinationTime::had(SERVICE, at));
                } else if let Some(at) = service_through.get(&row.seq) {
                    destinations.push(DestinationTime {
                        outcome: Some(OutcomeKind::ThroughLeads),
                        reason: Some(THROUGH_LEADS.to_owned()),
                        ..DestinationTime::had(SERVICE, *at)
                    });
                }
                for (subscriber, acked) in rules.subscribers.iter().zip(&acks) {
                    if subscriber.takes_from(&row.account_id, &row.organization_id, row.source) {
                        destinations.push(DestinationTime::had(&subscriber.name, acked[i]));
                    }
                }
                destinations.append(&mut shared[i]);
                // A destination takes the opt-outs that took effect (as its sender does).
                for destination in &rules.destinations {
                    let takes =
                        destination.takes_from(&row.account_id, &row.organization_id, row.source)
                            && !destination.reads_back(row.source, &row.event_ref);
                    if !row.superseded && takes {
                        let of = outcomes.get(&destination.name);
                        let outcome = of.and_then(|of| of.get(&row.seq));
                        let leads = through.get(&(destination.name.clone(), row.seq));
                        destinations.push(had_by(&destination.name, outcome, leads));
                    }
                }
                let (confirmation, sent_after) = std::mem::take(&mut messages[i]);
                item(row, rules, destinations, confirmation, sent_after, self.now)
            })
            .collect();
        Ok(Some(items))
    }
}

fn item(
    row: &OptOutRow,
    rules: &Rules,
    destinations: Vec<DestinationTime>,
    confirmation: Option<Message>,
    sent_after_opt_out: Vec<Message>,
    now: DateTime<Utc>,
) -> Item {
    let deadline = rules.calendar.deadline(row.occurred_at.at());
    let unreached = destinations.iter().any(DestinationTime::unreached);
    let others_had = destinations
        .iter()
        .filter(|d| !d.unreached())
        .all(|d| d.honoured_at.is_some());
    // With no destination the ledger itself is the only one: had when recorded.
    let honoured_at = if destinations.is_empty() {
        Some(row.recorded_at)
    } else {
        destinations
            .iter()
            .map(|d| d.honoured_at)
            .collect::<Option<Vec<_>>>()
            .and_then(|times| times.into_iter().max())
    };
    let state = match honoured_at {
        _ if unreached && others_had => State::Unreachable,
        Some(at) if at.at() <= deadline => State::Honoured,
        Some(_) => State::HonouredLate,
        None if now <= deadline => State::Pending,
        None => State::Overdue,
    };
    Item {
        seq: row.seq,
        phone_number: row.phone_number.clone(),
        organization_id: row.organization_id.clone(),
        account_id: row.account_id.to_string(),
        lead_id: row.lead_id.clone().or_else(|| row.state_lead_id.clone()),
        occurred_at: row.occurred_at,
        source: row.source,
        read_by: crate::model::read::source_name_of(row.source, &row.event_ref).map(str::to_owned),
        seen_at: row.recorded_at,
        state,
        deadline: Timestamp(deadline),
        honoured_at,
        destinations,
        confirmation,
        sent_after_opt_out,
    }
}

/// When the service had the opt-out: `None` when it is no destination of it, `Some(None)`
/// while it has not had it yet.
fn service_time(row: &OptOutRow) -> Option<Option<Timestamp>> {
    match (row.source, row.push_state) {
        (Source::Webhook | Source::Reconcile, _) => Some(Some(row.occurred_at)),
        (_, Some(PushState::Sent)) => Some(row.push_finished_at),
        (_, Some(PushState::Pending | PushState::Failed)) => Some(None),
        (_, Some(PushState::Superseded) | None) => None,
    }
}

/// How the service had an account-wide opt-out: through the entries recorded with it.
const THROUGH_LEADS: &str = "account-wide: had through the entries recorded with it for the organizations holding the number";

/// When the service had each account-wide opt-out of `rows` (organization `*`, which is
/// never pushed itself; by seq): once every entry recorded with it in its account (the same
/// `event_ref`, one per organization holding the number) was, each when its push was
/// answered (or recorded, when no lead of it was mirrored to push).
async fn service_through_leads(
    pool: &Pool,
    rows: &[OptOutRow],
) -> Result<HashMap<i64, Option<Timestamp>>, crate::store::Error> {
    let account_wide: Vec<&OptOutRow> = rows
        .iter()
        .filter(|r| r.organization_id == crate::model::ACCOUNT_WIDE)
        .collect();
    let refs: Vec<String> = account_wide.iter().map(|r| r.event_ref.clone()).collect();
    let copies = pool.shared_copies(&refs).await?;
    Ok(account_wide
        .iter()
        .map(|row| {
            let with: Vec<&SharedCopy> = copies
                .iter()
                .filter(|c| c.event_ref == row.event_ref && c.account_id == row.account_id)
                .collect();
            (row.seq, had_all(&with))
        })
        .collect())
}

/// For each subscriber, when it had each of `rows` (by index), from its acknowledged
/// requests: the earliest that carried the entry.
async fn subscriber_acks(
    pool: &Pool,
    rules: &Rules,
    rows: &[OptOutRow],
) -> Result<Vec<Vec<Option<Timestamp>>>, crate::store::Error> {
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return Ok(vec![Vec::new(); rules.subscribers.len()]);
    };
    let mut all = Vec::with_capacity(rules.subscribers.len());
    for subscriber in &rules.subscribers {
        let spans = pool
            .ack_spans(&subscriber.name, first.seq, last.seq)
            .await?;
        all.push(earliest_acks(&spans, rows));
    }
    Ok(all)
}

/// The earliest `acked_at` of the spans holding each row's seq; rows in seq order, spans
/// by their first seq. A sweep: spans join when the rows reach their first seq and leave
/// once the rows pass their last.
fn earliest_acks(spans: &[AckSpan], rows: &[OptOutRow]) -> Vec<Option<Timestamp>> {
    let mut next = 0;
    let mut open: BTreeSet<(Timestamp, i64, usize)> = BTreeSet::new();
    rows.iter()
        .map(|row| {
            while next < spans.len() && spans[next].first_seq <= row.seq {
                let span = &spans[next];
                open.insert((span.acked_at, span.last_seq, next));
                next += 1;
            }
            open.retain(|(_, last, _)| *last >= row.seq);
            open.first().map(|(at, _, _)| *at)
        })
        .collect()
}

/// For each of `rows`, when each other member of its caller had it (from the caller's
/// date; sharing across accounts, always): its copies there recorded and their pushes to
/// that account's service sent. A member that held the number opted out already records
/// no copy: it had the opt-out once sharing passed it. A copy has no member of its own to
/// reach.
async fn shared_times(
    pool: &Pool,
    rules: &Rules,
    rows: &[OptOutRow],
) -> Result<Vec<Vec<DestinationTime>>, crate::store::Error> {
    if rules.callers.is_empty() {
        return Ok(vec![Vec::new(); rows.len()]);
    }
    let refs: Vec<String> = rows.iter().map(|r| format!("shared:{}", r.seq)).collect();
    let copies = pool.shared_copies(&refs).await?;
    let shared_up_to: i64 = pool
        .state(crate::share::CURSOR)
        .await?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut by_entry: HashMap<i64, Vec<&SharedCopy>> = HashMap::new();
    for copy in &copies {
        if let Some(follows) = copy.follows() {
            by_entry.entry(follows).or_default().push(copy);
        }
    }
    Ok(rows
        .iter()
        .map(|row| {
            if row.event_ref.starts_with("shared:") {
                return Vec::new();
            }
            let copies = by_entry.get(&row.seq).map(Vec::as_slice).unwrap_or(&[]);
            let mut times = Vec::new();
            for caller in &rules.callers {
                if !caller.in_force_at(row.occurred_at.at()) {
                    continue;
                }
                for member in caller.others(&row.account_id, &row.organization_id) {
                    let there: Vec<&SharedCopy> = copies
                        .iter()
                        .copied()
                        .filter(|c| member.contains(&c.account_id, &c.organization_id))
                        .collect();
                    let at = match there.as_slice() {
                        [] if shared_up_to >= row.seq => Some(row.recorded_at),
                        [] => None,
                        there => had_all(there),
                    };
                    times.push(DestinationTime::had(
                        &super::member_destination(caller, member),
                        at,
                    ));
                }
            }
            times
        })
        .collect())
}

/// When an account had every copy: recorded, and pushed where a push was queued.
fn had_all(copies: &[&SharedCopy]) -> Option<Timestamp> {
    let mut latest = None;
    for copy in copies {
        let at = match copy.push_state {
            None | Some(PushState::Superseded) => copy.recorded_at,
            Some(PushState::Sent) => copy.push_finished_at?,
            Some(PushState::Pending | PushState::Failed) => return None,
        };
        latest = latest.max(Some(at));
    }
    latest
}

#[cfg(test)]
mod tests;
