//! `outreach-sync sandbox`: the sandbox as a standalone process.

use std::net::SocketAddr;
use std::time::Duration;

use super::config::{DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET};
use super::{ApiFaults, DeliverTo, DeliveryFaults, Sandbox, SandboxConfig};

/// Flags of `outreach-sync sandbox` (the command-line contract).
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxArgs {
    /// Address of the v3 API (served under /v3).
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub bind: SocketAddr,
    #[arg(long, default_value = DEFAULT_CLIENT_ID)]
    pub client_id: String,
    #[arg(long, default_value = DEFAULT_CLIENT_SECRET)]
    pub client_secret: String,
    /// Register a webhook target for every event kind at start.
    #[arg(long)]
    pub deliver_to: Option<String>,
    /// Signing secret of the registration made by --deliver-to.
    #[arg(long)]
    pub secret: Option<String>,
    /// Leads to seed.
    #[arg(long, default_value_t = 100)]
    pub leads: usize,
    /// Organizations to seed the leads over.
    #[arg(long, default_value_t = 2)]
    pub organizations: usize,
    #[arg(long, default_value_t = 0.0)]
    pub drop_rate: f64,
    #[arg(long, default_value_t = 0.0)]
    pub duplicate_rate: f64,
    #[arg(long)]
    pub reorder: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Each delivery waits up to this many milliseconds before its first attempt.
    #[arg(long, default_value_t = 0)]
    pub max_delay_ms: u64,
    /// Share of API requests answered 429.
    #[arg(long, default_value_t = 0.0)]
    pub rate_429: f64,
    /// Share of API requests answered 500/503.
    #[arg(long, default_value_t = 0.0)]
    pub rate_5xx: f64,
    /// Lifetime of minted tokens, in seconds.
    #[arg(long, default_value_t = 7200)]
    pub token_lifetime_secs: u64,
    /// Generated activity (messages, STOP/START) every this many milliseconds; 0 for none.
    #[arg(long, default_value_t = 1000)]
    pub activity_ms: u64,
    /// Opt-out and opt-in change only the lead addressed, not every lead with the number.
    #[arg(long)]
    pub no_account_sync: bool,
}

impl SandboxArgs {
    /// The in-process configuration these flags describe.
    pub(crate) fn to_config(&self) -> anyhow::Result<SandboxConfig> {
        for (name, rate) in [
            ("--drop-rate", self.drop_rate),
            ("--duplicate-rate", self.duplicate_rate),
            ("--rate-429", self.rate_429),
            ("--rate-5xx", self.rate_5xx),
        ] {
            if !(0.0..=1.0).contains(&rate) {
                anyhow::bail!("{name} must be between 0 and 1, got {rate}");
            }
        }
        let deliver_to = match (&self.deliver_to, &self.secret) {
            (Some(url), Some(secret)) => Some(DeliverTo {
                url: url.clone(),
                secret: secret.clone(),
            }),
            (Some(_), None) => anyhow::bail!("--deliver-to needs --secret (the signing secret)"),
            (None, Some(_)) => anyhow::bail!("--secret is only used with --deliver-to"),
            (None, None) => None,
        };
        Ok(SandboxConfig {
            bind: self.bind,
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            token_lifetime: Duration::from_secs(self.token_lifetime_secs.max(1)),
            seed: self.seed,
            leads: self.leads,
            organizations: self.organizations.max(1),
            account_sync: !self.no_account_sync,
            delivery_faults: DeliveryFaults {
                drop_rate: self.drop_rate,
                duplicate_rate: self.duplicate_rate,
                reorder: self.reorder,
                max_delay_ms: self.max_delay_ms,
            },
            api_faults: ApiFaults {
                rate_429: self.rate_429,
                rate_5xx: self.rate_5xx,
                retry_after_secs: None,
            },
            deliver_to,
            activity_interval: (self.activity_ms > 0)
                .then(|| Duration::from_millis(self.activity_ms)),
            ..SandboxConfig::default()
        })
    }
}

/// Runs the sandbox until SIGINT/SIGTERM.
pub async fn run(args: SandboxArgs) -> anyhow::Result<()> {
    let config = args.to_config()?;
    let sandbox = Sandbox::spawn(config).await?;
    let truth = sandbox.truth();
    println!(
        "sandbox: serving the v3 API at {}/v3 (and the v2.1 reads and consent update at /v2)",
        sandbox.base_url()
    );
    println!(
        "sandbox: client_id {} (the client secret is the one given with --client-secret)",
        args.client_id
    );
    println!(
        "sandbox: seeded {} leads over {} organizations (seed {})",
        truth.leads.len(),
        truth.organizations.len(),
        args.seed
    );
    for org in &truth.organizations {
        println!("sandbox:   organization {} ({})", org.id, org.name);
    }
    let config = sandbox.config();
    println!(
        "sandbox: NGP VAN (API v4) at {} (Basic auth: any application name, password KEY|MODE with mode 0 or 1)",
        sandbox.van_url()
    );
    for committee in &config.van_committees {
        // Sandbox keys, printed so they can be pasted into a destination's configuration.
        println!(
            "sandbox:   committee {:?}: api key {}{}",
            committee.name,
            committee.api_key,
            if committee.sms_text {
                ""
            } else {
                " (no \"SMS Text\" contact type)"
            }
        );
    }
    println!(
        "sandbox: Action Network (API v2) at {} (OSDI-API-Token: {})",
        sandbox.action_network_url(),
        config.action_network_key
    );
    println!(
        "sandbox:   their truth and faults under {}/_control/van and {}/_control/actionnetwork",
        sandbox.base_url(),
        sandbox.base_url()
    );
    match &args.deliver_to {
        Some(url) => println!("sandbox: delivering consentUpdate-v1 and messageStatus-v1 to {url}"),
        None => println!(
            "sandbox: no webhook target yet (POST /v3/webhook_registrations, or --deliver-to)"
        ),
    }
    println!(
        "sandbox: test controls under {}/_control (truth, stop, start, messages, faults)",
        sandbox.base_url()
    );
    let mut report = tokio::time::interval(REPORT_EVERY);
    report.tick().await;
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = report.tick() => print_summary(&sandbox),
        }
    }
    println!("sandbox: stopping");
    sandbox.shutdown().await;
    Ok(())
}

/// How often the running sandbox prints a summary line.
const REPORT_EVERY: Duration = Duration::from_secs(10);

fn print_summary(sandbox: &super::RunningSandbox) {
    let truth = sandbox.truth();
    let opted_out = truth.leads.iter().filter(|l| l.global_opted_out).count();
    let moving = truth.messages.iter().filter(|m| m.can_advance()).count();
    let d = sandbox.delivery_counts();
    let stats = sandbox.stats();
    println!(
        "sandbox: {} leads ({opted_out} opted out), {} messages ({moving} still moving); \
         {} events: {} delivered, {} dropped, {} given up, {} waiting ({} sent twice, \
         {} failed attempts); {} API requests, {} token requests",
        truth.leads.len(),
        truth.messages.len(),
        d.events,
        d.delivered,
        d.dropped,
        d.gave_up,
        d.waiting,
        d.duplicated,
        d.failed_attempts,
        stats.api_requests,
        stats.token_requests,
    );
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
