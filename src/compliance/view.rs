//! The report as people read it: the printable HTML file and the console's page share this
//! view (totals, opt-outs per day and the time each destination took to honour them as
//! inline SVG charts with their data beside them, what is late or waiting, what a system
//! of record could not be given, and every message sent after an opt-out).

use chrono::{DateTime, Utc};

use super::Item;
use super::tally::{BUCKETS, LISTED, Summary};

/// Plot width and height of the charts, in SVG units.
const WIDTH: f64 = 600.0;
const HEIGHT: f64 = 140.0;

/// One bar of a chart: where it is drawn, and what it stands for.
#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub count: u64,
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// A destination's time-to-honour distribution.
#[derive(Debug, Clone)]
pub struct Distribution {
    pub name: String,
    pub bars: Vec<Bar>,
    /// Opt-outs it has not had yet.
    pub waiting: u64,
}

/// The report, laid out.
pub struct View<'r> {
    pub report: &'r Summary,
    /// When the report was made.
    pub now: DateTime<Utc>,
    pub timezone: String,
    pub generated_at: String,
    /// Opt-outs per day (in the calendar's zone), oldest first.
    pub per_day: Vec<Bar>,
    pub per_day_peak: u64,
    pub distributions: Vec<Distribution>,
    pub bucket_names: Vec<&'static str>,
    /// Opt-outs not honoured everywhere by their deadline, or not yet (the first
    /// [`LISTED`]).
    pub late: &'r [Item],
    /// Opt-outs every destination had but a system of record that found no one for them or
    /// refused them (the first [`LISTED`]).
    pub unreachable: &'r [Item],
    /// Opt-outs with messages sent after them (the first [`LISTED`]).
    pub sent_after: &'r [Item],
    /// What the lists leave out, said under them ("" when they hold every one).
    pub late_more: String,
    pub unreachable_more: String,
    pub sent_after_more: String,
}

impl<'r> View<'r> {
    /// How long `item` has waited, for a table cell (`-` once honoured).
    pub fn waited(&self, item: &Item) -> String {
        waiting(item, self.now).unwrap_or_else(|| "-".to_owned())
    }

    /// `summary` laid out, for the zone of `rules`.
    pub fn of(summary: &'r Summary, rules: &super::Rules, now: DateTime<Utc>) -> Self {
        let per_day_peak = summary.per_day.iter().map(|(_, n)| *n).max().unwrap_or(0);
        let per_day = bars(
            summary
                .per_day
                .iter()
                .map(|(day, n)| (day.format("%Y-%m-%d").to_string(), *n))
                .collect(),
            per_day_peak,
        );
        Self {
            report: summary,
            now,
            timezone: rules.timezone.clone(),
            generated_at: crate::model::Timestamp(now).to_string(),
            per_day,
            per_day_peak,
            distributions: distributions(summary),
            bucket_names: BUCKETS.iter().map(|(name, _)| *name).collect(),
            late: &summary.late,
            unreachable: &summary.unreachable,
            sent_after: &summary.sent_after,
            late_more: more(summary.late.len(), summary.late_total),
            unreachable_more: more(summary.unreachable.len(), summary.unreachable_total),
            sent_after_more: more(summary.sent_after.len(), summary.sent_after_total),
        }
    }
}

/// What a list of `shown` out of `total` leaves out.
fn more(shown: usize, total: u64) -> String {
    let left = total.saturating_sub(shown as u64);
    if left == 0 {
        return String::new();
    }
    format!(
        "The first {LISTED} of {total} are listed here; the CSV and JSON forms of the report \
         (report compliance --format csv, GET /v1/compliance) list every one."
    )
}

/// How long an opt-out not had everywhere has waited at `now` (`None` once it has been).
pub fn waiting(item: &Item, now: DateTime<Utc>) -> Option<String> {
    if item.honoured_at.is_some() {
        return None;
    }
    let minutes = (now - item.occurred_at.at()).num_minutes().max(0);
    Some(match minutes {
        ..=119 => format!("{minutes} min"),
        120..=2879 => format!("{} h {} min", minutes / 60, minutes % 60),
        _ => format!("{} days {} h", minutes / 1440, minutes % 1440 / 60),
    })
}

/// Where an opt-out was given: its source, and for one a `[[source]]` read back (VAN,
/// Action Network) that source's name and when the daemon first had it (its deadline runs
/// from when the person gave it there, `occurredAt`).
pub fn given(item: &Item) -> String {
    match &item.read_by {
        Some(name) => format!("{} ({name}), seen {}", item.source, item.seen_at),
        None => item.source.to_string(),
    }
}

/// The destinations that had `item` after its deadline or not at all.
pub fn behind(item: &Item) -> String {
    let names: Vec<&str> = item
        .destinations
        .iter()
        .filter(|d| d.honoured_at.is_none_or(|at| at > item.deadline))
        .map(|d| d.name.as_str())
        .collect();
    names.join(", ")
}

/// The systems of record that could not be given `item`: each name, outcome and reason
/// (the reason as it was said: escape it for where it is shown).
pub fn unreached(item: &Item) -> Vec<(&str, &'static str, &str)> {
    item.destinations
        .iter()
        .filter_map(|d| {
            let outcome = d.outcome.filter(|o| o.unreached())?;
            Some((
                d.name.as_str(),
                outcome.as_str(),
                d.reason.as_deref().unwrap_or("no reason given"),
            ))
        })
        .collect()
}

fn distributions(summary: &Summary) -> Vec<Distribution> {
    summary
        .destinations
        .iter()
        .zip(&summary.distributions)
        .map(|(destination, (counts, waiting))| {
            let peak = counts.iter().copied().max().unwrap_or(0);
            let labelled = BUCKETS
                .iter()
                .zip(counts)
                .map(|((name, _), n)| ((*name).to_owned(), *n))
                .collect();
            Distribution {
                name: destination.name.clone(),
                bars: bars(labelled, peak),
                waiting: *waiting,
            }
        })
        .collect()
}

/// Bars side by side across the plot, scaled to `peak`.
fn bars(counts: Vec<(String, u64)>, peak: u64) -> Vec<Bar> {
    let slot = WIDTH / counts.len().max(1) as f64;
    counts
        .into_iter()
        .enumerate()
        .map(|(i, (label, count))| {
            let height = if peak == 0 {
                0.0
            } else {
                (count as f64 / peak as f64 * HEIGHT).round()
            };
            Bar {
                label,
                count,
                x: (i as f64 * slot + slot * 0.1).round(),
                y: HEIGHT - height,
                width: (slot * 0.8).max(1.0).round(),
                height,
            }
        })
        .collect()
}

/// The printable report: one self-contained HTML file (its style inline; no script, no
/// outside asset).
#[derive(askama::Template)]
#[template(path = "report/compliance.html")]
struct ReportFile<'v, 'r> {
    view: &'v View<'r>,
    /// No links: the file stands alone.
    links: bool,
}

impl ReportFile<'_, '_> {
    fn href(&self, _item: &Item) -> String {
        String::new()
    }
}

/// The report as one printable HTML file.
pub fn html(view: &View<'_>) -> Result<String, askama::Error> {
    askama::Template::render(&ReportFile { view, links: false })
}

#[cfg(test)]
mod tests {
    use super::super::State;
    use super::*;
    use crate::model::{Source, Timestamp};

    #[test]
    fn an_opt_out_not_had_everywhere_says_how_long_it_has_waited() {
        let at = |text: &str| -> Timestamp { text.parse().expect("time") };
        let mut item = Item {
            seq: 1,
            phone_number: "+15550000001".into(),
            organization_id: "org_1".into(),
            account_id: crate::model::DEFAULT_ACCOUNT.into(),
            lead_id: None,
            occurred_at: at("2026-11-20T10:00:00Z"),
            source: Source::Webhook,
            read_by: None,
            seen_at: at("2026-11-20T10:00:00Z"),
            state: State::Pending,
            deadline: at("2026-12-05T05:00:00Z"),
            honoured_at: None,
            destinations: Vec::new(),
            confirmation: None,
            sent_after_opt_out: Vec::new(),
        };
        let now = |text: &str| at(text).at();
        assert_eq!(
            waiting(&item, now("2026-11-20T10:45:00Z")).as_deref(),
            Some("45 min")
        );
        assert_eq!(
            waiting(&item, now("2026-11-20T13:05:00Z")).as_deref(),
            Some("3 h 5 min")
        );
        assert_eq!(
            waiting(&item, now("2026-11-23T12:00:00Z")).as_deref(),
            Some("3 days 2 h")
        );
        item.honoured_at = Some(at("2026-11-20T10:00:01Z"));
        assert_eq!(waiting(&item, now("2026-11-23T12:00:00Z")), None);
    }
}
