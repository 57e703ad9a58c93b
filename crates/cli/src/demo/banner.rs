//! What the demo says at its start (what runs where, the registrations made) and at its
//! end (how to look again at what it left).

use outreach_sync::model::AccountId;
use outreach_sync::registrations;
use outreach_sync::settings::Settings;
use outreach_sync_sandbox::RunningSandbox;

use super::receiver::DemoSubscriber;
use super::view::LEGEND;
use super::{CANDIDATE, DEMO_SCHEDULE, DemoArgs, PARTY, kept};

/// How to look at what the demo left: every command with the configuration it ran.
pub(super) fn print_afterwards(kept: &kept::Kept) {
    let dir = kept
        .config
        .parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let config = kept.config.display();
    println!(
        "\nstopped. What the demo ran stays in {dir} (config.toml beside the database, its secrets in secrets/):"
    );
    println!("  outreach-sync --config {config} status");
    println!("  outreach-sync --config {config} destinations");
    println!("  outreach-sync --config {config} report compliance");
    println!(
        "  outreach-sync --config {config} report compliance --format html --output {dir}/report.html"
    );
    println!(
        "  outreach-sync --config {config} serve    (then the console, http://{}/, signed in with the token in {})",
        kept::KEPT_ADMIN,
        kept.admin_token.display()
    );
}

/// What runs where, the faults, and how to stop.
pub(super) fn print_banner(
    args: &DemoArgs,
    settings: &Settings,
    (sandbox, candidate): (&RunningSandbox, &RunningSandbox),
    crm: &DemoSubscriber,
    ingest: &str,
    admin: std::net::SocketAddr,
    admin_token: &str,
) -> anyhow::Result<()> {
    println!("outreach-sync demo");
    println!(
        "  sandbox (the simulated service): {}/v3, {} leads in 3 organizations",
        sandbox.base_url(),
        args.leads
    );
    println!(
        "  second account `{CANDIDATE}`:        {}/v3, the same people, quiet; opt-outs of `{PARTY}` shared with it",
        candidate.base_url()
    );
    println!(
        "  daemon ingest:                   {ingest} (`{PARTY}`), /webhooks/{CANDIDATE} (`{CANDIDATE}`)"
    );
    println!("  console:                         http://{admin}/ (sign in with the token below)");
    println!("  daemon admin API:                http://{admin} (token {admin_token})");
    println!(
        "  subscriber `crm`:                {} (every consent ledger entry, signed)",
        crm.url
    );
    println!(
        "  destination `van`:               {} (NGP VAN: each opt-out as \"Do Not Text\")",
        sandbox.van_url()
    );
    println!(
        "  destination `action-network`:    {} (each opt-out unsubscribed)",
        sandbox.action_network_url()
    );
    println!(
        "  database:                        {}",
        settings.database_path()?.display()
    );
    println!(
        "  faults: {:.0}% of webhook events dropped, {:.0}% sent twice, reordered; reconciliation {DEMO_SCHEDULE}",
        args.drop_rate * 100.0,
        args.duplicate_rate * 100.0
    );
    println!(
        "  stop with Ctrl-C{}: the activity stops, a final reconciliation pass runs, and the last row follows\n",
        args.duration
            .map(|d| format!(" (or after {d} s)"))
            .unwrap_or_default()
    );
    println!("{LEGEND}\n");
    Ok(())
}

/// The registrations made, as `webhooks register` says them.
pub(super) fn print_registered(account: &AccountId, registered: &registrations::Registered) {
    println!("`{account}` registered as `outreach-sync webhooks register` does:");
    for step in &registered.applied {
        println!("  {:<17} {}", step.planned.kind.as_str(), step.id);
    }
    for mocked in &registered.check.mocked {
        println!(
            "  {:<17} {} mock event: willPassValidation {}",
            mocked.kind.as_str(),
            mocked.id,
            mocked.will_pass_validation
        );
    }
    for problem in &registered.check.result.problems {
        println!("  problem: {problem}");
    }
    println!();
}
