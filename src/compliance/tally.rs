//! What a report sums up, counted as its pages go by: the totals, each destination's times
//! to honour, opt-outs per day, and the first of the opt-outs people must look at. Memory
//! is one number per opt-out and destination (the times, for exact percentiles) and a
//! bounded list of each kind, however many opt-outs the window holds.

use std::collections::BTreeMap;

use chrono::NaiveDate;

use super::{DestinationSummary, Item, Rules, SERVICE, State, Totals, Window};
use crate::model::Timestamp;
use crate::model::business_days::BusinessDays;

/// Opt-outs of each list a summary keeps to show (the late ones, those with messages
/// after them); the rest are counted. The JSON and CSV forms list every one.
pub const LISTED: usize = 1000;
/// Longest run of days the per-day chart covers.
const CHART_DAYS: u64 = 366;
/// How long destinations took to have an opt-out: the bars of the distribution.
pub const BUCKETS: [(&str, f64); 5] = [
    ("under a minute", 60.0),
    ("under an hour", 3600.0),
    ("under a day", 86_400.0),
    ("under 10 days", 864_000.0),
    ("10 days or more", f64::INFINITY),
];

/// A report without its items: what the text, the printable file and the console show.
#[derive(Debug, Clone)]
pub struct Summary {
    pub since: Timestamp,
    pub until: Timestamp,
    pub deadline_business_days: u32,
    pub totals: Totals,
    pub destinations: Vec<DestinationSummary>,
    /// Per destination (as `destinations`): opt-outs in each of [`BUCKETS`], and waiting.
    pub distributions: Vec<([u64; BUCKETS.len()], u64)>,
    /// Opt-outs per day in the calendar's zone, for at most [`CHART_DAYS`] days ending on
    /// the window's last day (or its last day with an opt-out, when the window is longer).
    pub per_day: Vec<(NaiveDate, u64)>,
    /// The first [`LISTED`] opt-outs not honoured everywhere by their deadline (or not yet),
    /// and how many there are.
    pub late: Vec<Item>,
    pub late_total: u64,
    /// The first [`LISTED`] opt-outs a system of record could not be given while every
    /// other destination had them, and how many there are.
    pub unreachable: Vec<Item>,
    pub unreachable_total: u64,
    /// The first [`LISTED`] opt-outs with messages sent after them, and how many there are.
    pub sent_after: Vec<Item>,
    pub sent_after_total: u64,
    /// The sources, and which of them has not read lately.
    pub sources: Vec<super::SourceStanding>,
    /// The replies kept for review.
    pub review: super::ReviewStanding,
}

impl Summary {
    /// Whether the report speaks of replies to review: a source is posted replies, or one
    /// was kept.
    pub fn shows_review(&self) -> bool {
        self.review != super::ReviewStanding::default() || self.sources.iter().any(|s| s.posted())
    }
}

/// Adds up pages of [`Item`]s into a [`Summary`].
pub struct Tally {
    calendar: BusinessDays,
    names: Vec<String>,
    /// Where the systems of record start in `names` (after the service and subscribers).
    first_record: usize,
    /// Per destination: seconds to honour of each opt-out it had, those it has not yet,
    /// and those it could not be given.
    secs: Vec<Vec<f64>>,
    waiting: Vec<u64>,
    unreached: Vec<u64>,
    days: BTreeMap<NaiveDate, u64>,
    summary: Summary,
}

impl Tally {
    pub fn new(rules: &Rules, window: &Window) -> Self {
        let shared = super::member_destinations(rules);
        let members = shared.len();
        let names: Vec<String> = std::iter::once(SERVICE.to_owned())
            .chain(rules.subscribers.iter().map(|s| s.name.clone()))
            .chain(shared)
            .chain(rules.destinations.iter().map(|d| d.name.clone()))
            .collect();
        Self {
            calendar: rules.calendar.clone(),
            first_record: 1 + rules.subscribers.len() + members,
            secs: vec![Vec::new(); names.len()],
            waiting: vec![0; names.len()],
            unreached: vec![0; names.len()],
            days: BTreeMap::new(),
            summary: Summary {
                since: Timestamp(window.since),
                until: Timestamp(window.until),
                deadline_business_days: rules.deadline_business_days,
                totals: Totals::default(),
                destinations: Vec::new(),
                distributions: Vec::new(),
                per_day: Vec::new(),
                late: Vec::new(),
                late_total: 0,
                unreachable: Vec::new(),
                unreachable_total: 0,
                sent_after: Vec::new(),
                sent_after_total: 0,
                sources: Vec::new(),
                review: super::ReviewStanding::default(),
            },
            names,
        }
    }

    /// The names of the destinations, in the order of the summary (the service first, the
    /// systems of record last).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The names of the systems of record (`[[destination]]`), in the order of the summary.
    pub fn records(&self) -> &[String] {
        &self.names[self.first_record..]
    }

    pub fn add(&mut self, page: &[Item]) {
        for item in page {
            self.count(item);
        }
    }

    fn count(&mut self, item: &Item) {
        let summary = &mut self.summary;
        let totals = &mut summary.totals;
        totals.opt_outs += 1;
        totals.account_wide += u64::from(item.organization_id == crate::model::ACCOUNT_WIDE);
        match item.state {
            State::Honoured => totals.honoured += 1,
            State::HonouredLate => totals.honoured_late += 1,
            State::Pending => totals.pending += 1,
            State::Overdue => totals.overdue += 1,
            State::Unreachable => totals.unreachable += 1,
        }
        totals.sent_after_opt_out += item.sent_after_opt_out.len() as u64;
        for destination in &item.destinations {
            let Some(i) = self.names.iter().position(|n| *n == destination.name) else {
                continue;
            };
            match destination.honoured_at {
                _ if destination.unreached() => self.unreached[i] += 1,
                Some(at) => {
                    let taken = at.at() - item.occurred_at.at();
                    self.secs[i].push(taken.num_milliseconds().max(0) as f64 / 1000.0);
                }
                None => self.waiting[i] += 1,
            }
        }
        *self
            .days
            .entry(self.calendar.day_of(item.occurred_at.at()))
            .or_default() += 1;
        if item.state == State::Unreachable {
            summary.unreachable_total += 1;
            if summary.unreachable.len() < LISTED {
                summary.unreachable.push(item.clone());
            }
        } else if item.state != State::Honoured {
            summary.late_total += 1;
            if summary.late.len() < LISTED {
                summary.late.push(item.clone());
            }
        }
        if !item.sent_after_opt_out.is_empty() {
            summary.sent_after_total += 1;
            if summary.sent_after.len() < LISTED {
                summary.sent_after.push(item.clone());
            }
        }
    }

    pub fn finish(mut self) -> Summary {
        for (i, name) in self.names.iter().enumerate() {
            let secs = &mut self.secs[i];
            secs.sort_by(f64::total_cmp);
            let mut buckets = [0u64; BUCKETS.len()];
            for s in secs.iter() {
                let bucket = BUCKETS.iter().position(|(_, under)| s < under);
                buckets[bucket.unwrap_or(BUCKETS.len() - 1)] += 1;
            }
            self.summary.destinations.push(DestinationSummary {
                name: name.clone(),
                honoured: secs.len() as u64,
                pending: self.waiting[i],
                unreachable: self.unreached[i],
                p50_secs: quantile(secs, 0.50),
                p99_secs: quantile(secs, 0.99),
                max_secs: secs.last().copied(),
            });
            self.summary.distributions.push((buckets, self.waiting[i]));
        }
        self.summary.per_day = self.per_day();
        self.summary
    }

    fn per_day(&self) -> Vec<(NaiveDate, u64)> {
        let first = self.calendar.day_of(self.summary.since.at());
        let mut last = self.calendar.day_of(self.summary.until.at());
        if let Some(latest) = self.days.keys().next_back() {
            let span = (last - first).num_days();
            if span >= CHART_DAYS as i64 && *latest < last {
                last = *latest;
            }
        }
        let start = last
            .checked_sub_days(chrono::Days::new(CHART_DAYS - 1))
            .map_or(first, |start| start.max(first));
        start
            .iter_days()
            .take_while(|d| *d <= last)
            .map(|day| (day, self.days.get(&day).copied().unwrap_or(0)))
            .collect()
    }
}

/// The `q` quantile of sorted `values` (nearest rank).
fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}
