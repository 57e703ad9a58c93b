//! `outreach-sync demo`: the sandbox, the daemon and generated activity with faults in one
//! process, with a live view of what happens. No configuration needed.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use secrecy::SecretString;
use tokio_util::sync::CancellationToken;

use crate::app::{self, Application};
use crate::client::models::{Scope, WebhookConfig};
use crate::ledger;
use crate::metrics::{self, Delivery};
use crate::sandbox::{DeliveryFaults, Outcome, RunningSandbox, Sandbox, SandboxConfig};
use crate::settings::{LogFormat, Settings, Synchronous};

/// How often the live view prints a line.
const VIEW_INTERVAL: Duration = Duration::from_secs(2);
/// How often the sandbox generates activity (consent changes, messages, status moves).
const ACTIVITY_INTERVAL: Duration = Duration::from_millis(100);
/// Reconciliation schedule of the demo: often, so repairs show within a minute.
const DEMO_SCHEDULE: &str = "*/20 * * * * *";

/// Options of `outreach-sync demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<u64>,
    /// Leads the sandbox starts with.
    #[arg(long, default_value_t = 2000)]
    pub leads: usize,
    /// Share of webhook deliveries the sandbox drops.
    #[arg(long, default_value_t = 0.2)]
    pub drop_rate: f64,
    /// Share of webhook deliveries the sandbox sends twice.
    #[arg(long, default_value_t = 0.1)]
    pub duplicate_rate: f64,
    /// Where the demo keeps its database (default: a new directory under the temp dir).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Runs the demo until Ctrl-C/SIGTERM or `--duration`.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("outreach-sync-demo-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let secret = format!("demo-{:016x}", rand::random::<u64>());
    let admin_token = format!("demo-admin-{:016x}", rand::random::<u64>());

    let sandbox = Sandbox::spawn(SandboxConfig {
        leads: args.leads,
        organizations: 3,
        seed: rand::random(),
        delivery_faults: DeliveryFaults {
            drop_rate: args.drop_rate,
            duplicate_rate: args.duplicate_rate,
            reorder: true,
            max_delay_ms: 200,
        },
        activity_interval: Some(ACTIVITY_INTERVAL),
        ..SandboxConfig::default()
    })
    .await
    .context("starting the sandbox")?;

    let mut settings = demo_settings(&dir, &sandbox, &secret);
    settings.admin.tokens = vec![SecretString::from(admin_token.clone())];
    settings.validate()?;
    crate::telemetry::init(&settings.log);
    let application = Application::build(settings.clone()).await?;
    let ingest = format!(
        "http://{}{}",
        application.ingest_addr(),
        settings.ingest.path
    );
    let pool = application.pool().clone();
    subscribe(&sandbox, &ingest, &secret)?;

    println!("outreach-sync demo");
    println!(
        "  sandbox (the simulated service): {}/v3",
        sandbox.base_url()
    );
    println!("  daemon ingest:                   {ingest}");
    println!(
        "  database:                        {}",
        settings.database_path()?.display()
    );
    println!(
        "  faults: {:.0}% of webhooks dropped, {:.0}% duplicated, reordered; reconciliation {DEMO_SCHEDULE}",
        args.drop_rate * 100.0,
        args.duplicate_rate * 100.0
    );
    println!(
        "  stop with Ctrl-C{}\n",
        args.duration
            .map(|d| format!(" (or after {d} s)"))
            .unwrap_or_default()
    );

    let shutdown = app::shutdown_on_signals();
    if let Some(secs) = args.duration {
        let stop = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(secs)).await;
            stop.cancel();
        });
    }
    let daemon = tokio::spawn(application.run_until_stopped(shutdown.clone()));
    live_view(&sandbox, &pool, &shutdown).await;
    daemon.await.context("the daemon task")??;
    sandbox.shutdown().await;

    println!("\nstopped. The database stays for a look:");
    let config = format!("OUTREACH_SYNC__DATABASE__URL={}", settings.database.url);
    println!("  {config} outreach-sync status");
    println!("  {config} outreach-sync events --limit 10");
    Ok(())
}

fn demo_settings(dir: &std::path::Path, sandbox: &RunningSandbox, secret: &str) -> Settings {
    let mut settings = Settings::default();
    settings.database.url = format!("sqlite://{}", dir.join("demo.db").display());
    // The demo shows the flow, not power-loss durability.
    settings.database.synchronous = Synchronous::Normal;
    settings.ingest.bind = "127.0.0.1:0".into();
    settings.admin.bind = "127.0.0.1:0".into();
    settings.webhook.secrets = vec![SecretString::from(secret.to_owned())];
    settings.service.base_url = sandbox.base_url();
    settings.service.client_id = sandbox.config().client_id.clone();
    settings.service.client_secret =
        Some(SecretString::from(sandbox.config().client_secret.clone()));
    settings.reconcile.schedule = DEMO_SCHEDULE.into();
    settings.reconcile.on_start = true;
    settings.reconcile.message_stale_after_secs = 10;
    settings.log.format = LogFormat::Text;
    settings.log.level = "warn".into();
    settings
}

fn subscribe(sandbox: &RunningSandbox, ingest: &str, secret: &str) -> anyhow::Result<()> {
    let refused =
        |e: crate::sandbox::Refusal| anyhow::anyhow!("registering the webhook: {}", e.message);
    let consent = WebhookConfig::ConsentUpdate {
        scope: Scope::Account,
        include_opt_out: true,
        include_opt_in: true,
    };
    sandbox
        .register_webhook(ingest, secret, consent)
        .map_err(refused)?;
    let statuses = WebhookConfig::MessageStatus {
        scope: Scope::Account,
    };
    sandbox
        .register_webhook(ingest, secret, statuses)
        .map_err(refused)?;
    Ok(())
}

/// Prints one line every [`VIEW_INTERVAL`] until `shutdown`.
async fn live_view(
    sandbox: &RunningSandbox,
    pool: &sqlx::SqlitePool,
    shutdown: &CancellationToken,
) {
    let started = Instant::now();
    println!(
        "{:>6}  {:>9} {:>8} {:>8}  {:>8} {:>7} {:>11}  {:>7} {:>6}  {:>6} {:>8}",
        "time",
        "events",
        "dropped",
        "received",
        "dups",
        "applied",
        "quarantined",
        "ledger",
        "leads",
        "passes",
        "repaired"
    );
    let mut tick = tokio::time::interval(VIEW_INTERVAL);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        let records = sandbox.deliveries();
        let events = records
            .iter()
            .map(|r| r.event_id.as_str())
            .collect::<HashSet<_>>()
            .len();
        let dropped = records
            .iter()
            .filter(|r| r.outcome == Outcome::Dropped)
            .count();
        let m = metrics::global();
        let (status, passes) = match (ledger::status(pool).await, passes(pool).await) {
            (Ok(status), Ok(passes)) => (status, passes),
            _ => continue,
        };
        println!(
            "{:>5}s  {:>9} {:>8} {:>8}  {:>8} {:>7} {:>11}  {:>7} {:>6}  {:>6} {:>8}",
            started.elapsed().as_secs(),
            events,
            dropped,
            m.deliveries(Delivery::Accepted) + m.deliveries(Delivery::Duplicate),
            m.deliveries(Delivery::Duplicate),
            status.applied,
            status.quarantined,
            status.ledger_entries,
            status.leads,
            passes.0,
            passes.1,
        );
    }
}

/// Reconciliation passes recorded and the consent gaps they repaired.
async fn passes(pool: &sqlx::SqlitePool) -> Result<(i64, i64), sqlx::Error> {
    sqlx::query_as(
        "SELECT COUNT(*), COALESCE(SUM(summary ->> '$.repaired'), 0) FROM reconcile_passes",
    )
    .fetch_one(pool)
    .await
}
