//! `outreach-sync demo`: the sandbox, the daemon and generated activity with faults in one
//! process, with a live view of what happens. No configuration needed. The second account
//! and each account's registrations are `demo/accounts.rs`.

mod accounts;
mod banner;
mod differences;
mod elsewhere;
mod finale;
mod kept;
mod receiver;
mod signing;
mod summary;
mod view;
mod warehouse;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use outreach_sync_sandbox::{DeliveryFaults, RunningSandbox, Sandbox, SandboxConfig};
use secrecy::SecretString;
use tokio_util::sync::CancellationToken;

use accounts::{DEMO_CALLER, add_candidate, register_all};
pub use differences::{ConsentDifferences, consent_differences};
use outreach_sync::app::{self, Application};
use outreach_sync::settings::{
    DestinationSettings, LogFormat, Settings, Synchronous, SystemSettings,
};
use outreach_sync::store::Pool;
use receiver::DemoSubscriber;
use signing::sandbox_signing;
use summary::{print_compliance, print_destinations, print_received};
pub use view::Row;

/// How often the live view prints a line.
const VIEW_INTERVAL: Duration = Duration::from_secs(2);
/// How often the sandbox generates activity (consent changes, messages, status moves).
const ACTIVITY_INTERVAL: Duration = Duration::from_millis(100);
/// The name of the demo's admin token: the actor the console records.
const DEMO_ACTOR: &str = "operator";
/// Reconciliation schedule of the demo: often, so repairs show within a minute.
const DEMO_SCHEDULE: &str = "*/20 * * * * *";
/// How long the finale waits for the webhook events still queued to be delivered.
const SETTLE_LIMIT: Duration = Duration::from_secs(10);
/// How long the finale waits for the daemon to apply what it stored.
const APPLY_LIMIT: Duration = Duration::from_secs(10);
/// How long the finale waits for the opt-outs queued for the services to be sent.
const PUSH_LIMIT: Duration = Duration::from_secs(30);
/// The demo's first account: the busy sandbox's.
const PARTY: &str = "party";
/// The second: a quiet sandbox holding the same people, with opt-outs shared from the first.
const CANDIDATE: &str = "candidate";

/// Options of `outreach-sync demo`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DemoArgs {
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    pub(crate) duration: Option<u64>,
    /// Leads the sandbox starts with.
    #[arg(long, default_value_t = 2000)]
    pub(crate) leads: usize,
    /// Share of webhook deliveries the sandbox drops.
    #[arg(long, default_value_t = 0.2)]
    pub(crate) drop_rate: f64,
    /// Share of webhook deliveries the sandbox sends twice.
    #[arg(long, default_value_t = 0.1)]
    pub(crate) duplicate_rate: f64,
    /// Where the demo keeps its database (default: a new directory under the temp dir).
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// A PostgreSQL database to mirror the ledger into as a warehouse (its table
    /// `outreach_sync_demo`, made anew each run), e.g.
    /// postgres://postgres@127.0.0.1:5432/test; the demo runs without it when it does not
    /// answer.
    #[arg(long, value_name = "URL")]
    pub(crate) warehouse: Option<String>,
}

/// Runs the demo until Ctrl-C/SIGTERM or `--duration`, then stops the activity, runs a
/// final reconciliation pass and prints the last row: the mirror then equals the service.
pub(crate) async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let Prepared {
        settings,
        admin_token,
        sandbox,
        candidate,
        opted_out_before,
        crm,
        kept,
    } = prepare(&args).await?;
    outreach_sync::telemetry::init(&settings.log);
    let application = Application::build(settings.clone()).await?;
    let ingest = format!(
        "http://{}{}",
        application.ingest_addr(),
        settings.ingest.path
    );
    let admin = application.admin_addr();
    let daemon_at = elsewhere::Daemon {
        ingest: application.ingest_addr(),
        admin,
        admin_token: &admin_token,
    };
    let pool = application.pool().clone();
    // The daemon stops only when the finale says so (or on its own failure, which ends the
    // view too): the final pass needs the deliveries still in flight received first.
    let daemon_stop = CancellationToken::new();
    let daemon = tokio::spawn(application.run_until_stopped(daemon_stop.clone()));
    // Registered as `webhooks register` does, once the daemon answers the mock events:
    // each account at its own path.
    let registered = match register_all(&settings, &pool, &ingest).await {
        Ok(registered) => registered,
        Err(error) => {
            daemon_stop.cancel();
            let _ = daemon.await;
            sandbox.shutdown().await;
            candidate.shutdown().await;
            return Err(error);
        }
    };
    banner::print_banner(
        &args,
        &settings,
        (&sandbox, &candidate),
        &crm,
        &ingest,
        admin,
        &admin_token,
    )?;
    for (account, done) in &registered {
        banner::print_registered(account, done);
    }

    let started = Instant::now();
    let stop = stop_signal(args.duration);
    live_view(&sandbox, &pool, &crm, admin, &stop, &daemon_stop, started).await;
    // Before the final pass: what they opt out is settled with everything else. The
    // service's own activity stops first, so that what the lines say of each person is what
    // each play did (a STOP of the service's activity to the person chosen would otherwise
    // arrive first, and the play be counted as confirmed).
    sandbox.stop_activity();
    let given_elsewhere = elsewhere::give(&sandbox, &crm, &daemon_at).await;
    let outcome = finale::finale(
        (&sandbox, &candidate, &opted_out_before),
        &settings,
        &pool,
        daemon_stop,
        daemon,
        started,
    )
    .await;
    print_received(&crm);
    print_destinations(&sandbox, &settings).await;
    sandbox.shutdown().await;
    candidate.shutdown().await;
    outcome?;
    print_last_lines(&kept, &given_elsewhere).await
}

/// The compliance of the run, what was given elsewhere, and the tips: the report as the
/// tips make it, from the configuration kept beside the database.
async fn print_last_lines(kept: &kept::Kept, given_elsewhere: &[String]) -> anyhow::Result<()> {
    let kept_settings = Settings::load(Some(&kept.config))
        .with_context(|| format!("reading {} again", kept.config.display()))?;
    print_compliance(&kept_settings).await?;
    for line in given_elsewhere {
        println!("{line}");
    }
    banner::print_afterwards(kept);
    Ok(())
}

/// What the demo runs: its configuration (kept beside its database), the two accounts'
/// sandboxes, and the CRM.
struct Prepared {
    settings: Settings,
    admin_token: String,
    sandbox: RunningSandbox,
    candidate: RunningSandbox,
    /// The second account's leads opted out before the run.
    opted_out_before: std::collections::HashSet<String>,
    crm: DemoSubscriber,
    kept: kept::Kept,
}

/// Starts the sandboxes and the CRM, and writes the configuration that points at them.
async fn prepare(args: &DemoArgs) -> anyhow::Result<Prepared> {
    let dir = demo_dir(args)?;
    let secret = format!("demo-{:016x}", rand::random::<u64>());
    let admin_token = format!("demo-admin-{:016x}", rand::random::<u64>());
    let mut settings = demo_settings(&dir, &secret);
    let sandbox = start_sandbox(args, &settings).await?;
    // A stand-in for the campaign's CRM, subscribed to every consent ledger entry.
    let crm_secret = subscriber_secret();
    let crm = DemoSubscriber::start(&crm_secret)
        .await
        .context("starting the demo's subscriber")?;
    use_service(&mut settings, &sandbox);
    let (candidate, opted_out_before) = add_candidate(args, &sandbox, &mut settings).await?;
    with_tools(&mut settings, &admin_token, (&crm, &crm_secret), &sandbox);
    if let Some(url) = &args.warehouse {
        match warehouse::reachable(url).await {
            Ok(warehouse) => settings.destination.push(warehouse),
            Err(why) => println!("the warehouse does not answer ({why}): the demo runs without it"),
        }
    }
    settings.validate()?;
    let kept = kept::keep(&dir, &settings)?;
    Ok(Prepared {
        settings,
        admin_token,
        sandbox,
        candidate,
        opted_out_before,
        crm,
        kept,
    })
}

/// The operator's admin token, the CRM subscribed, and the sandbox's systems of record.
fn with_tools(
    settings: &mut Settings,
    admin_token: &str,
    (crm, crm_secret): (&DemoSubscriber, &str),
    sandbox: &RunningSandbox,
) {
    // Named: the console shows who is signed in, and records it with local changes.
    settings.admin.tokens = vec![SecretString::from(format!("{DEMO_ACTOR}:{admin_token}"))];
    settings
        .subscriber
        .push(outreach_sync::settings::SubscriberSettings::new(
            "crm", &crm.url, crm_secret,
        ));
    settings.destination = demo_destinations(sandbox);
    settings.source = elsewhere::demo_sources(sandbox);
}

/// Where the demo keeps its database: `--dir`, or a new directory under the temp dir.
fn demo_dir(args: &DemoArgs) -> anyhow::Result<PathBuf> {
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("outreach-sync-demo-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Cancelled by the first SIGTERM or SIGINT, or after `duration` seconds when given.
fn stop_signal(duration: Option<u64>) -> CancellationToken {
    let stop = app::shutdown_on_signals();
    if let Some(secs) = duration {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(secs)).await;
            stop.cancel();
        });
    }
    stop
}

/// The simulated service, with the demo's faults and background activity.
async fn start_sandbox(args: &DemoArgs, settings: &Settings) -> anyhow::Result<RunningSandbox> {
    Sandbox::spawn(SandboxConfig {
        signing: sandbox_signing(&settings.webhook),
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
    .context("starting the sandbox")
}

/// The sandbox's VAN committee and Action Network, each written every opt-out. The VAN
/// committee is the first account's: its leads hold VAN IDs of that committee, and a VAN
/// ID means a person only there.
fn demo_destinations(sandbox: &RunningSandbox) -> Vec<DestinationSettings> {
    let mut van = DestinationSettings::new(
        "van",
        SystemSettings::Van(Default::default()),
        &sandbox.van_url(),
        outreach_sync_sandbox::DEFAULT_VAN_KEY,
    );
    van.scope.accounts = vec![PARTY.to_owned()];
    van.requests_per_second = Some(50);
    let mut action_network = DestinationSettings::new(
        "action-network",
        SystemSettings::ActionNetwork(Default::default()),
        &sandbox.action_network_url(),
        outreach_sync_sandbox::DEFAULT_ACTION_NETWORK_KEY,
    );
    action_network.requests_per_second = Some(50);
    vec![van, action_network]
}

/// A fresh Standard Webhooks secret for the demo's subscriber.
fn subscriber_secret() -> String {
    use base64::Engine as _;
    let key: [u8; 24] = rand::random();
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// The daemon's settings, but for where the service is (the sandbox, once it runs).
fn demo_settings(dir: &std::path::Path, secret: &str) -> Settings {
    let mut settings = Settings::default();
    settings.database.url = format!("sqlite://{}", dir.join("demo.db").display());
    // The demo shows the flow, not power-loss durability.
    settings.database.synchronous = Synchronous::Normal;
    settings.ingest.bind = "127.0.0.1:0".into();
    settings.admin.bind = "127.0.0.1:0".into();
    settings.webhook.secrets = vec![SecretString::from(secret.to_owned())];
    settings.reconcile.schedule = DEMO_SCHEDULE.into();
    settings.reconcile.on_start = true;
    settings.reconcile.message_stale_after_secs = 10;
    settings.log.format = LogFormat::Text;
    settings.log.level = "warn".into();
    settings
}

/// Points the daemon's `[service]` at the sandbox, with its credentials.
fn use_service(settings: &mut Settings, sandbox: &RunningSandbox) {
    settings.service.base_url = sandbox.base_url();
    settings.service.client_id = sandbox.config().client_id.clone();
    settings.service.client_secret =
        Some(SecretString::from(sandbox.config().client_secret.clone()));
}

/// Prints one row every [`VIEW_INTERVAL`] until `stop` (or the daemon stops on its own).
async fn live_view(
    sandbox: &RunningSandbox,
    pool: &Pool,
    crm: &DemoSubscriber,
    admin: std::net::SocketAddr,
    stop: &CancellationToken,
    daemon_stop: &CancellationToken,
    started: Instant,
) {
    println!("{}", view::header());
    let mut shown = 0;
    let mut tick = tokio::time::interval(VIEW_INTERVAL);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = daemon_stop.cancelled() => break,
            _ = tick.tick() => {}
        }
        match Row::read_in(sandbox, pool, Some(PARTY)).await {
            Ok(row) => println!("{}", row.line(&format!("{}s", started.elapsed().as_secs()))),
            Err(error) => tracing::warn!(%error, "reading the demo's figures"),
        }
        let received = crm.received();
        if received.entries > shown {
            shown = received.entries;
            println!("{}", subscriber_line(&received, admin));
        }
    }
}

/// What the demo's subscriber has been pushed, under a row of the view.
fn subscriber_line(received: &receiver::Received, admin: std::net::SocketAddr) -> String {
    let latest = received
        .latest_opt_out
        .as_ref()
        .map(|(phone, org, source, after_ms)| {
            let phone_query = phone.replace('+', "%2B");
            format!(
                "; latest opt-out {phone} in {org} ({source}), there {after_ms} ms after it was recorded\n           \
                 its evidence: http://{admin}/?phoneNumber={phone_query}"
            )
        })
        .unwrap_or_default();
    format!(
        "        -> crm: {} entries pushed, {} opt-outs{latest}",
        received.entries, received.opt_outs
    )
}
