//! `serve`, `migrate` and `check-config`.

use super::CliError;
use crate::settings::Settings;
use crate::{app, db, telemetry};

pub async fn serve(settings: Settings) -> Result<(), CliError> {
    telemetry::init(&settings.log);
    let application = app::Application::build(settings).await?;
    application
        .run_until_stopped(app::shutdown_on_signals())
        .await?;
    Ok(())
}

pub async fn migrate(settings: Settings) -> Result<(), CliError> {
    let pool = db::pool(&settings).await.map_err(anyhow::Error::from)?;
    db::migrate(&pool).await.map_err(anyhow::Error::from)?;
    println!(
        "migrations applied to {}",
        settings.database_path()?.display()
    );
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
