//! `import FILE`: an opt-out list from another platform recorded in the ledger.

use std::io::Read;
use std::path::PathBuf;

use super::CliError;
use crate::apply::imported::Scope;
use crate::import::{self, ImportError, ListOptions, Report, Request};
use crate::model::phone::Region;
use crate::settings::Settings;

/// Invalid rows named on the terminal; `--json` names them all.
const SHOWN_INVALID: usize = 20;

/// The `import` command's arguments.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The list: CSV with or without a header row (`-` reads standard input).
    pub file: PathBuf,
    /// Record the opt-outs in this organization (repeatable).
    #[arg(long = "org", value_name = "ID", required_unless_present = "account")]
    pub organizations: Vec<String>,
    /// Opt the numbers out for the whole account: every organization, and every lead that
    /// appears with one of them later (suppressed).
    #[arg(long, conflicts_with = "organizations")]
    pub account: bool,
    /// The header of the column holding the numbers (found by name or content otherwise).
    #[arg(long, value_name = "NAME")]
    pub phone_column: Option<String>,
    /// Where national formats are read, as an ISO 3166 code.
    #[arg(long, value_name = "CC", default_value = "US")]
    pub region: String,
    /// Kept with every entry.
    #[arg(long)]
    pub reason: Option<String>,
    /// Record the valid rows of a list that has invalid ones.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Say what would be recorded, and record nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The account of the service it is recorded in (default: the first account; its
    /// `--account` is the scope: the whole account).
    #[arg(long, value_name = "NAME")]
    pub account_id: Option<String>,
}

pub async fn run(settings: &Settings, args: ImportArgs, json: bool) -> Result<(), CliError> {
    let region: Region = args
        .region
        .parse()
        .map_err(|e| CliError::Usage(format!("--region: {e}")))?;
    let name = args.file.display().to_string();
    let input: Box<dyn Read + Send> = if name == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(&args.file)
                .map_err(|e| CliError::Usage(format!("cannot open {name}: {e}")))?,
        )
    };
    let request = Request {
        account: super::accounts::one_account(settings, args.account_id.as_deref())?,
        scope: if args.account {
            Scope::Account
        } else {
            Scope::Organizations(args.organizations)
        },
        options: ListOptions {
            phone_column: args.phone_column,
            region,
        },
        file: name,
        actor: super::consent::cli_actor(),
        reason: args.reason,
        skip_invalid: args.skip_invalid,
        dry_run: args.dry_run,
        outside_the_daemon: true,
    };
    // The import's start and end are logged (standard error), as the daemon logs those of
    // the API and the console.
    crate::telemetry::init(&settings.log);
    let pool = super::open(settings).await?;
    match import::import(&pool, input, &request).await {
        Ok(report) => {
            print(&request, &report, json)?;
            Ok(())
        }
        Err(ImportError::Refused(report)) => {
            let message = ImportError::Refused(report.clone()).to_string();
            if json {
                let refusal = report.refusal(message.clone());
                let text = serde_json::to_string_pretty(&refusal).map_err(anyhow::Error::from)?;
                println!("{text}");
            } else {
                print_invalid(&report);
            }
            Err(CliError::Usage(message))
        }
        Err(error @ ImportError::Aborted { .. }) => Err(CliError::Runtime(error.into())),
        Err(error) => Err(CliError::Usage(error.to_string())),
    }
}

fn print_json(report: &Report) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(report).map_err(anyhow::Error::from)?;
    println!("{text}");
    Ok(())
}

fn print_invalid(report: &Report) {
    for row in report.invalid_rows.iter().take(SHOWN_INVALID) {
        eprintln!("line {}: {:?}: {}", row.line, row.value, row.reason);
    }
    let more = report.invalid.saturating_sub(SHOWN_INVALID as u64);
    if more > 0 {
        eprintln!("… and {more} more invalid rows (--json lists them all)");
    }
}

fn print(request: &Request, report: &Report, json: bool) -> Result<(), CliError> {
    if json {
        return print_json(report);
    }
    if report.invalid > 0 {
        print_invalid(report);
    }
    println!(
        "{} (sha256 {}): {} rows, {} valid, {} invalid (skipped), {} repeated in the file",
        request.file,
        report.sha256,
        report.rows,
        report.valid,
        report.invalid,
        report.duplicates_in_file
    );
    let verb = if report.dry_run {
        "would record"
    } else {
        "recorded"
    };
    let scope = match &request.scope {
        Scope::Account => "the whole account".to_owned(),
        Scope::Organizations(orgs) => orgs.join(", "),
    };
    println!(
        "{verb} {} opt-outs in {scope}; {} already opted out; {} numbers newly suppressed; {} queued for the service",
        report.recorded, report.already_opted_out, report.suppressed, report.pushes
    );
    if report.dry_run {
        println!("dry run: nothing was recorded");
    }
    Ok(())
}
