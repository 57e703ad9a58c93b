//! `sources` and its subcommands: `check`, `run`, `resync`.

use super::output::print_json;
use super::{CliError, SourcesCommand, open};
use crate::ledger::Items;
use crate::model::text::Escaped;
use crate::settings::{Settings, SourceSettings};
use crate::sources::{Reader, SourceView};
use crate::store::SourceStore as _;

/// `sources` and its subcommands.
pub async fn run(
    settings: &Settings,
    command: Option<SourcesCommand>,
    json: bool,
) -> Result<(), CliError> {
    match command {
        None => list(settings, json).await,
        Some(SourcesCommand::Check { name }) => check(settings, name.as_deref(), json).await,
        Some(SourcesCommand::Run { name }) => run_now(settings, &name, json).await,
        Some(SourcesCommand::Resync { name, since }) => resync(settings, &name, &since, json).await,
    }
}

/// One line of `sources`.
fn source_line(s: &SourceView) -> String {
    let state = serde_json::to_value(s.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let mut line = format!(
        "{} ({}): {state}, {} read, {} opt-outs, {} confirmed, {} ignored",
        s.name, s.kind, s.read, s.opt_outs, s.confirmed, s.ignored
    );
    if s.opt_ins > 0 {
        line.push_str(&format!(", {} opt-ins", s.opt_ins));
    }
    if let Some(at) = &s.watermark {
        line.push_str(&format!(", read up to {at}"));
    }
    if let Some(since) = &s.running_since {
        let secs = (chrono::Utc::now() - since.at()).num_seconds().max(0);
        line.push_str(&format!(", reading since {since} ({secs} s)"));
    }
    if let Some(at) = &s.last_run_at {
        line.push_str(&format!(", last run {at}"));
    }
    if let Some(error) = &s.last_error {
        let which = if s.running_since.is_some() {
            "the last run's error"
        } else {
            "last error"
        };
        line.push_str(&format!(", {which}: {}", Escaped(error)));
    }
    line
}

async fn list(settings: &Settings, json: bool) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let items = crate::sources::views(&pool, &settings.source)
        .await
        .map_err(anyhow::Error::from)?;
    if json {
        return print_json(&Items { items });
    }
    if items.is_empty() {
        println!("no source is configured ([[source]] in the configuration)");
    }
    for source in &items {
        println!("{}", source_line(source));
    }
    Ok(())
}

/// The configured source named `name` (exit 3 when there is none).
fn named<'s>(settings: &'s Settings, name: &str) -> Result<&'s SourceSettings, CliError> {
    settings
        .source
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| CliError::NotFound(format!("no source is named {name:?}")))
}

fn reader(settings: &Settings, source: &SourceSettings) -> Result<Reader, CliError> {
    let served = settings.account_ids()?;
    match Reader::new(source, &served) {
        Ok(reader) => Ok(reader
            .echoing(&settings.destination)
            .trusting(settings.consent.trust())),
        Err(error @ crate::sources::ReaderError::Posted(_)) => {
            Err(CliError::Usage(error.to_string()))
        }
        Err(error) => Err(CliError::Runtime(error.into())),
    }
}

/// What `sources check` says of a source a system posts to: there is nothing to reach, only
/// where it is posted and what it is signed with.
fn posted_check(source: &SourceSettings) -> serde_json::Value {
    let mut found = vec![format!(
        "posted to /sources/{} on the ingest listener",
        source.name
    )];
    found.extend(crate::systems::posted_of(source).map_or_else(Vec::new, |p| p.describe()));
    serde_json::json!({"name": source.name, "ok": true, "found": found})
}

/// Exit 0 when every source checked can read, 1 naming each that cannot.
async fn check(settings: &Settings, name: Option<&str>, json: bool) -> Result<(), CliError> {
    let sources: Vec<&SourceSettings> = match name {
        Some(name) => vec![named(settings, name)?],
        None => settings.source.iter().collect(),
    };
    let mut items = Vec::new();
    for source in sources {
        if !source.system.polled() {
            items.push(posted_check(source));
            continue;
        }
        let checked = reader(settings, source)?.check().await;
        items.push(match checked {
            Ok(found) => serde_json::json!({"name": source.name, "ok": true, "found": found}),
            Err(error) => {
                serde_json::json!({"name": source.name, "ok": false, "problem": error.to_string()})
            }
        });
    }
    if json {
        print_json(&Items {
            items: items.clone(),
        })?;
    } else if items.is_empty() {
        println!("no source is configured ([[source]] in the configuration)");
    }
    let mut failing = Vec::new();
    for item in &items {
        let name = item["name"].as_str().unwrap_or_default();
        match item["problem"].as_str() {
            Some(problem) => {
                failing.push(name.to_owned());
                if !json {
                    println!("{name}: FAILING: {}", Escaped(problem));
                }
            }
            None if !json => {
                let found: Vec<&str> = item["found"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f.as_str())
                    .collect();
                println!("{name}: ok ({})", found.join("; "));
            }
            None => {}
        }
    }
    if failing.is_empty() {
        Ok(())
    } else {
        Err(CliError::Runtime(anyhow::anyhow!(
            "cannot read: {}",
            failing.join(", ")
        )))
    }
}

/// One run of source `name` now, beside any daemon (what both read is recorded once).
async fn run_now(settings: &Settings, name: &str, json: bool) -> Result<(), CliError> {
    let source = named(settings, name)?;
    let pool = open(settings).await?;
    let report = reader(settings, source)?
        .run_once(&pool)
        .await
        .map_err(|e| CliError::Runtime(anyhow::anyhow!("{name}: {e}")))?;
    let c = report.counts;
    if json {
        return print_json(&serde_json::json!({
            "name": name, "read": c.read, "optOuts": c.opt_outs, "optIns": c.opt_ins,
            "confirmed": c.confirmed, "ignored": c.ignored,
            "watermark": report.watermark.map(crate::model::Timestamp),
        }));
    }
    println!(
        "{name}: {} read, {} opt-outs, {} opt-ins, {} confirmed, {} ignored",
        c.read, c.opt_outs, c.opt_ins, c.confirmed, c.ignored
    );
    Ok(())
}

/// Moves source `name`'s watermark to `since`: its next run reads from there.
async fn resync(settings: &Settings, name: &str, since: &str, json: bool) -> Result<(), CliError> {
    let source = named(settings, name)?;
    let at = parse_date(since)?;
    let pool = open(settings).await?;
    pool.ensure_source(name, source.system.kind())
        .await
        .map_err(anyhow::Error::from)?;
    pool.resync_source(name, crate::model::Timestamp(at))
        .await
        .map_err(anyhow::Error::from)?;
    if json {
        return print_json(
            &serde_json::json!({"name": name, "watermark": crate::model::Timestamp(at)}),
        );
    }
    println!(
        "{name}: its next run reads from {}",
        crate::model::Timestamp(at)
    );
    Ok(())
}

/// A date (`2026-09-01`, midnight UTC) or a time in RFC 3339, not in the future.
fn parse_date(text: &str) -> Result<chrono::DateTime<chrono::Utc>, CliError> {
    let at = chrono::DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.to_utc())
        .ok()
        .or_else(|| {
            chrono::NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc())
        })
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--since {}: a date (2026-09-01) or a time in RFC 3339 is expected",
                Escaped(text)
            ))
        })?;
    if at > chrono::Utc::now() {
        return Err(CliError::Usage(format!(
            "--since {}: in the future; a source reads changes made before now",
            Escaped(text)
        )));
    }
    Ok(at)
}
