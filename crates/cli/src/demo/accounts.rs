//! The demo's two accounts: the second account's quiet sandbox, both served by the one
//! daemon under one caller with the revoke-all rule in force, and each account's webhook
//! registrations with its sandbox.

use anyhow::Context as _;
use outreach_sync::model::AccountId;
use outreach_sync::settings::{Account, Settings};
use outreach_sync::store::Pool;
use outreach_sync::{registrations, upstream};
use outreach_sync_sandbox::{RunningSandbox, Sandbox, SandboxConfig};
use secrecy::SecretString;

use super::signing::sandbox_signing;
use super::{CANDIDATE, DemoArgs, PARTY};

/// The second account: its sandbox, served beside the first, and the leads it had opted
/// out of its own (the others it opts out come from sharing).
pub(super) async fn add_candidate(
    args: &DemoArgs,
    party: &RunningSandbox,
    settings: &mut Settings,
) -> anyhow::Result<(RunningSandbox, std::collections::HashSet<String>)> {
    let secret = format!("demo-candidate-{:016x}", rand::random::<u64>());
    let candidate = start_candidate(args, party, settings, &secret).await?;
    serve_two_accounts(settings, &candidate, &secret);
    let opted_out = candidate
        .leads()
        .into_iter()
        .filter(|lead| lead.global_opted_out)
        .map(|lead| lead.id)
        .collect();
    Ok((candidate, opted_out))
}

/// Registers each account's path as `webhooks register` does.
pub(super) async fn register_all(
    settings: &Settings,
    pool: &Pool,
    ingest: &str,
) -> anyhow::Result<Vec<(AccountId, registrations::Registered)>> {
    let mut registered = Vec::new();
    for account in settings.accounts()? {
        let url = format!(
            "http://{}{}",
            application_ingest(ingest),
            account.ingest_path
        );
        let done = register(&account, pool, &url).await?;
        registered.push((account.id, done));
    }
    Ok(registered)
}

/// The second account's service: the same people as `party`'s (the same seed), quiet (no
/// activity of its own, no faults), its own credentials and signing secret.
async fn start_candidate(
    args: &DemoArgs,
    party: &RunningSandbox,
    settings: &Settings,
    secret: &str,
) -> anyhow::Result<RunningSandbox> {
    let mut webhook = settings.webhook.clone();
    webhook.secrets = vec![SecretString::from(secret.to_owned())];
    Sandbox::spawn(SandboxConfig {
        signing: sandbox_signing(&webhook),
        leads: args.leads,
        organizations: 3,
        seed: party.config().seed,
        client_id: format!("{CANDIDATE}-client"),
        client_secret: format!("{CANDIDATE}-{:016x}", rand::random::<u64>()),
        ..SandboxConfig::default()
    })
    .await
    .context("starting the second account's sandbox")
}

/// Serves the two sandboxes as the accounts `party` (at `ingest.path`, as configured) and
/// `candidate` (at `/webhooks/candidate`), one caller with the revoke-all rule in force
/// from the day the demo runs: an opt-out given to either binds both.
fn serve_two_accounts(settings: &mut Settings, candidate: &RunningSandbox, secret: &str) {
    use outreach_sync::settings::AccountSettings;
    let party = AccountSettings {
        name: PARTY.into(),
        ingest_path: settings.ingest.path.clone(),
        base_url: settings.service.base_url.clone(),
        client_id: settings.service.client_id.clone(),
        client_secret: settings.service.client_secret.clone(),
        requests_per_second: Some(settings.service.requests_per_second),
        webhook: settings.webhook.clone(),
        ..AccountSettings::default()
    };
    let mut webhook = settings.webhook.clone();
    webhook.secrets = vec![SecretString::from(secret.to_owned())];
    let candidate = AccountSettings {
        name: CANDIDATE.into(),
        base_url: candidate.base_url(),
        client_id: candidate.config().client_id.clone(),
        client_secret: Some(SecretString::from(candidate.config().client_secret.clone())),
        // Every opt-out of the busy account comes its way.
        requests_per_second: Some(500),
        webhook,
        ..AccountSettings::default()
    };
    settings.account = vec![party, candidate];
    settings.consent.share_across_accounts = false;
    settings.consent.revoke_all_from = demo_revoke_all_from(settings);
    settings.caller = vec![outreach_sync::settings::CallerSettings {
        name: DEMO_CALLER.into(),
        members: vec![PARTY.into(), CANDIDATE.into()],
    }];
}

/// The demo's one caller, of both its accounts.
pub(super) const DEMO_CALLER: &str = "demo-campaign";

/// The day the demo runs, in the compliance time zone: the revoke-all rule is in force in
/// the demo (the FCC's date is 2027-01-31).
fn demo_revoke_all_from(settings: &Settings) -> String {
    let today = settings.compliance.business_days().map_or_else(
        |_| chrono::Utc::now().date_naive(),
        |calendar| calendar.day_of(chrono::Utc::now()),
    );
    today.format("%Y-%m-%d").to_string()
}

/// The listener's address of an ingest URL (`http://ADDR/path`).
fn application_ingest(ingest: &str) -> &str {
    let rest = ingest.strip_prefix("http://").unwrap_or(ingest);
    rest.split('/').next().unwrap_or(rest)
}

/// Registers the daemon's ingest URL with the sandbox through the code of
/// `outreach-sync webhooks register` (both registrations, then a mock event each), and
/// keeps the check's result for `status` and the console.
async fn register(
    account: &Account,
    pool: &Pool,
    ingest: &str,
) -> anyhow::Result<registrations::Registered> {
    let client = upstream::service_client(account, pool, Default::default())?;
    let target = registrations::Target::of(account, Some(ingest), &[])?;
    let registered = registrations::register(&client, &target)
        .await
        .context("registering the daemon's webhooks with the sandbox")?;
    registrations::record_in(pool, &account.id, &registered.check.result).await?;
    Ok(registered)
}
