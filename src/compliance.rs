//! The compliance report: for every opt-out, when each destination had it against its legal
//! deadline (`[compliance]`: business days in a time zone), and every message sent to the
//! person after it. The JSON form is the contract; the CLI's text and CSV are views of it.
//!
//! Destinations: the service, and each `[[subscriber]]` whose filters take the entry. The
//! service had an opt-out it announced (webhook, reconciliation) at the event's own time,
//! and one made here (local, import, suppression) when its push was answered 2xx; an opt-out
//! made here with no push (no lead at the service to send it to, or a newer change sent
//! instead) has no service destination. A subscriber had it when the request carrying it
//! was answered 2xx (`subscriber_acks`).

mod view;
pub use view::{View, behind, html, waiting};

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Serialize;

use crate::model::business_days::BusinessDays;
use crate::model::{AckSpan, LeadMessage, OptOutRow, PushState, Source, Timestamp};
use crate::store::{ComplianceStore, Pool, SubscriberStore};
use crate::subscribers::Subscriber;

/// The service as a destination.
pub const SERVICE: &str = "service";
/// Opt-outs whose messages are read in one statement.
const MESSAGES_CHUNK: usize = 1000;
/// Most opt-outs per destination looked at for the gauges (the oldest come first).
const GAUGE_LOOK: i64 = 10_000;

/// What is not honoured yet, for the metrics: per destination the age of the oldest opt-out
/// it has not had, and how many opt-outs are past their deadline and not everywhere.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Backlog {
    /// (destination, seconds): 0 when it has had every opt-out.
    pub oldest_pending_secs: Vec<(String, f64)>,
    pub overdue: u64,
}

/// The [`Backlog`] as of `now`: the service's from the push queue, each subscriber's from
/// the opt-outs after its cursor (each looked at up to [`GAUGE_LOOK`] opt-outs deep).
pub async fn backlog(
    pool: &Pool,
    rules: &Rules,
    now: DateTime<Utc>,
) -> Result<Backlog, crate::store::Error> {
    let age = |at: Option<Timestamp>| {
        at.map_or(0.0, |at| {
            (now - at.at()).num_milliseconds().max(0) as f64 / 1000.0
        })
    };
    let mut overdue = BTreeSet::new();
    let mut count_overdue = |seq: i64, at: Timestamp| {
        if rules.calendar.deadline(at.at()) < now {
            overdue.insert(seq);
        }
    };
    let unsent = pool.unsent_opt_outs(GAUGE_LOOK).await?;
    for (seq, at) in &unsent {
        count_overdue(*seq, *at);
    }
    let mut oldest = vec![(
        SERVICE.to_owned(),
        age(unsent.iter().map(|(_, at)| *at).min()),
    )];
    for subscriber in &rules.subscribers {
        let cursor = pool
            .subscriber_state(&subscriber.name)
            .await?
            .map_or(0, |state| state.cursor);
        let behind: Vec<(i64, Timestamp)> = pool
            .opt_outs_after(cursor, GAUGE_LOOK)
            .await?
            .into_iter()
            .filter(|(_, org, source, _)| subscriber.takes_from(org, *source))
            .map(|(seq, _, _, at)| (seq, at))
            .collect();
        for (seq, at) in &behind {
            count_overdue(*seq, *at);
        }
        let first = behind.iter().map(|(_, at)| *at).min();
        oldest.push((subscriber.name.clone(), age(first)));
    }
    Ok(Backlog {
        oldest_pending_secs: oldest,
        overdue: overdue.len() as u64,
    })
}

/// What a report covers: opt-outs that occurred in `since..until`, in one organization or
/// all.
#[derive(Debug, Clone)]
pub struct Window {
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub organization: Option<String>,
}

/// What the report is measured against.
pub struct Rules {
    pub calendar: BusinessDays,
    /// The calendar's zone, as configured.
    pub timezone: String,
    pub deadline_business_days: u32,
    pub confirmation_window: TimeDelta,
    pub subscribers: Vec<Arc<Subscriber>>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub since: Timestamp,
    pub until: Timestamp,
    pub deadline_business_days: u32,
    pub totals: Totals,
    pub destinations: Vec<DestinationSummary>,
    pub items: Vec<Item>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub opt_outs: u64,
    pub honoured: u64,
    pub honoured_late: u64,
    pub pending: u64,
    pub overdue: u64,
    pub sent_after_opt_out: u64,
}

/// How fast one destination had the opt-outs it had, in seconds after each occurred.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationSummary {
    pub name: String,
    pub honoured: u64,
    pub pending: u64,
    pub p50_secs: Option<f64>,
    pub p99_secs: Option<f64>,
    pub max_secs: Option<f64>,
}

/// Where an opt-out stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum State {
    /// Every destination had it by the deadline.
    Honoured,
    /// Every destination had it, one after the deadline.
    HonouredLate,
    /// Not yet everywhere; the deadline is ahead.
    Pending,
    /// Not yet everywhere; the deadline has passed.
    Overdue,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Honoured => "honoured",
            State::HonouredLate => "honouredLate",
            State::Pending => "pending",
            State::Overdue => "overdue",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    pub seq: i64,
    pub phone_number: String,
    pub organization_id: String,
    pub lead_id: Option<String>,
    pub occurred_at: Timestamp,
    pub source: Source,
    pub state: State,
    /// The end of the last business day allowed.
    pub deadline: Timestamp,
    /// When the slowest destination had it, once every one has.
    pub honoured_at: Option<Timestamp>,
    pub destinations: Vec<DestinationTime>,
    /// The one message allowed within the confirmation window.
    pub confirmation: Option<Message>,
    pub sent_after_opt_out: Vec<Message>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationTime {
    pub name: String,
    pub honoured_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: String,
    pub status: String,
    pub created_at: Timestamp,
}

/// How far back a report looks when no start is given.
pub const DEFAULT_DAYS: i64 = 30;

/// Why a window cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WindowError(String);

impl Window {
    /// The window of `since` and `until` as given (a `YYYY-MM-DD` day in the calendar's
    /// zone, `until` taking the whole day; or an RFC 3339 instant): by default the
    /// [`DEFAULT_DAYS`] days up to `now`.
    pub fn parse(
        since: Option<&str>,
        until: Option<&str>,
        organization: Option<String>,
        calendar: &BusinessDays,
        now: DateTime<Utc>,
    ) -> Result<Self, WindowError> {
        let until = match until.filter(|u| !u.trim().is_empty()) {
            Some(text) => instant(text, "until", calendar, 1)?,
            None => now,
        };
        let since = match since.filter(|s| !s.trim().is_empty()) {
            Some(text) => instant(text, "since", calendar, 0)?,
            None => until - TimeDelta::days(DEFAULT_DAYS),
        };
        if since >= until {
            return Err(WindowError(format!(
                "since ({}) must be before until ({})",
                Timestamp(since),
                Timestamp(until)
            )));
        }
        let organization = organization.filter(|o| !o.trim().is_empty());
        Ok(Self {
            since,
            until,
            organization,
        })
    }
}

/// `text` as an instant: RFC 3339, or the start of a `YYYY-MM-DD` day `days_after` days
/// later in the calendar's zone.
fn instant(
    text: &str,
    name: &str,
    calendar: &BusinessDays,
    days_after: u64,
) -> Result<DateTime<Utc>, WindowError> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.to_utc());
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|day| day.checked_add_days(chrono::Days::new(days_after)))
        .and_then(|day| calendar.day_start(day))
        .ok_or_else(|| {
            WindowError(format!(
                "{name}: {text:?} is neither a YYYY-MM-DD day nor an RFC 3339 time"
            ))
        })
}

impl Default for Rules {
    /// The defaults of `[compliance]`, with no subscriber.
    fn default() -> Self {
        let compliance = crate::settings::ComplianceSettings::default();
        Self {
            calendar: BusinessDays::new(
                compliance.deadline_business_days,
                chrono_tz::America::New_York,
                [],
            ),
            timezone: compliance.timezone,
            deadline_business_days: compliance.deadline_business_days,
            confirmation_window: TimeDelta::seconds(300),
            subscribers: Vec::new(),
        }
    }
}

impl Rules {
    /// The rules of the configuration: its calendar and window, its subscribers.
    pub fn of(
        settings: &crate::settings::Settings,
    ) -> Result<Self, crate::settings::SettingsError> {
        let compliance = &settings.compliance;
        Ok(Self {
            calendar: compliance.business_days()?,
            timezone: compliance.timezone.clone(),
            deadline_business_days: compliance.deadline_business_days,
            confirmation_window: TimeDelta::seconds(
                i64::try_from(compliance.confirmation_window_secs).unwrap_or(i64::MAX),
            ),
            subscribers: crate::subscribers::configured(&settings.subscriber),
        })
    }
}

/// The report of `window` as of `now`.
pub async fn report(
    pool: &Pool,
    rules: &Rules,
    window: &Window,
    now: DateTime<Utc>,
) -> Result<Report, crate::store::Error> {
    let rows = pool
        .opt_outs(window.since, window.until, window.organization.as_deref())
        .await?;
    let acks = subscriber_acks(pool, rules, &rows).await?;
    let mut messages = messages_after(pool, rules, &rows).await?;
    let mut items = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        let mut destinations = Vec::new();
        if let Some(at) = service_time(row) {
            destinations.push(DestinationTime {
                name: SERVICE.to_owned(),
                honoured_at: at,
            });
        }
        for (subscriber, acked) in rules.subscribers.iter().zip(&acks) {
            if subscriber.takes_from(&row.organization_id, row.source) {
                destinations.push(DestinationTime {
                    name: subscriber.name.clone(),
                    honoured_at: acked[i],
                });
            }
        }
        let (confirmation, sent_after_opt_out) = std::mem::take(&mut messages[i]);
        items.push(item(
            row,
            rules,
            destinations,
            confirmation,
            sent_after_opt_out,
            now,
        ));
    }
    Ok(Report {
        since: Timestamp(window.since),
        until: Timestamp(window.until),
        deadline_business_days: rules.deadline_business_days,
        totals: totals(&items),
        destinations: summaries(rules, &items),
        items,
    })
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
        Some(at) if at.at() <= deadline => State::Honoured,
        Some(_) => State::HonouredLate,
        None if now <= deadline => State::Pending,
        None => State::Overdue,
    };
    Item {
        seq: row.seq,
        phone_number: row.phone_number.clone(),
        organization_id: row.organization_id.clone(),
        lead_id: row.lead_id.clone().or_else(|| row.state_lead_id.clone()),
        occurred_at: row.occurred_at,
        source: row.source,
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
async fn messages_after(
    pool: &Pool,
    rules: &Rules,
    rows: &[OptOutRow],
) -> Result<Vec<(Option<Message>, Vec<Message>)>, crate::store::Error> {
    let mut found = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(MESSAGES_CHUNK) {
        let mut leads: Vec<&str> = chunk.iter().flat_map(leads_of).collect();
        leads.sort_unstable();
        leads.dedup();
        let mut by_lead: HashMap<String, Vec<LeadMessage>> = HashMap::new();
        for message in pool.messages_of_leads(&leads).await? {
            by_lead
                .entry(message.lead_id.clone())
                .or_default()
                .push(message);
        }
        for row in chunk {
            found.push(after(row, rules, &by_lead));
        }
    }
    Ok(found)
}

/// The leads a row's messages may have gone to: its own, and the mirror's for its pair.
fn leads_of(row: &OptOutRow) -> impl Iterator<Item = &str> {
    let own = row.lead_id.as_deref();
    let held = row
        .state_lead_id
        .as_deref()
        .filter(|held| Some(*held) != own);
    own.into_iter().chain(held)
}

fn after(
    row: &OptOutRow,
    rules: &Rules,
    by_lead: &HashMap<String, Vec<LeadMessage>>,
) -> (Option<Message>, Vec<Message>) {
    let from = row.occurred_at.at();
    let until = row.opted_in_at.map(Timestamp::at);
    let mut messages: Vec<Message> = leads_of(row)
        .filter_map(|lead| by_lead.get(lead))
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

fn totals(items: &[Item]) -> Totals {
    let mut totals = Totals {
        opt_outs: items.len() as u64,
        ..Totals::default()
    };
    for item in items {
        match item.state {
            State::Honoured => totals.honoured += 1,
            State::HonouredLate => totals.honoured_late += 1,
            State::Pending => totals.pending += 1,
            State::Overdue => totals.overdue += 1,
        }
        totals.sent_after_opt_out += item.sent_after_opt_out.len() as u64;
    }
    totals
}

/// Each destination's counts and times to honour (the service first, then the subscribers
/// as configured).
fn summaries(rules: &Rules, items: &[Item]) -> Vec<DestinationSummary> {
    let names =
        std::iter::once(SERVICE.to_owned()).chain(rules.subscribers.iter().map(|s| s.name.clone()));
    names
        .map(|name| {
            let mut secs = Vec::new();
            let mut pending = 0;
            for item in items {
                for destination in item.destinations.iter().filter(|d| d.name == name) {
                    match destination.honoured_at {
                        Some(at) => {
                            let taken = at.at() - item.occurred_at.at();
                            secs.push(taken.num_milliseconds().max(0) as f64 / 1000.0);
                        }
                        None => pending += 1,
                    }
                }
            }
            secs.sort_by(f64::total_cmp);
            DestinationSummary {
                name,
                honoured: secs.len() as u64,
                pending,
                p50_secs: quantile(&secs, 0.50),
                p99_secs: quantile(&secs, 0.99),
                max_secs: secs.last().copied(),
            }
        })
        .collect()
}

/// The `q` quantile of sorted `values` (nearest rank).
fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    fn row(seq: i64) -> OptOutRow {
        OptOutRow {
            seq,
            organization_id: "org_1".into(),
            lead_id: Some("lead_1".into()),
            phone_number: "+15550000001".into(),
            occurred_at: at("2026-11-23T15:00:00Z"),
            recorded_at: at("2026-11-23T15:00:01Z"),
            source: Source::Webhook,
            push_state: None,
            push_finished_at: None,
            opted_in_at: None,
            state_lead_id: None,
        }
    }

    #[test]
    fn a_row_had_by_a_subscriber_takes_the_earliest_request_that_carried_it() {
        let span = |first, last, when: &str| AckSpan {
            first_seq: first,
            last_seq: last,
            acked_at: at(when),
        };
        // A replay sent 1..=9 again later; 12 is in no acknowledged request yet.
        let spans = [
            span(1, 5, "2026-11-23T15:00:02Z"),
            span(1, 9, "2026-11-24T09:00:00Z"),
            span(6, 9, "2026-11-23T15:00:03Z"),
        ];
        let rows: Vec<OptOutRow> = [2, 7, 9, 12].into_iter().map(row).collect();
        assert_eq!(
            earliest_acks(&spans, &rows),
            [
                Some(at("2026-11-23T15:00:02Z")),
                Some(at("2026-11-23T15:00:03Z")),
                Some(at("2026-11-23T15:00:03Z")),
                None
            ]
        );
    }

    #[test]
    fn the_first_message_within_the_window_is_the_confirmation_and_an_opt_in_ends_it() {
        let rules = Rules {
            calendar: BusinessDays::new(10, chrono_tz::America::New_York, []),
            timezone: "America/New_York".into(),
            deadline_business_days: 10,
            confirmation_window: TimeDelta::seconds(300),
            subscribers: Vec::new(),
        };
        let message = |id: &str, created: &str| LeadMessage {
            lead_id: "lead_1".into(),
            id: id.into(),
            status: "delivered".into(),
            created_at: Some(created.into()),
        };
        let mut opted_out = row(1);
        opted_out.opted_in_at = Some(at("2026-11-25T00:00:00Z"));
        let by_lead = HashMap::from([(
            "lead_1".to_owned(),
            vec![
                message("before", "2026-11-23T14:59:59Z"),
                message("confirm", "2026-11-23T15:02:00Z"),
                message("later", "2026-11-23T16:00:00Z"),
                message("opted-in-again", "2026-11-25T10:00:00Z"),
            ],
        )]);
        let (confirmation, sent) = after(&opted_out, &rules, &by_lead);
        assert_eq!(confirmation.map(|m| m.id), Some("confirm".to_owned()));
        let sent: Vec<String> = sent.into_iter().map(|m| m.id).collect();
        assert_eq!(sent, ["later"]);
    }
}
