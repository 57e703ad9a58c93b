//! `destinations` and its subcommands: `outcomes`, `check`, `retry`, `replay`.

use super::output::{destination_line, outcome_line, print_json};
use super::subscribers::{replay, replay_error, retry};
use super::{CliError, DestinationsCommand, open};
use crate::ledger::Items;
use crate::model::text::Escaped;
use crate::sender::destinations;
use crate::settings::{DestinationSettings, Settings};

/// `destinations` and its subcommands.
pub async fn run(
    settings: &Settings,
    command: Option<DestinationsCommand>,
    json: bool,
) -> Result<(), CliError> {
    match command {
        None => list(settings, json).await,
        Some(DestinationsCommand::Outcomes { name, state, after }) => {
            outcomes(settings, &name, state, after, json).await
        }
        Some(DestinationsCommand::Check { name }) => check(settings, name.as_deref(), json).await,
        Some(DestinationsCommand::Retry { name }) => {
            retry::<DestinationSettings>(settings, &name, json).await
        }
        Some(DestinationsCommand::Replay { name, from }) => {
            replay::<DestinationSettings>(settings, &name, from, json).await
        }
    }
}

async fn list(settings: &Settings, json: bool) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let items = crate::sender::views(&pool, &settings.destination)
        .await
        .map_err(anyhow::Error::from)?;
    if json {
        return print_json(&Items { items });
    }
    if items.is_empty() {
        println!("no destination is configured ([[destination]] in the configuration)");
    }
    for destination in &items {
        println!("{}", destination_line(destination));
    }
    Ok(())
}

async fn outcomes(
    settings: &Settings,
    name: &str,
    state: Option<crate::model::OutcomeKind>,
    after: i64,
    json: bool,
) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let items = destinations::outcomes(&pool, &settings.destination, name, state, after)
        .await
        .map_err(replay_error)?;
    if json {
        return print_json(&Items { items });
    }
    if items.is_empty() {
        println!("no outcome to list");
    }
    for item in &items {
        println!("{}", outcome_line(item));
    }
    if items.len() as i64 == destinations::MAX_LISTED
        && let Some(last) = items.last()
    {
        println!("(more after seq {}: --after {})", last.seq, last.seq);
    }
    Ok(())
}

/// Exit 0 when every destination checked is ready, 1 naming each that is not.
async fn check(settings: &Settings, name: Option<&str>, json: bool) -> Result<(), CliError> {
    let http = crate::systems::http_client().map_err(anyhow::Error::from)?;
    let checked = destinations::check(&settings.destination, name, &http)
        .await
        .map_err(replay_error)?;
    if json {
        let items: Vec<serde_json::Value> = checked
            .iter()
            .map(|c| serde_json::json!({"name": c.name, "ok": c.problem.is_none(), "problem": c.problem}))
            .collect();
        print_json(&Items { items })?;
    } else {
        if checked.is_empty() {
            println!("no destination is configured ([[destination]] in the configuration)");
        }
        for c in &checked {
            match &c.problem {
                None => println!("{}: ok", c.name),
                Some(problem) => println!("{}: FAILING: {}", c.name, Escaped(problem)),
            }
        }
    }
    let failing: Vec<&str> = checked
        .iter()
        .filter(|c| c.problem.is_some())
        .map(|c| c.name.as_str())
        .collect();
    if failing.is_empty() {
        Ok(())
    } else {
        Err(CliError::Runtime(anyhow::anyhow!(
            "not ready: {}",
            failing.join(", ")
        )))
    }
}
