//! `callers` and `callers apply`: who a revocation binds, and the spreading of a caller's
//! earlier opt-outs by hand.

use std::sync::Arc;

use super::output::print_json;
use super::{CallersCommand, CliError, open};
use crate::ledger::Items;
use crate::model::caller::CallerView;
use crate::model::text::Escaped;
use crate::settings::{Live, Settings};

/// `callers` and its subcommand.
pub async fn run(
    settings: &Settings,
    command: Option<CallersCommand>,
    json: bool,
) -> Result<(), CliError> {
    let callers = settings.callers()?;
    match command {
        None => {
            let now = chrono::Utc::now();
            let items: Vec<CallerView> = callers.iter().map(|c| CallerView::of(c, now)).collect();
            if json {
                return print_json(&Items { items });
            }
            if items.is_empty() {
                println!(
                    "no caller is configured: each organization is its own caller ([[caller]] in the configuration)"
                );
            }
            for item in &items {
                println!("{}", Escaped(&item.said()));
            }
            Ok(())
        }
        Some(CallersCommand::Apply { name }) => {
            let Some(caller) = callers.iter().find(|c| c.name.as_deref() == Some(&name)) else {
                return Err(CliError::NotFound(format!(
                    "no caller is named {} ([[caller]] in the configuration)",
                    crate::model::text::quoted(&name)
                )));
            };
            let pool = open(settings).await?;
            let sharer = crate::share::Sharer::new(
                pool.clone(),
                Live::new(callers.clone()),
                Arc::new(tokio::sync::Notify::new()),
            );
            let read = sharer
                .apply_early(caller)
                .await
                .map_err(anyhow::Error::from)?;
            pool.close().await;
            if json {
                return print_json(&serde_json::json!({"caller": name, "read": read}));
            }
            println!(
                "caller {}: {read} opt-outs read, each held in every member (recorded once; the running daemon pushes them)",
                Escaped(&name)
            );
            Ok(())
        }
    }
}
