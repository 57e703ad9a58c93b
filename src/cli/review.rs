//! `review` and `review decide`: the replies put to a person, and their decisions.

use super::output::print_json;
use super::{CliError, ReviewCommand, open};
use crate::apply::reviewed::{self, ReviewError};
use crate::ledger::Items;
use crate::model::review::{Decision, ReviewDecision, ReviewItem};
use crate::model::text::Escaped;
use crate::settings::Settings;

/// Most replies listed.
const MOST_LISTED: i64 = 1_000;

/// `review` and its subcommand.
pub async fn run(
    settings: &Settings,
    command: Option<ReviewCommand>,
    all: bool,
    json: bool,
) -> Result<(), CliError> {
    match command {
        None => list(settings, all, json).await,
        Some(ReviewCommand::Decide {
            id,
            opt_out,
            not_opt_out: _,
            by,
            reason,
        }) => {
            let decision = ReviewDecision {
                decision: if opt_out {
                    Decision::OptOut
                } else {
                    Decision::NotOptOut
                },
                by,
                reason,
            };
            decide(settings, id, &decision, json).await
        }
    }
}

async fn list(settings: &Settings, all: bool, json: bool) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let calendar = settings.compliance.business_days()?;
    let items = crate::ledger::review::items(&pool, &calendar, all, MOST_LISTED)
        .await
        .map_err(anyhow::Error::from)?;
    if json {
        return print_json(&Items { items });
    }
    if items.is_empty() {
        println!("no reply waits for review");
    }
    for item in &items {
        println!("{}", line(item));
    }
    Ok(())
}

/// One line of `review`.
fn line(item: &ReviewItem) -> String {
    let mut line = format!(
        "{} {} ({}) {}: {:?}, received {}, due {}",
        item.id,
        item.phone_number,
        Escaped(&item.source),
        item.matched.join(", "),
        Escaped(&item.text).to_string(),
        item.received_at,
        item.due
    );
    if let (Some(decision), Some(by)) = (&item.decision, &item.decided_by) {
        line.push_str(&format!(": decided {decision} by {}", Escaped(by)));
    }
    line
}

async fn decide(
    settings: &Settings,
    id: i64,
    decision: &ReviewDecision,
    json: bool,
) -> Result<(), CliError> {
    let calendar = settings.compliance.business_days()?;
    let pool = open(settings).await?;
    let sources = crate::apply::Policy::of(settings, crate::systems::post_reader_of).sources;
    let decided = reviewed::decide(&pool, &sources, id, decision, chrono::Utc::now())
        .await
        .map_err(|e| match e {
            ReviewError::NotFound(_) => CliError::NotFound(e.to_string()),
            ReviewError::Invalid(_)
            | ReviewError::Decided { .. }
            | ReviewError::SourceGone { .. } => CliError::Usage(e.to_string()),
            ReviewError::Database(_) => CliError::Runtime(e.into()),
        })?;
    let item = crate::ledger::review::item(&calendar, decided);
    if json {
        return print_json(&item);
    }
    println!("{}", line(&item));
    Ok(())
}
