//! `subscribers` and `subscribers replay`.

use super::read::print_json;
use super::{CliError, open};
use crate::ledger::Items;
use crate::model::SubscriberView;
use crate::settings::Settings;
use crate::subscribers::{self, ReplayError};

/// One line per subscriber: name, URL, state, cursor and lag, and what went wrong last.
pub fn line(s: &SubscriberView) -> String {
    let mut line = format!(
        "{} -> {}: {}, cursor {}, {} entries behind ({:.1}s)",
        s.name, s.url, s.state, s.cursor, s.lag_entries, s.lag_seconds
    );
    if let Some(at) = &s.last_success_at {
        line.push_str(&format!(", last delivered {at}"));
    }
    if let Some(at) = &s.next_attempt_at {
        line.push_str(&format!(", next attempt {at}"));
    }
    if let Some(error) = &s.last_error {
        line.push_str(&format!(", last error: {error}"));
    }
    line
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
        println!("{}", line(subscriber));
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
        .map_err(|error| match error {
            ReplayError::Unknown(_) => CliError::NotFound(error.to_string()),
            ReplayError::BeforeTheStart | ReplayError::Forward { .. } => {
                CliError::Usage(error.to_string())
            }
            ReplayError::Database(error) => CliError::Runtime(error.into()),
        })?;
    if json {
        return print_json(&view);
    }
    println!("{}", line(&view));
    Ok(())
}
