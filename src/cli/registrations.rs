//! `webhooks register`, `list`, `check` and `rotate`: the account's webhook registrations
//! for this daemon, through the v3 API whatever `service.api_version` says (registrations
//! exist in v3 only).
//!
//! What the service gives (ids, target URLs, organization ids, the account id) is printed
//! through [`Escaped`]: a control character in it shows as an escape and cannot rewrite
//! the terminal. `--json` output is escaped by the JSON encoder.

use serde_json::{Value, json};

use super::output::print_json;
use super::{CliError, WebhooksCommand};
use crate::client::ServiceClient;
use crate::client::models::{WebhookConfig, WebhookRegistration};
use crate::model::text::Escaped;
use crate::model::{RegistrationCheck, Timestamp};
use crate::registrations::{self, Applied, Change, CheckReport, Mocked, Planned, Target};
use crate::settings::{Account, ApiVersion, Settings};
use crate::store::Pool;

/// Where the registrations point and which leads they cover.
#[derive(Debug, Clone, clap::Args)]
pub struct TargetArgs {
    /// The URL the service calls (default: ingest.public_url).
    #[arg(long, value_name = "URL")]
    pub target_url: Option<String>,
    /// Only this organization's leads (repeatable); default: the whole account.
    #[arg(long = "organization", value_name = "ID")]
    pub organizations: Vec<String>,
}

/// Runs one of the four commands.
/// Runs one of the four commands for the account `account`, or for each account in turn
/// (all of them, even after one fails: the first failure is the outcome).
pub async fn run(
    command: WebhooksCommand,
    config: Option<&std::path::Path>,
    account: Option<&str>,
    json: bool,
) -> Result<(), CliError> {
    let settings = match command {
        WebhooksCommand::List => super::load_for_reading(config)?,
        _ => super::load_for_database(config)?,
    };
    let accounts = super::accounts_of(&settings, account)?;
    let several = accounts.len() > 1;
    let mut outcome = Ok(());
    for account in &accounts {
        if several && !json {
            println!("account {}:", account.id);
        }
        let done = run_for(&command, (&settings, account), json).await;
        if outcome.is_ok() {
            outcome = done;
        } else if let Err(error) = done {
            eprintln!("error: {error}");
        }
    }
    outcome
}

/// The settings (for the database) and the account a command is about.
type Of<'a> = (&'a Settings, &'a Account);

/// One of the four commands for `account`.
async fn run_for(command: &WebhooksCommand, of: Of<'_>, json: bool) -> Result<(), CliError> {
    match command {
        WebhooksCommand::Register { target, dry_run } => register(of, target, *dry_run, json).await,
        WebhooksCommand::List => list(of, json).await,
        WebhooksCommand::Check { target } => check(of, target, json).await,
        WebhooksCommand::Rotate { target_url } => rotate(of, target_url.clone(), json).await,
        WebhooksCommand::Diagnose => Err(CliError::Usage(
            "webhooks diagnose reads refused deliveries, not registrations".into(),
        )),
    }
}

fn target(account: &Account, args: &TargetArgs) -> Result<Target, CliError> {
    Target::of(account, args.target_url.as_deref(), &args.organizations)
        .map_err(|e| CliError::Usage(e.to_string()))
}

/// The database (the token guard, the kept check) and a v3 client of the service.
async fn connect((settings, account): Of<'_>) -> Result<(Pool, ServiceClient), CliError> {
    let pool = super::open(settings).await?;
    let mut v3 = account.clone();
    v3.service.api_version = ApiVersion::V3;
    let client = crate::upstream::service_client(&v3, &pool, Default::default())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    Ok((pool, client))
}

fn runtime(error: impl Into<anyhow::Error>) -> CliError {
    CliError::Runtime(error.into())
}

async fn register(
    of: Of<'_>,
    args: &TargetArgs,
    dry_run: bool,
    json: bool,
) -> Result<(), CliError> {
    let account = of.1;
    let target = target(account, args)?;
    let (pool, client) = connect(of).await?;
    if dry_run {
        let existing = registrations::all(&client).await.map_err(runtime)?;
        return print_dry_run(&target, &registrations::plan(&existing, &target), json);
    }
    let registrations::Registered {
        applied,
        check: report,
    } = registrations::register(&client, &target)
        .await
        .map_err(runtime)?;
    registrations::record_in(&pool, &account.id, &report.result).await?;
    let ownership = account
        .webhook
        .confirmation_header
        .is_empty()
        .then_some(report.account_id.as_deref())
        .flatten();
    if json {
        let changes: Vec<Value> = applied.iter().map(applied_json).collect();
        print_json(&json!({
            "targetUrl": target.url,
            "scope": target.scope,
            "dryRun": false,
            "changes": changes,
            "check": check_json(&report),
            "accountId": report.account_id,
            "configToAdd": ownership.map(config_lines),
        }))?;
    } else {
        println!(
            "webhook registrations for {} (scope {}):",
            Escaped(&target.url),
            Escaped(&registrations::describe_scope(&target.scope))
        );
        for step in &applied {
            let (kind, change) = (step.planned.kind.as_str(), &step.planned.change);
            println!(
                "  {kind:<17} {:<12} {}",
                Escaped(&step.id),
                Escaped(&done(change))
            );
        }
        print_mocked(&report.mocked);
        print_problems(&report);
        if let Some(account_id) = ownership {
            print_ownership(account_id);
        }
    }
    outcome(&report)
}

/// What was done to a registration, in a word or a few.
fn done(change: &Change) -> String {
    match change {
        Change::Unchanged { .. } => "unchanged".into(),
        Change::Create => "created".into(),
        Change::Update { config, secret, .. } => {
            let mut what = config.clone();
            if *secret {
                what.push("it had no signing secret".into());
            }
            format!("updated ({})", what.join("; "))
        }
        Change::Remove { kept, .. } => format!("removed (a second one beside {kept})"),
    }
}

fn action(change: &Change) -> &'static str {
    match change {
        Change::Unchanged { .. } => "unchanged",
        Change::Create => "create",
        Change::Update { .. } => "update",
        Change::Remove { .. } => "remove",
    }
}

fn applied_json(step: &Applied) -> Value {
    json!({
        "configType": step.planned.kind.as_str(),
        "id": step.id,
        "action": action(&step.planned.change),
        "done": done(&step.planned.change),
    })
}

fn print_dry_run(target: &Target, planned: &[Planned], json: bool) -> Result<(), CliError> {
    let would = |p: &Planned| match &p.change {
        Change::Unchanged { .. } => "leave it unchanged".to_owned(),
        Change::Create => "create it, signed with the first of webhook.secrets".to_owned(),
        other => format!("{} it: {}", action(other), done(other)),
    };
    let id = |p: &Planned| match &p.change {
        Change::Unchanged { id } | Change::Update { id, .. } | Change::Remove { id, .. } => {
            Some(id.clone())
        }
        Change::Create => None,
    };
    if json {
        let changes: Vec<Value> = planned
            .iter()
            .map(|p| json!({"configType": p.kind.as_str(), "id": id(p), "action": action(&p.change), "would": would(p)}))
            .collect();
        return print_json(&json!({
            "targetUrl": target.url, "scope": target.scope, "dryRun": true, "changes": changes,
        }));
    }
    println!(
        "dry run: nothing changes at the service. For {} (scope {}) register would:",
        Escaped(&target.url),
        Escaped(&registrations::describe_scope(&target.scope))
    );
    for p in planned {
        let id = id(p).unwrap_or_else(|| "(new)".into());
        println!(
            "  {:<17} {:<12} {}",
            p.kind.as_str(),
            Escaped(&id),
            Escaped(&would(p))
        );
    }
    println!("No mock event is sent in a dry run.");
    Ok(())
}

async fn check(of: Of<'_>, args: &TargetArgs, json: bool) -> Result<(), CliError> {
    let account = of.1;
    let target = target(account, args)?;
    let (pool, client) = connect(of).await?;
    let report = match registrations::check(&client, &target).await {
        Ok(report) => report,
        Err(error) => {
            // A check that cannot ask the service fails too: `status` and the metric say so.
            let failed = RegistrationCheck {
                checked_at: Timestamp::now(),
                ok: false,
                problems: vec![format!("the service could not be asked: {error}")],
                target_url: target.url.clone(),
            };
            registrations::record_in(&pool, &account.id, &failed).await?;
            return Err(runtime(error));
        }
    };
    registrations::record_in(&pool, &account.id, &report.result).await?;
    if json {
        print_json(&check_json(&report))?;
    } else {
        println!(
            "webhook registrations for {}, checked at {}:",
            Escaped(&report.result.target_url),
            report.result.checked_at
        );
        print_mocked(&report.mocked);
        print_problems(&report);
        if report.result.ok {
            println!("ok");
        }
    }
    outcome(&report)
}

fn check_json(report: &CheckReport) -> Value {
    let mut value = serde_json::to_value(&report.result).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert(
            "mockEvents".into(),
            report.mocked.iter().map(mocked_json).collect(),
        );
        map.insert("accountId".into(), json!(report.account_id));
    }
    value
}

fn mocked_json(m: &Mocked) -> Value {
    json!({"configType": m.kind.as_str(), "id": m.id, "willPassValidation": m.will_pass_validation})
}

fn print_mocked(mocked: &[Mocked]) {
    for m in mocked {
        println!(
            "  {:<17} {:<12} mock event: willPassValidation {}",
            m.kind.as_str(),
            Escaped(&m.id),
            m.will_pass_validation
        );
    }
}

fn print_problems(report: &CheckReport) {
    if !report.result.problems.is_empty() {
        println!("problems:");
        for problem in &report.result.problems {
            println!("  - {}", Escaped(problem));
        }
    }
}

/// The two `[webhook]` lines that make every ingest response confirm ownership (the
/// account id as a TOML string, so whatever the service sent stays inside its quotes).
fn config_lines(account_id: &str) -> String {
    let value = toml::Value::String(account_id.to_owned());
    format!(
        "confirmation_header = \"NAME\"   # the ownership confirmation header, as the service names it\naccount_id = {value}"
    )
}

fn print_ownership(account_id: &str) {
    println!(
        "\nownership: the service's accountId is {}. Where the service asks the target to \
         confirm ownership, add to [webhook] (then restart the daemon):",
        Escaped(account_id)
    );
    for line in config_lines(account_id).lines() {
        println!("  {}", Escaped(line));
    }
}

/// Exit 0 when the check passed, else 1 saying so.
fn outcome(report: &CheckReport) -> Result<(), CliError> {
    if report.result.ok {
        return Ok(());
    }
    Err(runtime(anyhow::anyhow!(
        "the webhook registrations for {} are not right: {} problem(s)",
        report.result.target_url,
        report.result.problems.len()
    )))
}

async fn list(of: Of<'_>, json: bool) -> Result<(), CliError> {
    let (_pool, client) = connect(of).await?;
    let public_url = &of.1.public_url;
    let all = registrations::all(&client).await.map_err(runtime)?;
    let ours =
        |r: &WebhookRegistration| !public_url.is_empty() && registrations::targets(r, public_url);
    if json {
        let items: Vec<Value> = all.iter().map(|r| listed_json(r, ours(r))).collect();
        return print_json(&json!({ "items": items }));
    }
    if public_url.is_empty() {
        eprintln!("ingest.public_url is not set: no registration is marked as this daemon's");
    }
    if all.is_empty() {
        println!("no webhook registration");
    }
    for r in &all {
        let mut columns = vec![
            format!("{:<12} {:<17}", Escaped(&r.id), r.config.kind().as_str()),
            Escaped(&r.target_url).to_string(),
            format!(
                "scope {}",
                Escaped(&registrations::describe_scope(r.config.scope()))
            ),
        ];
        if let WebhookConfig::ConsentUpdate {
            include_opt_out,
            include_opt_in,
            ..
        } = &r.config
        {
            columns.push(format!(
                "includeOptOut={include_opt_out} includeOptIn={include_opt_in}"
            ));
        }
        if !r.secret_for_hmac {
            columns.push("no secret".into());
        }
        if ours(r) {
            columns.push("ours".into());
        }
        println!("{}", columns.join("  "));
    }
    Ok(())
}

fn listed_json(r: &WebhookRegistration, ours: bool) -> Value {
    let (opt_out, opt_in) = match &r.config {
        WebhookConfig::ConsentUpdate {
            include_opt_out,
            include_opt_in,
            ..
        } => (Some(*include_opt_out), Some(*include_opt_in)),
        WebhookConfig::MessageStatus { .. } => (None, None),
    };
    json!({
        "id": r.id,
        "configType": r.config.kind().as_str(),
        "targetUrl": r.target_url,
        "scope": r.config.scope(),
        "includeOptOut": opt_out,
        "includeOptIn": opt_in,
        "secretForHMAC": r.secret_for_hmac,
        "ours": ours,
    })
}

async fn rotate(of: Of<'_>, target_url: Option<String>, json: bool) -> Result<(), CliError> {
    let target =
        Target::of(of.1, target_url.as_deref(), &[]).map_err(|e| CliError::Usage(e.to_string()))?;
    let (_pool, client) = connect(of).await?;
    let mocked = registrations::rotate(&client, &target)
        .await
        .map_err(runtime)?;
    if json {
        let items: Vec<Value> = mocked.iter().map(mocked_json).collect();
        print_json(&json!({"targetUrl": target.url, "items": items}))?;
    } else {
        println!(
            "the first of webhook.secrets put on every registration for {}:",
            Escaped(&target.url)
        );
        print_mocked(&mocked);
    }
    if mocked.is_empty() {
        return Err(runtime(anyhow::anyhow!(
            "no registration targets {}: run `outreach-sync webhooks register` first",
            target.url
        )));
    }
    let failing = mocked.iter().filter(|m| !m.will_pass_validation).count();
    if failing > 0 {
        return Err(runtime(anyhow::anyhow!(
            "{failing} registration(s) fail their mock event with the new secret: the running daemon must accept it first (in webhook.secrets, then reloaded)"
        )));
    }
    Ok(())
}
