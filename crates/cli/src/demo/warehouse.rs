//! `demo --warehouse postgres://...`: the ledger mirrored into a local PostgreSQL
//! warehouse while the demo runs, and its rows counted at the end. The URL is a secret like
//! any warehouse's: kept in a file of its own, never printed.

use std::time::Duration;

use outreach_sync::settings::kinds::postgres::PostgresSettings;
use outreach_sync::settings::{DestinationSettings, Settings, SystemSettings};
use secrecy::ExposeSecret as _;
use sqlx::Connection as _;

/// The warehouse's destination name and table in the demo.
pub(super) const NAME: &str = "warehouse";
const TABLE: &str = "outreach_sync_demo";
/// Longest wait for the warehouse to answer before the demo goes without it.
const REACH_WITHIN: Duration = Duration::from_secs(5);

/// The warehouse destination at `url` when it answers, else why not (the demo runs on).
pub(super) async fn reachable(url: &str) -> Result<DestinationSettings, String> {
    let connected = tokio::time::timeout(REACH_WITHIN, sqlx::PgConnection::connect(url)).await;
    match connected {
        Ok(Ok(mut connection)) => {
            // The demo's own table, made anew: a ledger of this run's seqs.
            for drop in [
                format!("DROP VIEW IF EXISTS \"{TABLE}_current\""),
                format!("DROP TABLE IF EXISTS \"{TABLE}\""),
            ] {
                if let Err(error) = sqlx::query(&drop).execute(&mut connection).await {
                    return Err(unreached(&error));
                }
            }
            let _ = connection.close().await;
        }
        Ok(Err(error)) => return Err(unreached(&error)),
        Err(_) => return Err("no answer within 5 s".to_owned()),
    }
    let system = SystemSettings::Postgres(PostgresSettings::of_table(TABLE, 500));
    let mut warehouse = DestinationSettings::new(NAME, system, "", url);
    warehouse.requests_per_second = Some(200);
    Ok(warehouse)
}

/// Why a connection failed, without the URL.
fn unreached(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Database(db) => db.message().to_owned(),
        sqlx::Error::Io(io) => io.to_string(),
        sqlx::Error::Configuration(_) => "not a PostgreSQL connection URL".to_owned(),
        _ => "cannot connect".to_owned(),
    }
}

/// The warehouse's last line: its rows, the ledger's entries, and the numbers its view
/// shows opted out.
pub(super) async fn print(settings: &Settings) {
    let Some(warehouse) = settings.destination.iter().find(|d| d.name == NAME) else {
        return;
    };
    let Some(url) = warehouse.api_key.as_ref() else {
        return;
    };
    let counted = async {
        let mut connection = sqlx::PgConnection::connect(url.expose_secret()).await?;
        let rows: i64 = sqlx::query_scalar(&format!("SELECT COUNT(*) FROM \"{TABLE}\""))
            .fetch_one(&mut connection)
            .await?;
        let opted_out: i64 = sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM \"{TABLE}_current\" WHERE \"optedOut\""
        ))
        .fetch_one(&mut connection)
        .await?;
        let _ = connection.close().await;
        Ok::<_, sqlx::Error>((rows, opted_out))
    };
    let entries = match outreach_sync::store::open(settings).await {
        Ok(pool) => {
            let head = outreach_sync::store::SubscriberStore::ledger_head(&pool)
                .await
                .unwrap_or(0);
            let view = outreach_sync::sender::views(&pool, std::slice::from_ref(warehouse))
                .await
                .unwrap_or_default();
            pool.close().await;
            (head, view.first().map_or(0, |v| v.cursor))
        }
        Err(_) => (0, 0),
    };
    let (head, cursor) = entries;
    let which = if cursor >= head {
        "one per ledger entry".to_owned()
    } else {
        format!(
            "one per ledger entry up to {cursor} (the {} after it were recorded by the final pass, after the daemon stopped)",
            head - cursor
        )
    };
    match counted.await {
        Ok((rows, opted_out)) => println!(
            "the PostgreSQL warehouse holds {rows} rows in table {TABLE}, {which}; its view {TABLE}_current shows {opted_out} numbers opted out"
        ),
        Err(error) => println!(
            "the PostgreSQL warehouse cannot be counted: {}",
            unreached(&error)
        ),
    }
}
