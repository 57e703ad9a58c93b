//! `subscribers`, `subscribers replay` and `subscribers retry`; and the one `retry` and
//! `replay` of subscribers and destinations alike ([`Listed`]).

use super::output::{destination_line, print_json, subscriber_line};
use super::{CliError, SubscribersCommand, open};
use crate::ledger::Items;
use crate::model::{DestinationView, SubscriberView};
use crate::sender::{self, ReplayError, Steered};
use crate::settings::{DestinationSettings, Settings, SubscriberSettings};

/// Subscribers or destinations, as the command line steers them: where their settings
/// are, and a line of a view.
pub(super) trait Listed: Steered + Sized {
    fn configured(settings: &Settings) -> &[Self];
    fn line(view: &Self::View) -> String;
}

impl Listed for SubscriberSettings {
    fn configured(settings: &Settings) -> &[Self] {
        &settings.subscriber
    }

    fn line(view: &SubscriberView) -> String {
        subscriber_line(view)
    }
}

impl Listed for DestinationSettings {
    fn configured(settings: &Settings) -> &[Self] {
        &settings.destination
    }

    fn line(view: &DestinationView) -> String {
        destination_line(view)
    }
}

/// `subscribers` and its subcommands.
pub async fn run(
    settings: &Settings,
    command: Option<SubscribersCommand>,
    json: bool,
) -> Result<(), CliError> {
    match command {
        None => list(settings, json).await,
        Some(SubscribersCommand::Replay { name, from }) => {
            replay::<SubscriberSettings>(settings, &name, from, json).await
        }
        Some(SubscribersCommand::Retry { name }) => {
            retry::<SubscriberSettings>(settings, &name, json).await
        }
    }
}

pub async fn list(settings: &Settings, json: bool) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let items = sender::views(&pool, &settings.subscriber)
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

/// `subscribers replay NAME` and `destinations replay NAME`.
pub(super) async fn replay<L: Listed>(
    settings: &Settings,
    name: &str,
    from: i64,
    json: bool,
) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let view = sender::replay(&pool, L::configured(settings), name, from)
        .await
        .map_err(replay_error)?;
    if json {
        return print_json(&view);
    }
    println!("{}", L::line(&view));
    Ok(())
}

/// `subscribers retry NAME` and `destinations retry NAME`.
pub(super) async fn retry<L: Listed>(
    settings: &Settings,
    name: &str,
    json: bool,
) -> Result<(), CliError> {
    let pool = open(settings).await?;
    // Another process: the daemon's sender is not here to ask, so the attempt is made due
    // (and a destination's error ended), which it notices within a poll.
    let view = sender::retry(&pool, L::configured(settings), None, name)
        .await
        .map_err(replay_error)?;
    if json {
        return print_json(&view);
    }
    println!("{}", L::line(&view));
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
