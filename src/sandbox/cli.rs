//! `outreach-sync sandbox`: the sandbox as a standalone process.

use std::net::SocketAddr;

/// Flags of `outreach-sync sandbox` (the command-line contract).
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxArgs {
    /// Address of the v3 API (served under /v3).
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub bind: SocketAddr,
    #[arg(long, default_value = "sandbox@example.org")]
    pub client_id: String,
    #[arg(long, default_value = "sandbox-secret")]
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
}

/// Runs the sandbox until SIGINT/SIGTERM.
pub async fn run(args: SandboxArgs) -> anyhow::Result<()> {
    let _ = args;
    anyhow::bail!("the sandbox is not built yet")
}
