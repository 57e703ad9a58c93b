//! The read side: `consent`, `history`, `events`, `replay`, `status`.

use std::sync::Arc;

use serde::Serialize;

use super::output::print_json;
use super::{CliError, open};
use crate::ledger::{self, Items};
use crate::model::Scope;
use crate::model::text::Escaped;
use crate::outbox::OutboxState;
use crate::settings::Settings;
use crate::worker::{Requeue, Worker};

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

pub async fn consent(
    settings: &Settings,
    phone: &str,
    scope: Scope<'_>,
    json: bool,
) -> Result<(), CliError> {
    let phone = &super::lookup_number(phone)?;
    let pool = open(settings).await?;
    let current = ledger::current_with_suppression(&pool, phone, scope)
        .await
        .map_err(anyhow::Error::from)?;
    if current.items.is_empty() {
        return Err(CliError::NotFound(format!("no consent known for {phone}")));
    }
    if json {
        return print_json(&current);
    }
    println!(
        "{:<20} {:<20} {:<16} {:<9} {:<25} SOURCE",
        "ORGANIZATION", "LEAD", "PHONE", "OPTED OUT", "CHANGED AT"
    );
    for r in &current.items {
        println!(
            "{:<20} {:<20} {:<16} {:<9} {:<25} {}",
            Escaped(&r.organization_id),
            Escaped(r.lead_id.as_deref().unwrap_or("-")),
            r.phone_number,
            yes_no(r.opted_out),
            r.changed_at,
            r.source
        );
    }
    if let (Some(since), Some(by)) = (current.suppressed_since, current.suppressed_by) {
        println!(
            "suppressed for the whole account since {since} (entry {by}): a lead that appears with this number is opted out"
        );
    }
    Ok(())
}

pub async fn history(
    settings: &Settings,
    phone: &str,
    scope: Scope<'_>,
    json: bool,
) -> Result<(), CliError> {
    let phone = &super::lookup_number(phone)?;
    let pool = open(settings).await?;
    let items = ledger::history(&pool, phone, scope.organization)
        .await
        .map_err(anyhow::Error::from)?;
    let items = ledger::in_account(items, scope.account);
    if items.is_empty() {
        return Err(CliError::NotFound(format!("no ledger entry for {phone}")));
    }
    if json {
        return print_json(&Items { items });
    }
    println!(
        "{:>8} {:<20} {:<9} {:<25} {:<10} {:<10} EVENT",
        "SEQ", "ORGANIZATION", "OPTED OUT", "OCCURRED AT", "SOURCE", "SUPERSEDED"
    );
    for e in items {
        println!(
            "{:>8} {:<20} {:<9} {:<25} {:<10} {:<10} {}",
            e.seq,
            Escaped(&e.organization_id),
            yes_no(e.opted_out),
            e.occurred_at,
            e.source,
            yes_no(e.superseded),
            Escaped(&e.event_ref)
        );
    }
    Ok(())
}

pub async fn events(
    settings: &Settings,
    quarantined: bool,
    limit: i64,
    json: bool,
) -> Result<(), CliError> {
    if limit < 1 {
        return Err(CliError::Usage("--limit must be at least 1".into()));
    }
    let pool = open(settings).await?;
    let items = ledger::events(&pool, quarantined, limit)
        .await
        .map_err(anyhow::Error::from)?;
    if json {
        return print_json(&Items { items });
    }
    println!(
        "{:>8} {:<25} {:<12} {:<18} {:>8}  KEY / ERROR",
        "ID", "RECEIVED AT", "STATE", "TYPE", "ATTEMPTS"
    );
    for e in items {
        println!(
            "{:>8} {:<25} {:<12} {:<18} {:>8}  {}{}",
            e.id,
            e.received_at,
            e.state,
            Escaped(e.event_type.as_deref().unwrap_or("-")),
            e.attempts,
            Escaped(&e.dedup_key),
            e.last_error
                .map(|r| format!("  ({})", Escaped(&r)))
                .unwrap_or_default()
        );
    }
    Ok(())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReplaySummary {
    requeued: u64,
    applied: u64,
    quarantined: u64,
    /// Still waiting for a worker when the command gave up waiting.
    pending: u64,
}

/// Longest wait, after applying, for requeued rows another worker (a running daemon, any
/// replica) holds.
const REPLAY_SETTLE: std::time::Duration = std::time::Duration::from_secs(30);

pub async fn replay(settings: &Settings, selection: Requeue, json: bool) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let requeued = crate::worker::requeue(&pool, selection)
        .await
        .map_err(anyhow::Error::from)?;
    if let (true, Requeue::Id(id)) = (requeued.is_empty(), selection) {
        return Err(CliError::NotFound(format!(
            "no stored delivery with id {id}"
        )));
    }
    let worker = Worker::new(
        pool.clone(),
        Arc::new(OutboxState::default()),
        settings.consent.account_sync,
    );
    worker.drain().await.map_err(anyhow::Error::from)?;
    // A running daemon's worker may have taken some of the rows first: what became of them
    // is read from the rows themselves, once no worker holds them.
    let states = crate::worker::settled(&pool, &requeued, REPLAY_SETTLE)
        .await
        .map_err(anyhow::Error::from)?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    let summary = ReplaySummary {
        requeued: requeued.len() as u64,
        applied: count(states.applied),
        quarantined: count(states.quarantined),
        pending: count(states.pending),
    };
    if json {
        return print_json(&summary);
    }
    println!(
        "{} deliveries requeued; {} applied, {} quarantined (see `outreach-sync events --quarantined`){}",
        summary.requeued,
        summary.applied,
        summary.quarantined,
        match summary.pending {
            0 => String::new(),
            n => format!("; {n} still pending (a worker is retrying them)"),
        }
    );
    Ok(())
}

pub async fn status(settings: &Settings, json: bool) -> Result<(), CliError> {
    let pool = open(settings).await?;
    let accounts = settings.account_ids()?;
    let mut status = ledger::status_of(&pool, &accounts)
        .await
        .map_err(anyhow::Error::from)?;
    status.subscribers = crate::sender::views(&pool, &settings.subscriber)
        .await
        .map_err(anyhow::Error::from)?;
    if json {
        return print_json(&status);
    }
    println!("backlog (unapplied):   {}", status.backlog);
    if let Some(oldest) = &status.oldest_pending_at {
        println!("oldest unapplied:      {oldest}");
    }
    println!("quarantined:           {}", status.quarantined);
    println!("applied:               {}", status.applied);
    println!("ledger entries:        {}", status.ledger_entries);
    println!(
        "chain head:            seq {} hash {}",
        status.chain_head.seq, status.chain_head.hash
    );
    println!("leads mirrored:        {}", status.leads);
    println!(
        "messages tracked:      {} ({} not final)",
        status.messages, status.open_messages
    );
    print_work(&status);
    match &status.last_error {
        Some(e) => println!("last error:            {} at {}", Escaped(&e.message), e.at),
        None => println!("last error:            none"),
    }
    if status.replicas.is_empty() {
        println!("replicas:              none running");
    }
    for replica in &status.replicas {
        println!(
            "replica:               {} (last seen {}){}",
            replica.name,
            replica.last_seen,
            if replica.leader { ", leader" } else { "" }
        );
    }
    for subscriber in &status.subscribers {
        println!(
            "subscriber:            {}",
            super::output::subscriber_line(subscriber)
        );
    }
    println!(
        "webhook registrations: {}",
        super::output::registration_line(status.registration_check.as_ref())
    );
    Ok(())
}

/// The status lines of the daemon's work with the service: reconciliation and pushes.
fn print_work(status: &crate::model::Status) {
    if status.reconciliation.is_empty() {
        println!("last reconciliation:   never");
    }
    for pass in &status.reconciliation {
        println!(
            "last reconciliation:   {} at {}: {} leads, {} repaired{}",
            Escaped(&pass.organization_id),
            pass.finished_at,
            pass.leads_scanned,
            pass.repaired,
            pass.error
                .as_deref()
                .map(|e| format!(", error: {}", Escaped(e)))
                .unwrap_or_default()
        );
    }
    for org in &status.reconciliation_in_progress {
        println!(
            "reconciling:           {} (resumes from its saved cursor)",
            Escaped(org)
        );
    }
    let pushes = &status.pushes;
    println!(
        "pending pushes:        {} ({} retrying); {} sent, {} failed",
        pushes.pending, pushes.retrying, pushes.sent, pushes.failed
    );
    if let Some(oldest) = &pushes.oldest_pending_at {
        println!("oldest pending push:   {oldest}");
    }
    if let Some(error) = &pushes.last_push_error {
        println!("last push error:       {}", Escaped(error));
    }
}
