//! What the console's templates show, prepared: evidence as labelled facts, times as people
//! read them, and the deliveries chart.

use crate::model::Timestamp;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde_json::Value;

use crate::evidence::{Evidence, Item, WebhookEvidence};
use crate::ledger::LedgerEntry;

/// `text` as a query-string value (RFC 3986 unreserved characters kept, the rest escaped).
pub fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// JSON, indented for reading.
fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Bytes as received: indented when they are JSON, as text when they are UTF-8, else base64.
fn pretty_bytes(bytes: &[u8]) -> String {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => pretty(&value),
        Err(_) => match std::str::from_utf8(bytes) {
            Ok(text) => text.to_owned(),
            Err(_) => format!("(not UTF-8; base64) {}", STANDARD.encode(bytes)),
        },
    }
}

/// One labelled piece of evidence; `block` values are shown preformatted.
#[derive(Debug, Clone)]
pub struct Fact {
    pub label: &'static str,
    pub value: String,
    pub block: bool,
}

impl Fact {
    fn line(label: &'static str, value: impl Into<String>) -> Self {
        Self {
            label,
            value: value.into(),
            block: false,
        }
    }

    fn block(label: &'static str, value: String) -> Self {
        Self {
            label,
            value,
            block: true,
        }
    }
}

/// A ledger entry of the timeline.
#[derive(Debug, Clone)]
pub struct TimelineEntry {
    pub ledger: LedgerEntry,
    /// Why the entry exists, in a sentence.
    pub summary: String,
    pub hash: String,
    pub prev_hash: String,
    pub evidence: Vec<Fact>,
    /// When each destination had the entry, or why it could not.
    pub destinations: Vec<Had>,
}

/// How one destination took an entry.
#[derive(Debug, Clone)]
pub struct Had {
    pub destination: String,
    pub how: String,
}

impl TimelineEntry {
    /// Adds how each destination took the entry.
    pub fn with_outcomes(mut self, outcomes: &[crate::model::EntryOutcome]) -> Self {
        self.destinations = outcomes
            .iter()
            .filter(|o| o.seq == self.ledger.seq)
            .map(|o| Had {
                destination: o.destination.clone(),
                how: match &o.reason {
                    Some(reason) => format!("{} at {}: {reason}", o.outcome, o.at),
                    None => format!("{} at {}", o.outcome, o.at),
                },
            })
            .collect();
        self
    }
}

impl From<Item> for TimelineEntry {
    fn from(item: Item) -> Self {
        let entry = &item.entry;
        let verb = if entry.opted_out {
            "Opted out"
        } else {
            "Opted in"
        };
        let summary = match (&item.evidence, entry.echo_of) {
            (Evidence::Webhook(_), Some(seq)) => {
                format!("{verb}: the service confirmed the local change #{seq} by webhook")
            }
            (Evidence::Webhook(_), None) => format!("{verb}: announced by the service's webhook"),
            (Evidence::Reconcile(_), _) => {
                format!("{verb}: found by reconciliation against the service's API")
            }
            (Evidence::Import(import), _) => format!(
                "{verb}: imported from {} by {}",
                import.file.as_deref().unwrap_or("a list"),
                import.actor.as_deref().unwrap_or("an unrecorded actor")
            ),
            (Evidence::Read(read), _) => format!(
                "{verb}: read back from {} by source {}",
                entry.source,
                read.actor.as_deref().unwrap_or("an unrecorded source")
            ),
            (Evidence::Local(local), _) => match (local.suppressed_by, local.follows) {
                (Some(seq), _) => format!(
                    "{verb}: a lead that appeared with a number opted out before it (entry #{seq})"
                ),
                (None, Some(seq)) => format!(
                    "{verb}: shared from account {}'s opt-out (entry #{seq})",
                    local.follows_account_id.as_deref().unwrap_or("unknown")
                ),
                (None, None) => format!(
                    "{verb}: changed here by {}",
                    local.actor.as_deref().unwrap_or("an unrecorded actor")
                ),
            },
        };
        let evidence = facts(&item);
        Self {
            summary,
            hash: item.hash.unwrap_or_default(),
            prev_hash: item.prev_hash,
            evidence,
            destinations: Vec::new(),
            ledger: item.entry,
        }
    }
}

/// What a webhook entry stands on: its delivery as received, and how it was verified.
fn webhook_facts(webhook: &WebhookEvidence, facts: &mut Vec<Fact>) {
    if !webhook.kept {
        facts.push(Fact::line(
            "Delivery",
            webhook
                .note
                .clone()
                .unwrap_or_else(|| "no longer kept".to_owned()),
        ));
        return;
    }
    if let Some(id) = webhook.delivery_id {
        facts.push(Fact::line("Delivery", format!("#{id}")));
    }
    if let Some(at) = &webhook.received_at {
        facts.push(Fact::line("Received at", at.to_string()));
    }
    if let Some(index) = webhook.secret_index {
        let by = webhook
            .verified_header
            .as_ref()
            .map(|v| format!(", by {} (header {} as received)", v.name, v.index + 1))
            .unwrap_or_default();
        facts.push(Fact::line(
            "Signature",
            format!("verified with webhook.secrets entry {index}{by}"),
        ));
    }
    match (&webhook.headers_received, &webhook.headers) {
        (Some(pairs), _) => {
            let lines: Vec<String> = pairs.iter().map(|(n, v)| format!("{n}: {v}")).collect();
            facts.push(Fact::block("Headers as received", lines.join("\n")));
        }
        (None, Some(headers)) => {
            facts.push(Fact::block("Headers as received", pretty(headers)));
        }
        (None, None) => {}
    }
    if let Some(body) = &webhook.body_base64 {
        let bytes = STANDARD.decode(body).unwrap_or_default();
        facts.push(Fact::block("Body as received", pretty_bytes(&bytes)));
    }
}

/// What a source read back stands on: the source, the record, what the system gave.
fn read_facts(read: &crate::evidence::ReadEvidence, facts: &mut Vec<Fact>) {
    let unknown = || "not recorded".to_owned();
    facts.push(Fact::line(
        "Source",
        read.actor.clone().unwrap_or_else(unknown),
    ));
    facts.push(Fact::line(
        "Record",
        read.record.clone().unwrap_or_else(unknown),
    ));
    if let Some(stands_on) = &read.stands_on {
        facts.push(Fact::block("What it stands on", pretty(stands_on)));
    }
}

fn facts(item: &Item) -> Vec<Fact> {
    let mut facts = Vec::new();
    match &item.evidence {
        Evidence::Webhook(webhook) => webhook_facts(webhook, &mut facts),
        Evidence::Reconcile(reconcile) => {
            facts.push(Fact::line(
                "Lead requested at",
                reconcile.requested_at.to_string(),
            ));
            match &reconcile.lead {
                Some(lead) => facts.push(Fact::block("Lead as fetched", pretty(lead))),
                None => facts.push(Fact::line(
                    "Lead as fetched",
                    "not kept (recorded before leads were kept)",
                )),
            }
        }
        Evidence::Import(import) => {
            let unknown = || "not recorded".to_owned();
            facts.push(Fact::line(
                "List",
                import.file.clone().unwrap_or_else(unknown),
            ));
            facts.push(Fact::line(
                "SHA-256",
                import.sha256.clone().unwrap_or_else(unknown),
            ));
            if let Some(line) = import.line {
                facts.push(Fact::line("Line", line.to_string()));
            }
            facts.push(Fact::line(
                "Imported by",
                import.actor.clone().unwrap_or_else(unknown),
            ));
            facts.push(Fact::line(
                "Reason",
                import
                    .reason
                    .clone()
                    .unwrap_or_else(|| "none given".to_owned()),
            ));
        }
        Evidence::Read(read) => read_facts(read, &mut facts),
        Evidence::Local(local) => {
            if let Some(seq) = local.suppressed_by {
                facts.push(Fact::line("Suppressed by", format!("entry #{seq}")));
            }
            if let (Some(seq), Some(account)) = (local.follows, &local.follows_account_id) {
                facts.push(Fact::line(
                    "Shared from",
                    format!("entry #{seq} of account {account}"),
                ));
            }
            facts.push(Fact::line(
                "Changed by",
                local
                    .actor
                    .clone()
                    .unwrap_or_else(|| "not recorded (before actors were kept)".to_owned()),
            ));
            facts.push(Fact::line(
                "Reason",
                item.reason
                    .clone()
                    .unwrap_or_else(|| "none given".to_owned()),
            ));
            if let Some(push) = &local.push {
                facts.push(Fact::line("Sent to the service", push.to_string()));
            }
        }
    }
    if let Some(tag) = &item.tag_id {
        facts.push(Fact::line("Tag", tag.clone()));
    }
    facts
}

/// How long ago `at` was, as people say it.
pub fn ago(at: Timestamp, now: DateTime<Utc>) -> String {
    let seconds = (now - at.at()).num_seconds();
    match seconds {
        ..=4 => "just now".to_owned(),
        5..=119 => format!("{seconds} s ago"),
        120..=7199 => format!("{} min ago", seconds / 60),
        7200..=172_799 => format!("{} h ago", seconds / 3600),
        _ => format!("{} days ago", seconds / 86_400),
    }
}

/// `Some(seconds)` as people say a duration.
pub fn duration(seconds: f64) -> String {
    match seconds {
        s if s < 1.0 => "under a second".to_owned(),
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// One minute of the deliveries chart.
#[derive(Debug, Clone)]
pub struct Bar {
    /// `HH:MM`, UTC.
    pub minute: String,
    pub count: i64,
    pub x: f64,
    pub y: f64,
    pub height: f64,
}

/// Deliveries per minute over the last hour, as an SVG bar chart and as a table.
#[derive(Debug, Clone)]
pub struct Chart {
    pub bars: Vec<Bar>,
    pub total: i64,
    pub peak: i64,
    pub peak_minute: String,
    pub bar_width: f64,
    /// The value of the top of the plot.
    pub scale: i64,
}

/// The plot's size in SVG units (the viewBox is `0 0 WIDTH HEIGHT`).
pub const CHART_WIDTH: f64 = 600.0;
pub const CHART_HEIGHT: f64 = 160.0;
/// Minutes shown: the last hour.
pub const CHART_MINUTES: i64 = 60;

impl Chart {
    /// The chart of the minutes ending with `now`'s, from `(minute, count)` rows.
    pub fn new(rows: &[(String, i64)], now: DateTime<Utc>) -> Self {
        let bar_width = CHART_WIDTH / CHART_MINUTES as f64;
        let counts: Vec<(String, i64)> = (0..CHART_MINUTES)
            .rev()
            .map(|back| {
                let minute = (now - Duration::minutes(back))
                    .to_rfc3339_opts(SecondsFormat::Secs, true)
                    .chars()
                    .take(16)
                    .collect::<String>();
                let count = rows
                    .iter()
                    .find(|(m, _)| *m == minute)
                    .map_or(0, |(_, n)| *n);
                (minute, count)
            })
            .collect();
        let total = counts.iter().map(|(_, n)| n).sum();
        let (peak_minute, peak) = counts
            .iter()
            .max_by_key(|(_, n)| *n)
            .map(|(m, n)| (m.get(11..16).unwrap_or(m).to_owned(), *n))
            .unwrap_or_default();
        let scale = nice_ceiling(peak.max(1));
        let bars = counts
            .into_iter()
            .enumerate()
            .map(|(i, (minute, count))| {
                let height = CHART_HEIGHT * count as f64 / scale as f64;
                Bar {
                    minute: minute.get(11..16).unwrap_or(&minute).to_owned(),
                    count,
                    x: i as f64 * bar_width,
                    y: CHART_HEIGHT - height,
                    height,
                }
            })
            .collect();
        Self {
            bars,
            total,
            peak,
            peak_minute,
            bar_width: bar_width - 1.0,
            scale,
        }
    }
}

/// The smallest of 1, 2, 5 × 10ⁿ at or above `n`: a round top for the plot.
fn nice_ceiling(n: i64) -> i64 {
    let mut step = 1;
    loop {
        for m in [1, 2, 5] {
            if m * step >= n {
                return m * step;
            }
        }
        step *= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_escape_what_a_url_cannot_hold() {
        assert_eq!(query_value("+15551234567"), "%2B15551234567");
        assert_eq!(query_value("/status?x=1&y"), "/status%3Fx%3D1%26y");
    }

    #[test]
    fn the_chart_has_a_bar_for_each_of_the_last_sixty_minutes() {
        let now = DateTime::parse_from_rfc3339("2026-11-25T10:30:20Z")
            .expect("time")
            .to_utc();
        let rows = vec![
            ("2026-11-25T09:31".to_owned(), 3),
            ("2026-11-25T10:30".to_owned(), 7),
            ("2026-11-25T09:30".to_owned(), 100), // an hour ago: outside
        ];
        let chart = Chart::new(&rows, now);
        assert_eq!(chart.bars.len(), 60);
        assert_eq!(chart.bars[0].minute, "09:31");
        assert_eq!(chart.bars[0].count, 3);
        assert_eq!(chart.bars[59].minute, "10:30");
        assert_eq!(chart.total, 10);
        assert_eq!((chart.peak, chart.peak_minute.as_str()), (7, "10:30"));
        assert_eq!(chart.scale, 10);
        assert!((chart.bars[59].height - CHART_HEIGHT * 0.7).abs() < 1e-9);
    }

    #[test]
    fn round_tops() {
        assert_eq!(
            [1, 2, 3, 7, 11, 499, 501].map(nice_ceiling),
            [1, 2, 5, 10, 20, 500, 1000]
        );
    }
}
