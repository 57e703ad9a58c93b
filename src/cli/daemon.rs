//! `serve`, `migrate` and `check-config`.

use super::CliError;
use crate::settings::{Account, Backend, Settings, redacted_url};
use crate::{app, telemetry};

/// For tests only, and only in debug builds (the release binary has no such hook): when
/// this variable is set, `serve` runs one more task, which panics at once, so a test can
/// watch the real process stop and exit non-zero. Single underscore: it is not a
/// configuration override.
#[cfg(debug_assertions)]
pub const PANIC_FOR_TESTS: &str = "OUTREACH_SYNC_TEST_PANIC";

/// The daemon, until SIGTERM or SIGINT; on SIGHUP it reloads its webhook secrets and admin
/// tokens from `config` (as given on the command line).
pub async fn serve(settings: Settings, config: Option<&std::path::Path>) -> Result<(), CliError> {
    telemetry::init(&settings.log);
    let application = app::Application::build(settings)
        .await?
        .reload_on_hangup(config.map(std::path::Path::to_owned));
    #[cfg(debug_assertions)]
    let application = with_test_panic(application);
    application
        .run_until_stopped(app::shutdown_on_signals())
        .await?;
    Ok(())
}

/// The daemon with one more task that panics at once, when [`PANIC_FOR_TESTS`] is set.
#[cfg(debug_assertions)]
fn with_test_panic(mut application: app::Application) -> app::Application {
    if std::env::var_os(PANIC_FOR_TESTS).is_some() {
        application.supervise("test-panic", |_| async {
            panic!("{PANIC_FOR_TESTS} is set: a task panics, as asked");
        });
    }
    application
}

pub async fn migrate(settings: Settings, from: Option<String>) -> Result<(), CliError> {
    match (settings.backend()?, from) {
        (Backend::Sqlite(path), None) => {
            let pool = crate::store::pool(&settings)
                .await
                .map_err(anyhow::Error::from)?;
            crate::store::migrate(&pool)
                .await
                .map_err(anyhow::Error::from)?;
            println!("migrations applied to {}", path.display());
        }
        (Backend::Sqlite(_), Some(_)) => {
            return Err(CliError::Usage(
                "migrate --from copies into PostgreSQL: set database.url to a postgres:// URL"
                    .into(),
            ));
        }
        (Backend::Postgres, from) => {
            let target = redacted_url(&settings.database.url);
            crate::store::migrate_postgres(&settings)
                .await
                .map_err(anyhow::Error::from)?;
            println!("migrations applied to {target}");
            if let Some(from) = from {
                copy_from_sqlite(&settings, &from, &target).await?;
            }
        }
    }
    Ok(())
}

/// `migrate --from sqlite://OLD` into the configured PostgreSQL database.
async fn copy_from_sqlite(settings: &Settings, from: &str, target: &str) -> Result<(), CliError> {
    let mut source = settings.clone();
    source.database.url = from.to_owned();
    let path = match source.backend() {
        Ok(Backend::Sqlite(path)) if path.exists() => path,
        Ok(Backend::Sqlite(path)) => {
            return Err(CliError::Usage(format!(
                "--from: {} does not exist",
                path.display()
            )));
        }
        _ => return Err(CliError::Usage("--from takes a sqlite:// URL".into())),
    };
    let pool = crate::store::pool(&source)
        .await
        .map_err(anyhow::Error::from)?;
    crate::store::migrate(&pool)
        .await
        .map_err(anyhow::Error::from)?;
    let mut conn = crate::store::postgres_connection(settings)
        .await
        .map_err(anyhow::Error::from)?;
    let copied = crate::store::copy::sqlite_to_postgres(&pool, &mut conn)
        .await
        .map_err(anyhow::Error::from)?;
    pool.close().await;
    println!("copied {} into {target}:", path.display());
    for (table, rows) in copied {
        println!("  {table:<24} {rows}");
    }
    Ok(())
}

pub fn check_config(settings: Settings, json: bool) -> Result<(), CliError> {
    if json {
        let value = serde_json::to_value(&settings).map_err(anyhow::Error::from)?;
        println!("{value:#}");
    } else {
        print!("{}", settings.redacted_toml());
    }
    Ok(())
}

/// One pass of each of `accounts`, in turn.
pub async fn reconcile_each(
    settings: &Settings,
    accounts: Vec<Account>,
    request: &crate::reconcile::PassRequest,
    json: bool,
) -> Result<(), CliError> {
    for account in &accounts {
        reconcile(settings, account, request, json).await?;
    }
    Ok(())
}

/// One pass of `account`.
pub async fn reconcile(
    settings: &Settings,
    account: &Account,
    request: &crate::reconcile::PassRequest,
    json: bool,
) -> Result<(), CliError> {
    telemetry::init(&settings.log);
    let pool = super::open(settings).await?;
    let client = crate::upstream::service_client(account, &pool, Default::default())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let reconciler = crate::reconcile::Reconciler::new(pool, client, &settings.reconcile)
        .with_lease(settings.replica.lease())
        .with_account(account);
    let shutdown = app::shutdown_on_signals();
    let summary = reconciler
        .run_pass(request, &shutdown)
        .await
        .map_err(anyhow::Error::from)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&summary).map_err(anyhow::Error::from)?
        );
    } else {
        println!(
            "pass {}: {} organizations, {} leads scanned ({} new), {} differences repaired, {} suppressed leads opted out, {} messages checked, {} refreshed, {} errors, {} ms{}",
            summary.id,
            summary.organizations.len(),
            summary.leads_scanned,
            summary.leads_new,
            summary.repaired,
            summary.suppressed,
            summary.messages_checked,
            summary.messages_refreshed,
            summary.errors.len(),
            summary.duration_ms,
            if summary.interrupted {
                " (interrupted; the next pass resumes)"
            } else {
                ""
            }
        );
        if let Some(reason) = &summary.messages_skipped {
            println!("  messages not checked: {reason}");
        }
        for error in &summary.errors {
            println!("  error: {error}");
        }
    }
    if summary.errors.is_empty() {
        Ok(())
    } else {
        Err(CliError::Runtime(anyhow::anyhow!(
            "{} errors during the pass",
            summary.errors.len()
        )))
    }
}
