//! The command line: parsing, exit codes, and one function per subcommand.

/// The account a command is about, and the scope of a read.
mod accounts;
mod callers;
mod consent;
mod daemon;
mod destinations;
mod evidence;
mod import;
/// The commands that read or change the ledger of an existing database.
mod on_ledger;
mod output;
mod packaging;
mod read;
mod registrations;
mod report;
mod review;
mod sources;
mod subscribers;
mod webhooks;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use self::accounts::accounts_of;
use crate::settings::{Settings, SettingsError};

// `T` is the binary's own commands (`demo`, `sandbox`: they drive the sandbox, which the
// daemon does not depend on), listed among the daemon's and run by the binary. (Not a doc
// comment: clap would print it in `--help`.)
/// outreach-sync: the outreach messaging service's consent ledger, kept durable and correct.
#[derive(Debug, Parser)]
#[command(name = "outreach-sync", version, about)]
pub struct Cli<T: Subcommand> {
    /// Configuration file (default: /etc/outreach-sync/config.toml if it exists).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command<T>,
}

#[derive(Debug, Subcommand)]
pub enum Command<T: Subcommand> {
    /// Run the daemon until SIGTERM or SIGINT.
    Serve,
    /// Apply database migrations and exit; with --from, then copy a SQLite database into the
    /// configured (empty) PostgreSQL one.
    Migrate {
        /// The SQLite database to copy, `sqlite://PATH` (brought to the latest schema first).
        #[arg(long, value_name = "URL")]
        from: Option<String>,
    },
    /// Validate the configuration and print it with every secret redacted.
    CheckConfig,
    /// Read a body on stdin and print the signature headers the configured scheme expects.
    Sign {
        /// Sign with this secret instead of the first configured one.
        #[arg(long)]
        secret: Option<String>,
    },
    /// Webhook tools.
    Webhooks {
        /// Only this account's registrations (default: each account in turn).
        #[arg(long, value_name = "NAME", global = true)]
        account: Option<String>,
        #[command(subcommand)]
        command: WebhooksCommand,
    },
    /// Current consent of a number in each organization (exit 3 if unknown).
    Consent {
        phone: String,
        #[arg(long = "org", value_name = "ID")]
        organization: Option<String>,
        /// Only this account (default: every account).
        #[arg(long, value_name = "NAME")]
        account: Option<String>,
    },
    /// Every ledger entry of a number, oldest first (exit 3 if none).
    History {
        phone: String,
        #[arg(long = "org", value_name = "ID")]
        organization: Option<String>,
        /// Only this account (default: every account).
        #[arg(long, value_name = "NAME")]
        account: Option<String>,
    },
    /// The most recent stored deliveries.
    Events {
        /// Only the quarantined ones.
        #[arg(long)]
        quarantined: bool,
        #[arg(long, default_value_t = 50)]
        limit: i64,
    },
    /// Parse and apply stored deliveries again (after an upgrade, or once a lead is known).
    Replay {
        /// Every quarantined delivery.
        #[arg(long, conflicts_with = "id", required_unless_present = "id")]
        quarantined: bool,
        /// One delivery, by its outbox id.
        #[arg(long)]
        id: Option<i64>,
    },
    /// Backlog, quarantined deliveries, mirror sizes and the last error.
    Status,
    /// One reconciliation pass now (leads and messages unless one is named).
    Reconcile {
        /// Only this account (default: each account in turn).
        #[arg(long, value_name = "NAME")]
        account: Option<String>,
        /// Organizations to scan (repeatable); default: the configured ones, else all.
        #[arg(long = "org", value_name = "ID")]
        organizations: Vec<String>,
        #[arg(long)]
        leads: bool,
        #[arg(long)]
        messages: bool,
    },
    /// The binary's own commands, here in the list (`demo`, `sandbox`).
    #[command(flatten)]
    Binary(T),
    /// Record a local opt-out and queue it for the service.
    OptOut {
        phone: String,
        #[arg(long = "org", value_name = "ID")]
        organization: String,
        /// The account it is made in (default: the first account).
        #[arg(long, value_name = "NAME")]
        account: Option<String>,
        /// A tag of visibility OPT_OUT the service applies.
        #[arg(long = "tag", value_name = "TAG_ID")]
        tag: Option<String>,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Record an opt-out list from another platform (CSV; numbers normalized to E.164);
    /// a list with an invalid row is refused whole unless --skip-invalid.
    Import(import::ImportArgs),
    /// Record a local opt-in and queue it for the service.
    OptIn {
        phone: String,
        #[arg(long = "org", value_name = "ID")]
        organization: String,
        /// The account it is made in (default: the first account).
        #[arg(long, value_name = "NAME")]
        account: Option<String>,
        #[arg(long)]
        reason: Option<String>,
    },
    /// The evidence bundle of a number (JSON): every ledger entry with its hash and what it
    /// stands on (exit 3 if unknown).
    Evidence {
        phone: String,
        #[arg(long = "org", value_name = "ID")]
        organization: Option<String>,
        /// Only this account's entries (default: every account's).
        #[arg(long, value_name = "NAME")]
        account: Option<String>,
        /// Write here instead of stdout.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Prune stored deliveries past their retention now, printing what goes (counts per
    /// kind); the ledger and quarantined deliveries are never pruned.
    Prune {
        /// Count what would go, remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Reports on the ledger.
    Report {
        #[command(subcommand)]
        command: report::ReportCommand,
    },
    /// The consent ledger's hash chain.
    Ledger {
        #[command(subcommand)]
        command: LedgerCommand,
    },
    /// The configured subscribers: cursor, lag, state and last error.
    Subscribers {
        #[command(subcommand)]
        command: Option<SubscribersCommand>,
    },
    /// The configured destinations (VAN, Action Network): cursor, lag, state, outcomes.
    Destinations {
        #[command(subcommand)]
        command: Option<DestinationsCommand>,
    },
    /// The configured sources (VAN, Action Network read back): state, watermark, counts.
    Sources {
        #[command(subcommand)]
        command: Option<SourcesCommand>,
    },
    /// Callers (who a revocation binds): each, its members, and whether the revoke-all
    /// rule is in force.
    Callers {
        #[command(subcommand)]
        command: Option<CallersCommand>,
    },
    /// Replies put to a person (a revocation word among other words): list them, oldest
    /// first, with the date each is due by, and decide them.
    Review {
        #[command(subcommand)]
        command: Option<ReviewCommand>,
        /// List the decided replies too, after those waiting.
        #[arg(long)]
        all: bool,
    },
    /// Bulk export, streamed (CSV with a header row, or JSON lines).
    Export {
        #[arg(value_enum)]
        dataset: crate::export::Dataset,
        #[arg(long, value_enum, default_value_t = crate::export::Format::Csv)]
        format: crate::export::Format,
        /// Only ledger entries after this seq (consent: records set by such an entry).
        #[arg(long, value_name = "SEQ")]
        since: Option<i64>,
        /// Write here instead of stdout.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Print the completion script of a shell on stdout.
    ///
    /// The Debian package installs those of bash, zsh and fish. Installed otherwise, e.g.:
    /// `outreach-sync completions bash > ~/.local/share/bash-completion/completions/outreach-sync`
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write one manual page per command into DIR (for packages: `man outreach-sync`).
    #[command(hide = true)]
    ManPages {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Check the hash chain: exit 0 with the head, exit 1 naming the first entry that breaks.
    Verify,
}

#[derive(Debug, Subcommand)]
pub enum SubscribersCommand {
    /// Rewind a subscriber: entries from SEQ on are sent again (a disabled one is enabled).
    Replay {
        name: String,
        #[arg(long = "from", value_name = "SEQ")]
        from: i64,
    },
    /// Try the next delivery to a subscriber now instead of at the end of its backoff (the
    /// running daemon's sender notices within a few seconds).
    Retry { name: String },
}

#[derive(Debug, Subcommand)]
pub enum DestinationsCommand {
    /// A destination's entries with their outcome and reason (1,000 at a time).
    Outcomes {
        name: String,
        /// Only these.
        #[arg(long, value_parser = parse_outcome)]
        state: Option<crate::model::OutcomeKind>,
        /// Only entries after this seq (the next page).
        #[arg(long, value_name = "SEQ", default_value_t = 0)]
        after: i64,
    },
    /// Check each destination's key and lookups (exit 1 naming what fails).
    Check { name: Option<String> },
    /// End a destination's error (its key, its lookups) and try its next entry now.
    Retry { name: String },
    /// Rewind a destination: entries from SEQ on that were unmatched, refused or
    /// unconfirmed are tried again (what was sent stays sent).
    Replay {
        name: String,
        #[arg(long = "from", value_name = "SEQ")]
        from: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReviewCommand {
    /// Decide reply ID: an opt-out (recorded as of the reply's receipt, pushed to the
    /// service and every destination) or not.
    Decide {
        id: i64,
        #[arg(
            long,
            conflicts_with = "not_opt_out",
            required_unless_present = "not_opt_out"
        )]
        opt_out: bool,
        #[arg(long)]
        not_opt_out: bool,
        /// Who decides: kept with the decision.
        #[arg(long, value_name = "NAME")]
        by: String,
        /// Why.
        #[arg(long, value_name = "TEXT")]
        reason: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum CallersCommand {
    /// Hold every opt-out of caller NAME recorded so far in each of its members, whatever
    /// its date: for a campaign ready before the rule (recorded once: again records
    /// nothing).
    Apply { name: String },
}

#[derive(Debug, Subcommand)]
pub enum SourcesCommand {
    /// Check each source's key and what its reads need (exit 1 naming what fails).
    Check { name: Option<String> },
    /// Read a source now, once (beside a running daemon: what both read is recorded once).
    Run { name: String },
    /// Read a source again from DATE on (what was recorded stays, and is not recorded
    /// twice); the way on after VAN's 90 days passed a watermark by.
    Resync {
        name: String,
        /// A date (2026-09-01, midnight UTC) or a time in RFC 3339.
        #[arg(long, value_name = "DATE")]
        since: String,
    },
}

fn parse_outcome(word: &str) -> Result<crate::model::OutcomeKind, String> {
    word.parse().map_err(|_| {
        "one of sent, unmatched, refused, already, through_leads, unconfirmed".to_owned()
    })
}

#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Report which signature format the recently refused deliveries use.
    Diagnose,
    /// Make the account hold the two registrations this daemon needs at its URL (signed
    /// with the first of webhook.secrets), then check each with a mock event.
    Register {
        #[command(flatten)]
        target: registrations::TargetArgs,
        /// Say what would change, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Every webhook registration of the account, and whether it targets this daemon.
    List,
    /// Exit 0 when both registrations are right and pass a mock event, else 1 naming what
    /// is missing or failing; the result is kept for `status`.
    Check {
        #[command(flatten)]
        target: registrations::TargetArgs,
    },
    /// Put the first of webhook.secrets on every registration at this daemon's URL, then
    /// check each with a mock event.
    Rotate {
        /// The URL the service calls (default: ingest.public_url).
        #[arg(long, value_name = "URL")]
        target_url: Option<String>,
    },
}

/// A failed command and its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] SettingsError),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    NotFound(String),
    #[error(transparent)]
    Runtime(#[from] anyhow::Error),
}

/// A number given on the command line, as the ledger keeps it (`+1 (555) 000-1111` is
/// `+15550001111`); a usage error (exit 2) saying what is wrong when it is not a number.
fn lookup_number(phone: &str) -> Result<String, CliError> {
    crate::model::phone::canonical(phone).map_err(|e| {
        CliError::Usage(format!(
            "PHONE: {e} (an E.164 number is expected, e.g. +15551234567)"
        ))
    })
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Runtime(_) => 1,
            CliError::Config(_) | CliError::Usage(_) => 2,
            CliError::NotFound(_) => 3,
        }
    }
}

/// Parses the command line, runs the command (the binary's own with `binary`), and maps its
/// outcome to an exit code.
pub fn main<T: Subcommand>(binary: impl AsyncFnOnce(T) -> anyhow::Result<()>) -> ExitCode {
    let cli = Cli::<T>::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the runtime: {error}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli, binary)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", chain(&error));
            ExitCode::from(error.exit_code())
        }
    }
}

fn chain(error: &CliError) -> String {
    match error {
        CliError::Runtime(e) => format!("{e:#}"),
        other => other.to_string(),
    }
}

/// The configuration of a command that opens the database: one naming a backend
/// (`sqlite://` or `postgres://`), or an error naming `database.url`.
fn load_for_database(config: Option<&std::path::Path>) -> Result<Settings, CliError> {
    let settings = Settings::load(config)?;
    settings.backend()?;
    Ok(settings)
}

/// [`load_for_database`] for commands that never see a webhook: `[webhook]` may be unset.
fn load_for_reading(config: Option<&std::path::Path>) -> Result<Settings, CliError> {
    let settings = Settings::load_without_webhook(config)?;
    settings.validate_scopes()?;
    settings.backend()?;
    Ok(settings)
}

/// Opens the configured database for a command, applying migrations so a fresh one works
/// too.
async fn open(settings: &Settings) -> Result<crate::store::Pool, CliError> {
    Ok(crate::store::open(settings)
        .await
        .map_err(anyhow::Error::from)?)
}

/// Runs one parsed command (the binary's own with `binary`; its failure is a runtime one).
pub async fn run<T: Subcommand>(
    cli: Cli<T>,
    binary: impl AsyncFnOnce(T) -> anyhow::Result<()>,
) -> Result<(), CliError> {
    let config = cli.config.as_deref();
    match cli.command {
        Command::Serve => daemon::serve(load_for_database(config)?, config).await,
        Command::Migrate { from } => {
            daemon::migrate(Settings::load_without_webhook(config)?, from).await
        }
        Command::CheckConfig => {
            let settings = Settings::load(config)?;
            settings.validate_scopes()?;
            daemon::check_config(settings, cli.json)
        }
        Command::Sign { secret } => webhooks::sign_stdin(config, secret, cli.json),
        Command::Webhooks {
            command: WebhooksCommand::Diagnose,
            account,
        } => webhooks::diagnose_rejected(load_for_database(config)?, account, cli.json).await,
        Command::Webhooks { command, account } => {
            registrations::run(command, config, account.as_deref(), cli.json).await
        }
        Command::Binary(command) => Ok(binary(command).await?),
        Command::Completions { shell } => packaging::completions::<T>(shell),
        Command::ManPages { dir } => packaging::man_pages::<T>(&dir),
        Command::Report { command } => {
            report::run(&load_for_reading(config)?, command, cli.json).await
        }
        command => on_ledger::run(command, &load_for_reading(config)?, cli.json).await,
    }
}
