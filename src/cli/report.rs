//! `report compliance`: every opt-out against its legal deadline, and the messages sent
//! after one, as text, JSON (the contract), CSV or a printable HTML file.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use chrono::Utc;

use super::CliError;
use crate::compliance::{self, Listing, Rules, Summary, Window};
use crate::settings::Settings;

/// The forms of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Csv,
    /// One self-contained file that prints well.
    Html,
}

/// `report`'s subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ReportCommand {
    /// For every opt-out: when the service, each subscriber and each destination had it
    /// against the deadline (`[compliance]`), and every message sent to the person after it.
    Compliance {
        /// First day (YYYY-MM-DD, in `compliance.timezone`) or RFC 3339 time; default: 30
        /// days before --until.
        #[arg(long, value_name = "DATE")]
        since: Option<String>,
        /// Last day, taken whole (YYYY-MM-DD), or RFC 3339 time; default: now.
        #[arg(long, value_name = "DATE")]
        until: Option<String>,
        #[arg(long, value_name = "ID")]
        organization: Option<String>,
        /// Only this account (default: every account).
        #[arg(long, value_name = "NAME")]
        account: Option<String>,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
        /// Write here instead of standard output.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

pub async fn run(settings: &Settings, command: ReportCommand, json: bool) -> Result<(), CliError> {
    let ReportCommand::Compliance {
        since,
        until,
        organization,
        account,
        format,
        output,
    } = command;
    let rules = Rules::of(settings)?;
    let now = Utc::now();
    let window = Window::parse(
        since.as_deref(),
        until.as_deref(),
        organization,
        &rules.calendar,
        now,
    )
    .map_err(|e| CliError::Usage(e.to_string()))?
    .in_account(account);
    let pool = super::open(settings).await?;
    let rules = std::sync::Arc::new(rules);
    let items = compliance::Items::new(pool, rules.clone(), window.clone(), now);
    let format = if json { Format::Json } else { format };
    let mut out: Box<dyn std::io::Write + Send> = match &output {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("writing the report to {}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout())),
    };
    let listing = match format {
        Format::Json => Some(Listing::Json),
        Format::Csv => Some(Listing::Csv),
        Format::Text | Format::Html => None,
    };
    match listing {
        // Written a page at a time as it is read.
        Some(listing) => {
            let mut sink = compliance::Blocking(&mut out);
            compliance::write(items, &rules, &window, listing, &mut sink)
                .await
                .map_err(anyhow::Error::from)?;
        }
        None => {
            let summary = compliance::summarize(items, &rules, &window)
                .await
                .map_err(anyhow::Error::from)?;
            let text = match format {
                Format::Html => {
                    let view = compliance::View::of(&summary, &rules, now);
                    compliance::html(&view).map_err(|e| CliError::Runtime(e.into()))?
                }
                _ => text(&summary, settings, now),
            };
            out.write_all(text.as_bytes())
                .context("writing the report")?;
        }
    }
    out.flush().context("writing the report")?;
    Ok(())
}

fn secs(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |s| format!("{s:.1}s"))
}

fn text(report: &Summary, settings: &Settings, now: chrono::DateTime<Utc>) -> String {
    let mut out = summary(report, settings);
    late(report, now, &mut out);
    unreachable(report, &mut out);
    sent_after(report, &mut out);
    out
}

/// The totals, and each destination's times.
fn summary(report: &Summary, settings: &Settings) -> String {
    let t = &report.totals;
    let mut out = format!(
        "Compliance report, opt-outs from {} to {} (deadline: {} business days, {})\n\
         {} opt-outs: {} honoured, {} honoured late, {} pending, {} overdue, {} unreachable; {} messages sent after an opt-out\n\n",
        report.since,
        report.until,
        report.deadline_business_days,
        settings.compliance.timezone,
        t.opt_outs,
        t.honoured,
        t.honoured_late,
        t.pending,
        t.overdue,
        t.unreachable,
        t.sent_after_opt_out
    );
    if t.account_wide > 0 {
        out.push_str(&format!(
            "{} of the {} opt-outs are account-wide (organization *: a list imported for the whole account, or an opt-out shared from another account); the service and VAN had each through the entries recorded with it for the organizations holding the number.\n\n",
            t.account_wide, t.opt_outs
        ));
    }
    out.push_str(&format!(
        "{:<20} {:>9} {:>8} {:>11} {:>10} {:>10} {:>10}\n",
        "DESTINATION", "HONOURED", "PENDING", "UNREACHABLE", "P50", "P99", "MAX"
    ));
    for d in &report.destinations {
        out.push_str(&format!(
            "{:<20} {:>9} {:>8} {:>11} {:>10} {:>10} {:>10}\n",
            d.name,
            d.honoured,
            d.pending,
            d.unreachable,
            secs(d.p50_secs),
            secs(d.p99_secs),
            secs(d.max_secs)
        ));
    }
    if !report.sources.is_empty() {
        out.push_str("\nSources (opt-outs given elsewhere, read back; one BEHIND has not read lately, and what was given there since is not in this report):\n");
        for source in &report.sources {
            out.push_str(&format!("  {}\n", source.said()));
        }
    }
    if report.shows_review() {
        out.push_str(&format!(
            "\nReplies to review (`outreach-sync review`; not opt-outs until decided): {}\n",
            report.review.said()
        ));
    }
    out
}

/// Every opt-out not had everywhere by its deadline (or not yet), with who is behind.
fn late(report: &Summary, now: chrono::DateTime<Utc>, out: &mut String) {
    let waiting = &report.late;
    if waiting.is_empty() {
        return;
    }
    out.push_str("\nNot honoured everywhere by the deadline:\n");
    for item in waiting {
        let waited = compliance::waiting(item, now)
            .map(|w| format!(" (waiting {w})"))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {:<13} seq {} {} in {}, opted out {} through {}{waited}, deadline {}: {}\n",
            item.state.as_str(),
            item.seq,
            item.phone_number,
            item.organization_id,
            item.occurred_at,
            compliance::given(item),
            item.deadline,
            compliance::behind(item)
        ));
    }
    more(waiting.len(), report.late_total, out);
}

/// Every opt-out a system of record could not be given while every other destination had
/// it, with each one's outcome and reason (the system's own words, escaped for the
/// terminal).
fn unreachable(report: &Summary, out: &mut String) {
    let unreachable = &report.unreachable;
    if unreachable.is_empty() {
        return;
    }
    out.push_str("\nUnreachable in a system of record (every other destination had it):\n");
    for item in unreachable {
        for (name, outcome, reason) in compliance::unreached(item) {
            out.push_str(&format!(
                "  seq {} {} in {}, opted out {}: {name} {outcome}: {}\n",
                item.seq,
                item.phone_number,
                item.organization_id,
                item.occurred_at,
                crate::model::text::bounded(reason, 200)
            ));
        }
    }
    more(unreachable.len(), report.unreachable_total, out);
}

/// Says what a list capped at [`compliance::LISTED`] left out.
fn more(shown: usize, total: u64, out: &mut String) {
    if total > shown as u64 {
        out.push_str(&format!(
            "  ... {} more: --format csv or --format json lists every one\n",
            total - shown as u64
        ));
    }
}

/// Every message sent after an opt-out.
fn sent_after(report: &Summary, out: &mut String) {
    let sent = &report.sent_after;
    if sent.is_empty() {
        return;
    }
    out.push_str("\nMessages sent after an opt-out:\n");
    for item in sent {
        for m in &item.sent_after_opt_out {
            out.push_str(&format!(
                "  seq {} {} in {} (opted out {}): message {} {} at {}\n",
                item.seq,
                item.phone_number,
                item.organization_id,
                item.occurred_at,
                m.id,
                m.status,
                m.created_at
            ));
        }
    }
    more(sent.len(), report.sent_after_total, out);
}
