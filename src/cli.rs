//! The command line: parsing, exit codes, and one function per subcommand.

use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use secrecy::{ExposeSecret, SecretString};

use crate::settings::{Settings, SettingsError};
use crate::signature::diagnose::{Finding, config_snippet, diagnose};
use crate::signature::{Key, SignatureFormat, sign};
use crate::{app, db, telemetry};

/// outreach-sync: the outreach messaging service's consent ledger, kept durable and correct.
#[derive(Debug, Parser)]
#[command(name = "outreach-sync", version, about)]
pub struct Cli {
    /// Configuration file (default: /etc/outreach-sync/config.toml if it exists).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon until SIGTERM or SIGINT.
    Serve,
    /// Apply database migrations and exit.
    Migrate,
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
        #[command(subcommand)]
        command: WebhooksCommand,
    },
    /// Run the built-in simulated service.
    Sandbox(crate::sandbox::cli::SandboxArgs),
}

#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Report which signature format the recently refused deliveries use.
    Diagnose,
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

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Runtime(_) => 1,
            CliError::Config(_) | CliError::Usage(_) => 2,
            CliError::NotFound(_) => 3,
        }
    }
}

/// Parses the command line, runs the command, and maps its outcome to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
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
    match runtime.block_on(run(cli)) {
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

/// Runs one parsed command.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    let config = cli.config.as_deref();
    match cli.command {
        Command::Serve => serve(Settings::load(config)?).await,
        Command::Migrate => migrate(Settings::load(config)?).await,
        Command::CheckConfig => check_config(Settings::load(config)?, cli.json),
        Command::Sign { secret } => sign_stdin(config, secret, cli.json),
        Command::Webhooks {
            command: WebhooksCommand::Diagnose,
        } => diagnose_rejected(Settings::load(config)?, cli.json).await,
        Command::Sandbox(args) => Ok(crate::sandbox::cli::run(args).await?),
    }
}

async fn serve(settings: Settings) -> Result<(), CliError> {
    telemetry::init(&settings.log);
    let application = app::Application::build(settings).await?;
    application
        .run_until_stopped(app::shutdown_on_signals())
        .await?;
    Ok(())
}

async fn migrate(settings: Settings) -> Result<(), CliError> {
    let pool = db::pool(&settings).await.map_err(anyhow::Error::from)?;
    db::migrate(&pool).await.map_err(anyhow::Error::from)?;
    println!(
        "migrations applied to {}",
        settings.database_path()?.display()
    );
    Ok(())
}

fn check_config(settings: Settings, json: bool) -> Result<(), CliError> {
    if json {
        let value = serde_json::to_value(&settings).map_err(anyhow::Error::from)?;
        println!("{value:#}");
    } else {
        print!("{}", settings.redacted_toml());
    }
    Ok(())
}

fn sign_stdin(
    config: Option<&std::path::Path>,
    secret: Option<String>,
    json: bool,
) -> Result<(), CliError> {
    let settings = match secret {
        Some(secret) => {
            // A secret on the command line stands in for the configured ones.
            let mut env: Vec<(String, String)> = std::env::vars().collect();
            env.retain(|(k, _)| k != "OUTREACH_SYNC__WEBHOOK__SECRETS");
            let mut settings = Settings::load_unvalidated(config, &env)?;
            settings.webhook.secrets = vec![SecretString::from(secret)];
            settings.webhook.secrets_file = None;
            settings.validate()?;
            settings
        }
        None => Settings::load(config)?,
    };
    let mut body = Vec::new();
    std::io::stdin()
        .read_to_end(&mut body)
        .map_err(|e| anyhow::anyhow!("reading the body from stdin: {e}"))?;
    let first = settings.webhook.secrets.first().ok_or_else(|| {
        CliError::Usage("no secret: give --secret or configure webhook.secrets".into())
    })?;
    let key = Key::for_scheme(settings.webhook.scheme, first.expose_secret()).ok_or_else(|| {
        CliError::Usage("the secret does not decode under the configured scheme".into())
    })?;
    let format = SignatureFormat::from(&settings.webhook);
    let headers = sign(&format, &key, &body, chrono::Utc::now().timestamp(), None);
    let mut out = std::io::stdout().lock();
    if json {
        let map: serde_json::Map<String, serde_json::Value> = headers
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect();
        let _ = writeln!(out, "{}", serde_json::Value::Object(map));
    } else {
        for (name, value) in headers {
            let _ = writeln!(out, "{name}: {value}");
        }
    }
    Ok(())
}

async fn diagnose_rejected(settings: Settings, json: bool) -> Result<(), CliError> {
    let pool = db::pool(&settings).await.map_err(anyhow::Error::from)?;
    db::migrate(&pool).await.map_err(anyhow::Error::from)?;
    let rows: Vec<(i64, String, String, String, Vec<u8>)> = sqlx::query_as(
        "SELECT id, received_at, reason, headers, body FROM rejected_deliveries ORDER BY id DESC",
    )
    .fetch_all(&pool)
    .await
    .map_err(anyhow::Error::from)?;
    let mut tally: std::collections::BTreeMap<Finding, usize> = Default::default();
    let mut unmatched = Vec::new();
    for (id, received_at, reason, headers, body) in &rows {
        let headers: Vec<(String, String)> = serde_json::from_str(headers).unwrap_or_default();
        let findings = diagnose(&headers, body, &settings.webhook.secrets);
        if findings.is_empty() {
            unmatched.push((id, received_at, reason));
        }
        for finding in findings {
            *tally.entry(finding).or_default() += 1;
        }
    }
    if json {
        let formats: Vec<serde_json::Value> = tally
            .iter()
            .map(|(f, n)| {
                serde_json::json!({
                    "deliveries": n, "scheme": f.scheme, "header": f.header,
                    "algorithm": f.algorithm, "encoding": f.encoding, "prefix": f.prefix,
                    "timestampHeader": f.timestamp_header, "secretIndex": f.secret_index,
                    "config": config_snippet(f),
                })
            })
            .collect();
        let value = serde_json::json!({
            "examined": rows.len(),
            "unmatched": unmatched.len(),
            "formats": formats,
        });
        println!("{value:#}");
        return Ok(());
    }
    println!(
        "{} refused deliveries examined (the most recent kept).",
        rows.len()
    );
    if rows.is_empty() {
        println!("Nothing to diagnose: no delivery has failed verification.");
        return Ok(());
    }
    for (finding, n) in &tally {
        println!("\n{n} of them verify with this configuration:\n");
        print!("{}", config_snippet(finding));
    }
    if !unmatched.is_empty() {
        println!(
            "\n{} match no configured secret under any known format; check webhook.secrets.",
            unmatched.len()
        );
        for (id, received_at, reason) in unmatched.iter().take(5) {
            println!("  #{id} at {received_at}: {reason}");
        }
    }
    Ok(())
}
