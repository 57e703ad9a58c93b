//! The commands that read or change the ledger of an existing database, each handed to
//! the function of its theme.

use clap::Subcommand;

use super::accounts::{Filters, accounts_of, local_change};
use super::{
    CliError, Command, LedgerCommand, callers, consent, daemon, destinations, evidence, import,
    read, review, sources, subscribers,
};
use crate::settings::Settings;

/// What `reconcile` was asked to do: naming neither part means both.
fn pass_request(
    organizations: Vec<String>,
    leads: bool,
    messages: bool,
) -> crate::reconcile::PassRequest {
    crate::reconcile::PassRequest {
        organizations,
        leads: leads || !messages,
        messages: messages || !leads,
    }
}

/// What `replay` puts back in the queue: the one row named, else every quarantined one.
fn requeue(id: Option<i64>) -> crate::worker::Requeue {
    match id {
        Some(id) => crate::worker::Requeue::Id(id),
        None => crate::worker::Requeue::Quarantined,
    }
}

/// Runs a command that reads the ledger of an existing database, or hands one that changes
/// it to [`change`].
pub(super) async fn run<T: Subcommand>(
    command: Command<T>,
    settings: &Settings,
    json: bool,
) -> Result<(), CliError> {
    match command {
        Command::Consent {
            phone,
            organization,
            account,
        } => {
            let filters = Filters::of(organization, account)?;
            read::consent(settings, &phone, filters.scope(), json).await
        }
        Command::History {
            phone,
            organization,
            account,
        } => {
            let filters = Filters::of(organization, account)?;
            read::history(settings, &phone, filters.scope(), json).await
        }
        Command::Events { quarantined, limit } => {
            read::events(settings, quarantined, limit, json).await
        }
        Command::Replay { id, .. } => read::replay(settings, requeue(id), json).await,
        Command::Status => read::status(settings, json).await,
        Command::Evidence {
            phone,
            organization,
            account,
            output,
        } => {
            let filters = Filters::of(organization, account)?;
            evidence::bundle(settings, &phone, filters.scope(), output).await
        }
        Command::Prune { dry_run } => evidence::prune(settings, dry_run, json).await,
        Command::Ledger {
            command: LedgerCommand::Verify,
        } => evidence::verify(settings, json).await,
        Command::Export {
            dataset,
            format,
            since,
            output,
        } => consent::export(settings, dataset, format, since, output).await,
        command => change(command, settings, json).await,
    }
}

/// Runs a command that changes the ledger (or the subscribers' and destinations' state).
async fn change<T: Subcommand>(
    command: Command<T>,
    settings: &Settings,
    json: bool,
) -> Result<(), CliError> {
    match command {
        Command::Reconcile {
            account,
            organizations,
            leads,
            messages,
        } => {
            let request = pass_request(organizations, leads, messages);
            let accounts = accounts_of(settings, account.as_deref())?;
            daemon::reconcile_each(settings, accounts, &request, json).await
        }
        Command::OptOut {
            phone,
            organization,
            account,
            tag,
            reason,
        } => {
            let change = (organization, phone, true, tag, reason);
            local_change(settings, account.as_deref(), change, json).await
        }
        Command::OptIn {
            phone,
            organization,
            account,
            reason,
        } => {
            let change = (organization, phone, false, None, reason);
            local_change(settings, account.as_deref(), change, json).await
        }
        Command::Import(args) => import::run(settings, args, json).await,
        Command::Subscribers { command } => subscribers::run(settings, command, json).await,
        Command::Destinations { command } => destinations::run(settings, command, json).await,
        Command::Sources { command } => sources::run(settings, command, json).await,
        Command::Review { command, all } => review::run(settings, command, all, json).await,
        Command::Callers { command } => callers::run(settings, command, json).await,
        Command::Consent { .. }
        | Command::History { .. }
        | Command::Events { .. }
        | Command::Replay { .. }
        | Command::Status
        | Command::Evidence { .. }
        | Command::Prune { .. }
        | Command::Ledger { .. }
        | Command::Export { .. }
        | Command::Serve
        | Command::Migrate { .. }
        | Command::CheckConfig
        | Command::Sign { .. }
        | Command::Webhooks { .. }
        | Command::Report { .. }
        | Command::Completions { .. }
        | Command::ManPages { .. }
        | Command::Binary(_) => Err(CliError::Usage(
            "this command does not read the ledger".into(),
        )),
    }
}
