//! `subscribers`, `subscribers replay` and `subscribers retry`.

use super::output::{print_json, subscriber_line};
use super::{CliError, SubscribersCommand, open};
use crate::ledger::Items;
use crate::settings::Settings;
use crate::subscribers::{self, ReplayError};

/// `subscribers` and its subcommands.
pub async fn run(
    settings: &Settings,
    command: Option<SubscribersCommand>,
    json: bool,
) -> Result<(), CliError> {
    match command {
        None => list(settings, json).await,
        Some(SubscribersCommand::Replay { name, from }) => {
            replay(settings, &name, from, json).await
        }
        Some(SubscribersCommand::Retry { name }) => retry(settings, &name, json).await,
    }
}

pub async fn list(settings: &Settings, json: bool) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let items = subscribers::views(&pool, &settings.subscriber)
        .await
        .map_err(anyhow::Error::from)?;
    if json {
        return print_json(&Items { items });
    }
    if items.is_empty() {
        println!("no subscriber is configured ([[subscriber]] in the configuration)");
    }
    for subscriber in &items {
        println!("{}", subscriber_line(subscriber));
    }
    Ok(())
}

pub async fn replay(
    settings: &Settings,
    name: &str,
    from: i64,
    json: bool,
) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let view = subscribers::replay(&pool, &settings.subscriber, name, from)
        .await
        .map_err(replay_error)?;
    if json {
        return print_json(&view);
    }
    println!("{}", subscriber_line(&view));
    Ok(())
}

pub async fn retry(settings: &Settings, name: &str, json: bool) -> Result<(), CliError> {
    let pool = open(settings).await?;
    // Another process: the daemon's sender is not here to ask, so the attempt is made due.
    let view = subscribers::retry(&pool, &settings.subscriber, None, name)
        .await
        .map_err(replay_error)?;
    if json {
        return print_json(&view);
    }
    println!("{}", subscriber_line(&view));
    Ok(())
}

/// A refused replay or retry, as the command line reports it.
pub(super) fn replay_error(error: ReplayError) -> CliError {
    match error {
        ReplayError::Unknown(_) | ReplayError::UnknownDestination(_) => {
            CliError::NotFound(error.to_string())
        }
        ReplayError::BeforeTheStart | ReplayError::Forward { .. } => {
            CliError::Usage(error.to_string())
        }
        ReplayError::Database(error) => CliError::Runtime(error.into()),
    }
}
