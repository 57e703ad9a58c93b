//! The report's opt-outs a page at a time: each page read in one statement, then its
//! subscribers' acknowledgements, its destinations' outcomes and its messages, so that
//! memory holds one page whatever the window.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{DestinationTime, Item, Message, Rules, SERVICE, State, Window};
use crate::model::{
    AckSpan, EntryOutcome, LeadMessage, OptOutRow, OutcomeKind, PushState, SharedCopy, Source,
    Timestamp,
};
use crate::store::{ComplianceStore, DestinationStore, Pool, SubscriberStore};

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

/// A destination's place in an opt-out: had at its `sent` time, not yet without an
/// outcome, or unreached with its `unmatched`, `refused` or `unconfirmed` outcome and
/// reason; had without a request of its own when `already` told (at the time the entry it
/// follows was), or `through_leads` (at `leads`: when its leads' entries were).
fn had_by(
    name: &str,
    outcome: Option<&EntryOutcome>,
    leads: Option<&Option<Timestamp>>,
) -> DestinationTime {
    let Some(o) = outcome else {
        return DestinationTime::had(name, None);
    };
    let honoured_at = match o.outcome {
        OutcomeKind::Sent => return DestinationTime::had(name, Some(o.at)),
        OutcomeKind::Already => Some(o.at),
        OutcomeKind::ThroughLeads => leads.copied().unwrap_or(Some(o.at)),
        OutcomeKind::Unmatched | OutcomeKind::Refused | OutcomeKind::Unconfirmed => None,
    };
    DestinationTime {
        outcome: Some(o.outcome),
        reason: o.reason.clone(),
        ..DestinationTime::had(name, honoured_at)
    }
}

/// When each destination had, through its leads' entries, each of `rows` it ended
/// `through_leads` (by destination and seq): when the last of the entries recorded with
/// it that the destination takes was had (sent, or told already); `None` while one has no
/// outcome there yet. Those it could not place are findings of their own (their own
/// items), not of the account-wide opt-out; with no such entry (no organization held the
/// number), when the destination passed it.
async fn through_leads(
    pool: &Pool,
    rules: &Rules,
    rows: &[OptOutRow],
    outcomes: &Outcomes,
) -> Result<HashMap<(String, i64), Option<Timestamp>>, crate::store::Error> {
    let mut through = HashMap::new();
    for row in rows {
        let passed: Vec<(&Arc<crate::sender::Subscriber>, Timestamp)> = rules
            .destinations
            .iter()
            .filter_map(|d| {
                let o = outcomes.get(&d.name)?.get(&row.seq)?;
                (o.outcome == OutcomeKind::ThroughLeads).then_some((d, o.at))
            })
            .collect();
        if passed.is_empty() {
            continue;
        }
        let with = pool.entries_with(row.seq).await?;
        let seqs: Vec<i64> = with.iter().map(|(seq, _, _)| *seq).collect();
        let theirs = outcomes_of(pool, &seqs).await?;
        for (destination, passed_at) in passed {
            let mut at = Some(passed_at);
            for (seq, org, superseded) in &with {
                if *superseded || !destination.takes_from(&row.account_id, org, row.source) {
                    continue;
                }
                let had = theirs.get(&destination.name).and_then(|of| of.get(seq));
                at = match had {
                    None => None,
                    Some(o) if o.outcome.unreached() => at,
                    Some(o) => at.zip(Some(o.at)).map(|(a, b)| a.max(b)),
                };
            }
            through.insert((destination.name.clone(), row.seq), at);
        }
    }
    Ok(through)
}

/// The destinations' outcomes of `rows`, by destination and seq.
type Outcomes = HashMap<String, HashMap<i64, EntryOutcome>>;

/// Most seqs one read of outcomes spans: the rows of a page may lie far apart (one
/// organization's opt-outs in a ledger of many), and what lies between them is not read
/// into memory.
const OUTCOME_SPAN: i64 = 4 * PAGE as i64;

/// The destinations' outcomes of `rows` (in seq order), read a span of seqs at a time.
async fn destination_outcomes(
    pool: &Pool,
    rules: &Rules,
    rows: &[OptOutRow],
) -> Result<Outcomes, crate::store::Error> {
    if rules.destinations.is_empty() {
        return Ok(Outcomes::new());
    }
    let seqs: Vec<i64> = rows.iter().map(|row| row.seq).collect();
    outcomes_of(pool, &seqs).await
}

/// Every destination's outcomes of the entries `seqs` (in seq order), read a span of seqs
/// at a time.
async fn outcomes_of(pool: &Pool, seqs: &[i64]) -> Result<Outcomes, crate::store::Error> {
    let mut by_destination = Outcomes::new();
    let mut rest = seqs;
    while let Some(&first) = rest.first() {
        let within = rest
            .iter()
            .take_while(|seq| **seq - first < OUTCOME_SPAN)
            .count();
        let (span, after) = rest.split_at(within);
        rest = after;
        let last = span.last().copied().unwrap_or(first);
        let seqs: HashSet<i64> = span.iter().copied().collect();
        for outcome in pool.outcomes_of_entries(first, last).await? {
            if seqs.contains(&outcome.seq) {
                by_destination
                    .entry(outcome.destination.clone())
                    .or_default()
                    .insert(outcome.seq, outcome);
            }
        }
    }
    Ok(by_destination)
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

/// For each of `rows`, the confirmation and the other messages sent to its lead after it
/// and before the next opt-in of its pair.
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

async fn messages_after(
    pool: &Pool,
    rules: &Rules,
    rows: &[OptOutRow],
) -> Result<Vec<(Option<Message>, Vec<Message>)>, crate::store::Error> {
    let mut found = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(PAGE) {
        let mut leads: Vec<&str> = chunk.iter().flat_map(OptOutRow::leads).collect();
        leads.sort_unstable();
        leads.dedup();
        // Lead ids are per account: a message is its account's lead's.
        let mut by_lead: HashMap<(String, String), Vec<LeadMessage>> = HashMap::new();
        for message in pool.messages_of_leads(&leads).await? {
            by_lead
                .entry((message.account_id.clone(), message.lead_id.clone()))
                .or_default()
                .push(message);
        }
        for row in chunk {
            found.push(after(row, rules, &by_lead));
        }
    }
    Ok(found)
}

fn after(
    row: &OptOutRow,
    rules: &Rules,
    by_lead: &HashMap<(String, String), Vec<LeadMessage>>,
) -> (Option<Message>, Vec<Message>) {
    let from = row.occurred_at.at();
    let until = row.opted_in_at.map(Timestamp::at);
    let mut messages: Vec<Message> = row
        .leads()
        .filter_map(|lead| by_lead.get(&(row.account_id.to_string(), lead.to_owned())))
        .flatten()
        .filter_map(|m| {
            let created = DateTime::parse_from_rfc3339(m.created_at.as_deref()?)
                .ok()?
                .to_utc();
            (created > from && until.is_none_or(|until| created < until)).then(|| Message {
                id: m.id.clone(),
                status: m.status.clone(),
                created_at: Timestamp(created),
            })
        })
        .collect();
    messages.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    messages.dedup_by(|a, b| a.id == b.id);
    let confirmation = messages
        .first()
        .filter(|m| m.created_at.at() - from <= rules.confirmation_window)
        .cloned();
    if confirmation.is_some() {
        messages.remove(0);
    }
    (confirmation, messages)
}

#[cfg(test)]
mod tests;
