//! `ledger verify`, `evidence` and `prune`: what makes the ledger stand as evidence.

use std::path::PathBuf;

use anyhow::Context as _;
use chrono::Utc;
use serde::Serialize;

use super::{CliError, open};
use crate::evidence;
use crate::ledger::chain;
use crate::model::Scope;
use crate::model::chain::{Break, ChainHead};
use crate::retention::Pruner;
use crate::settings::Settings;

/// Writes the evidence bundle of `phone` to `output` (or stdout); exit 3 if unknown.
pub async fn bundle(
    settings: &Settings,
    phone: &str,
    scope: Scope<'_>,
    output: Option<PathBuf>,
) -> Result<(), CliError> {
    let phone = &super::lookup_number(phone)?;
    let pool = open(settings).await?;
    let bundle = evidence::bundle(&pool, phone, scope, Utc::now())
        .await
        .map_err(anyhow::Error::from)?
        .ok_or_else(|| CliError::NotFound(format!("no ledger entry for {phone}")))?;
    let mut text = serde_json::to_string_pretty(&bundle).map_err(anyhow::Error::from)?;
    text.push('\n');
    match output {
        Some(path) => std::fs::write(&path, text)
            .with_context(|| format!("writing the bundle to {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(())
}

/// One retention pass now (or a count of what it would remove).
pub async fn prune(settings: &Settings, dry_run: bool, json: bool) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let pruned = Pruner::new(&pool, &settings.retention)
        .prune(Utc::now(), dry_run)
        .await
        .map_err(anyhow::Error::from)?;
    if json {
        return super::output::print_json(&pruned);
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    println!(
        "message status deliveries {verb}: {} (applied, received over {} days ago)",
        pruned.message_status_deliveries, settings.retention.message_status_days
    );
    println!(
        "consent deliveries {verb}:        {} (applied, received over {} days ago)",
        pruned.consent_deliveries, settings.retention.consent_delivery_days
    );
    println!(
        "messages {verb}:                  {} (terminal status over {} days old)",
        pruned.messages, settings.retention.messages_days
    );
    if !dry_run {
        println!(
            "decided replies {verb}:           {} (decided over {} days ago; one waiting never goes)",
            pruned.decided_replies, settings.retention.consent_delivery_days
        );
    }
    println!(
        "quarantined kept:                  {} (never pruned)",
        pruned.quarantined_kept
    );
    if !dry_run {
        println!("pages given back:                  {}", pruned.pages_freed);
        println!(
            "longest single write:              {:.1} ms",
            pruned.longest_write_ms
        );
    }
    println!("ledger entries are never pruned");
    Ok(())
}

/// `ledger verify --json`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Verified {
    intact: bool,
    /// The last entry checked: the head when intact, the last good entry otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    head: Option<ChainHead>,
    #[serde(skip_serializing_if = "Option::is_none")]
    broken_at: Option<Break>,
}

/// Walks the chain: exit 0 with the head, exit 1 naming the first entry that breaks it.
pub async fn verify(settings: &Settings, json: bool) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let outcome = chain::verify(&pool).await.map_err(anyhow::Error::from)?;
    if json {
        let report = match &outcome {
            Ok(head) => Verified {
                intact: true,
                head: Some(head.clone()),
                broken_at: None,
            },
            Err(broken) => Verified {
                intact: false,
                head: None,
                broken_at: Some(broken.clone()),
            },
        };
        super::output::print_json(&report)?;
    }
    match outcome {
        Ok(head) => {
            if !json {
                println!(
                    "ledger intact: every entry up to seq {} matches its hash; head {}",
                    head.seq, head.hash
                );
            }
            Ok(())
        }
        Err(broken) => Err(CliError::Runtime(anyhow::anyhow!("{broken}"))),
    }
}
