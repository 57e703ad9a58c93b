//! `opt-out`, `opt-in` and `export`: local consent changes queued for the service, and bulk
//! exports of the ledger.

use crate::model::AccountId;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use chrono::Utc;

use super::CliError;
use crate::apply::{self, LocalChange, LocalError};
use crate::export::{self, Dataset, Format};
use crate::settings::Settings;

/// A local change made with the CLI, by [`cli_actor`].
pub fn local_change(
    account: &AccountId,
    organization_id: String,
    phone_number: String,
    opted_out: bool,
    tag_id: Option<String>,
    reason: Option<String>,
) -> LocalChange {
    LocalChange {
        account: account.to_owned(),
        organization_id,
        phone_number,
        opted_out,
        tag_id,
        reason,
        actor: cli_actor(),
    }
}

/// The actor of a change made with the CLI: `cli:` and the login name (`$USER`), else the
/// user id of the process.
pub fn cli_actor() -> String {
    use std::os::unix::fs::MetadataExt as _;
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .or_else(|| {
            // `/proc/self` belongs to the process's user.
            std::fs::metadata("/proc/self")
                .ok()
                .map(|m| format!("uid{}", m.uid()))
        })
        .unwrap_or_else(|| "unknown".to_owned());
    format!("cli:{user}")
}

/// Records a local change; the daemon's pusher sends it (within its poll interval, as the
/// CLI is another process).
pub async fn change(settings: &Settings, change: LocalChange, json: bool) -> Result<(), CliError> {
    let phone = change.validate().map_err(usage)?;
    let pool = super::open(settings).await?;
    let recorded = apply::record_local(&pool, &change, Utc::now())
        .await
        .map_err(usage)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&recorded).map_err(anyhow::Error::from)?
        );
    } else {
        println!(
            "{} {} in {}: ledger seq {}{}; queued for the service (see `outreach-sync status`)",
            if change.opted_out {
                "opted out"
            } else {
                "opted in"
            },
            phone,
            change.organization_id,
            recorded.seq,
            if recorded.current {
                ""
            } else {
                " (a newer change was already in place)"
            },
        );
    }
    Ok(())
}

fn usage(error: LocalError) -> CliError {
    match error {
        LocalError::Invalid(message) => CliError::Usage(message),
        LocalError::Database(error) => CliError::Runtime(error.into()),
    }
}

/// Streams `dataset` to `output` (stdout when absent) through a buffer.
pub async fn export(
    settings: &Settings,
    dataset: Dataset,
    format: Format,
    since: Option<i64>,
    output: Option<PathBuf>,
) -> Result<(), CliError> {
    if since.is_some_and(|s| s < 0) {
        return Err(CliError::Usage("--since must be a seq (0 or more)".into()));
    }
    let pool = super::open(settings).await?;
    let sink: Box<dyn Write + Send> = match &output {
        Some(path) => Box::new(
            std::fs::File::create(path)
                .map_err(|e| CliError::Usage(format!("cannot create {}: {e}", path.display())))?,
        ),
        None => Box::new(std::io::stdout()),
    };
    let mut out = BufWriter::with_capacity(256 * 1024, sink);
    let rows = export::export(&pool, dataset, format, since, &mut out)
        .await
        .map_err(anyhow::Error::from)?;
    drop(out);
    if let Some(path) = output {
        eprintln!("{rows} rows written to {}", path.display());
    }
    Ok(())
}
