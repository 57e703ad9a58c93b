//! `report compliance`: every opt-out against its legal deadline, and the messages sent
//! after one, as text, JSON (the contract), CSV or a printable HTML file.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use chrono::Utc;

use super::CliError;
use crate::compliance::{self, Report, Rules, State, Window};
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
    /// For every opt-out: when the service and each subscriber had it against the deadline
    /// (`[compliance]`), and every message sent to the person after it.
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
    .map_err(|e| CliError::Usage(e.to_string()))?;
    let pool = super::open(settings).await?;
    let report = compliance::report(&pool, &rules, &window, now)
        .await
        .map_err(anyhow::Error::from)?;
    let format = if json { Format::Json } else { format };
    let text = match format {
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&report).map_err(anyhow::Error::from)?;
            text.push('\n');
            text
        }
        Format::Csv => csv(&report)?,
        Format::Html => {
            let view = compliance::View::of(&report, &rules, now);
            compliance::html(&view).map_err(|e| CliError::Runtime(e.into()))?
        }
        Format::Text => text(&report, settings, now),
    };
    match output {
        Some(path) => std::fs::write(&path, text)
            .with_context(|| format!("writing the report to {}", path.display()))?,
        None => std::io::stdout()
            .write_all(text.as_bytes())
            .context("writing the report")?,
    }
    Ok(())
}

fn secs(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |s| format!("{s:.1}s"))
}

fn text(report: &Report, settings: &Settings, now: chrono::DateTime<Utc>) -> String {
    let mut out = summary(report, settings);
    late(report, now, &mut out);
    sent_after(report, &mut out);
    out
}

/// The totals, and each destination's times.
fn summary(report: &Report, settings: &Settings) -> String {
    let t = &report.totals;
    let mut out = format!(
        "Compliance report, opt-outs from {} to {} (deadline: {} business days, {})\n\
         {} opt-outs: {} honoured, {} honoured late, {} pending, {} overdue; {} messages sent after an opt-out\n\n",
        report.since,
        report.until,
        report.deadline_business_days,
        settings.compliance.timezone,
        t.opt_outs,
        t.honoured,
        t.honoured_late,
        t.pending,
        t.overdue,
        t.sent_after_opt_out
    );
    out.push_str(&format!(
        "{:<20} {:>9} {:>8} {:>10} {:>10} {:>10}\n",
        "DESTINATION", "HONOURED", "PENDING", "P50", "P99", "MAX"
    ));
    for d in &report.destinations {
        out.push_str(&format!(
            "{:<20} {:>9} {:>8} {:>10} {:>10} {:>10}\n",
            d.name,
            d.honoured,
            d.pending,
            secs(d.p50_secs),
            secs(d.p99_secs),
            secs(d.max_secs)
        ));
    }
    out
}

/// Every opt-out not had everywhere by its deadline (or not yet), with who is behind.
fn late(report: &Report, now: chrono::DateTime<Utc>, out: &mut String) {
    let waiting: Vec<_> = report
        .items
        .iter()
        .filter(|i| {
            matches!(
                i.state,
                State::Pending | State::Overdue | State::HonouredLate
            )
        })
        .collect();
    if waiting.is_empty() {
        return;
    }
    out.push_str("\nNot honoured everywhere by the deadline:\n");
    for item in waiting {
        let waited = compliance::waiting(item, now)
            .map(|w| format!(" (waiting {w})"))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {:<13} seq {} {} in {}, opted out {}{waited}, deadline {}: {}\n",
            item.state.as_str(),
            item.seq,
            item.phone_number,
            item.organization_id,
            item.occurred_at,
            item.deadline,
            compliance::behind(item)
        ));
    }
}

/// Every message sent after an opt-out.
fn sent_after(report: &Report, out: &mut String) {
    let sent: Vec<_> = report
        .items
        .iter()
        .filter(|i| !i.sent_after_opt_out.is_empty())
        .collect();
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
}

/// One row per opt-out; a column per destination with when it had it.
fn csv(report: &Report) -> Result<String, CliError> {
    let mut writer = ::csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = [
        "seq",
        "phoneNumber",
        "organizationId",
        "leadId",
        "occurredAt",
        "source",
        "state",
        "deadline",
        "honouredAt",
    ]
    .map(str::to_owned)
    .to_vec();
    let names: Vec<&str> = report
        .destinations
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    header.extend(names.iter().map(|n| format!("honouredAt:{n}")));
    header.extend(["confirmation".to_owned(), "sentAfterOptOut".to_owned()]);
    let fail = |e: ::csv::Error| CliError::Runtime(e.into());
    writer.write_record(&header).map_err(fail)?;
    for item in &report.items {
        let mut row = vec![
            item.seq.to_string(),
            item.phone_number.clone(),
            item.organization_id.clone(),
            item.lead_id.clone().unwrap_or_default(),
            item.occurred_at.to_string(),
            item.source.to_string(),
            item.state.as_str().to_owned(),
            item.deadline.to_string(),
            item.honoured_at.map(|t| t.to_string()).unwrap_or_default(),
        ];
        for name in &names {
            let had = item.destinations.iter().find(|d| d.name == *name);
            row.push(match had {
                None => "n/a".to_owned(),
                Some(d) => d.honoured_at.map(|t| t.to_string()).unwrap_or_default(),
            });
        }
        row.push(
            item.confirmation
                .as_ref()
                .map(|m| m.id.clone())
                .unwrap_or_default(),
        );
        let sent: Vec<&str> = item
            .sent_after_opt_out
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        row.push(sent.join(" "));
        writer.write_record(&row).map_err(fail)?;
    }
    let bytes = writer
        .into_inner()
        .map_err(|e| CliError::Runtime(anyhow::anyhow!("{e}")))?;
    String::from_utf8(bytes).map_err(|e| CliError::Runtime(e.into()))
}
