//! The demo's end: no more activity, what is still queued delivered and applied, the
//! daemon stopped, one reconciliation pass alone per account, and the run's totals.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use outreach_sync::reconcile::{PassRequest, Reconciler};
use outreach_sync::settings::{Account, Settings};
use outreach_sync::store::Pool;
use outreach_sync::{ledger, upstream};
use outreach_sync_sandbox::RunningSandbox;
use tokio_util::sync::CancellationToken;

use super::{
    APPLY_LIMIT, CANDIDATE, DEMO_CALLER, PARTY, PUSH_LIMIT, Row, SETTLE_LIMIT, differences,
};

/// The end: no more activity, the queued deliveries received and applied, the daemon
/// stopped, one reconciliation pass run alone, and the last row.
pub(super) async fn finale(
    (sandbox, candidate, opted_out_before): (
        &RunningSandbox,
        &RunningSandbox,
        &std::collections::HashSet<String>,
    ),
    settings: &Settings,
    pool: &Pool,
    daemon_stop: CancellationToken,
    daemon: tokio::task::JoinHandle<anyhow::Result<()>>,
    started: Instant,
) -> anyhow::Result<()> {
    sandbox.stop_activity();
    let at = started.elapsed().as_secs();
    let waiting = sandbox.delivery_counts().waiting;
    println!(
        "\n{at:>5}s  the service's activity stopped; delivering the {waiting} webhook events still waiting"
    );
    if !sandbox.settle(SETTLE_LIMIT).await {
        println!(
            "        {} still waiting after {} s; the final pass repairs what they would have",
            sandbox.delivery_counts().waiting,
            SETTLE_LIMIT.as_secs()
        );
    }
    if !applied_all(pool).await {
        println!(
            "        the daemon still has deliveries to apply after {} s",
            APPLY_LIMIT.as_secs()
        );
    }
    if !pushed_all(pool).await {
        println!(
            "        opt-outs still queued for a service after {} s",
            PUSH_LIMIT.as_secs()
        );
    }
    let row = Row::read_in(sandbox, pool, Some(PARTY)).await?;
    println!("{}", row.line(&format!("{}s", started.elapsed().as_secs())));

    // The daemon's own schedule could start a pass at any moment; the final pass runs alone.
    daemon_stop.cancel();
    daemon.await.context("the daemon task")??;
    let pool = outreach_sync::store::open(settings).await?;
    for account in settings.accounts()? {
        final_pass(settings, &account, &pool).await?;
    }
    for account in settings.accounts()? {
        push_what_the_pass_queued(&account, &pool).await?;
    }
    let row = Row::read_in(sandbox, &pool, Some(PARTY)).await?;
    println!("{}", row.line("final"));
    let leads = candidate.leads();
    let shared = leads
        .iter()
        .filter(|l| l.global_opted_out && !opted_out_before.contains(&l.id))
        .count();
    let candidate_differences =
        differences::consent_differences_in(&pool, Some(CANDIDATE), &leads).await?;
    pool.close().await;
    print_totals(&row);
    println!(
        "account `{CANDIDATE}` (no activity of its own): {shared} of its {} leads opted out at its service by opt-outs given to `{PARTY}`, one caller (`{DEMO_CALLER}`, revoke-all in force from {}); its mirror differs from it for {} leads",
        leads.len(),
        settings.consent.revoke_all_from,
        candidate_differences.total()
    );
    Ok(())
}

/// One reconciliation pass of `account`, alone.
async fn final_pass(settings: &Settings, account: &Account, pool: &Pool) -> anyhow::Result<()> {
    let client = upstream::service_client(account, pool, Default::default())?;
    let reconciler =
        Reconciler::new(pool.clone(), client, &settings.reconcile).with_account(account);
    // A pass cut short by the stop resumes from its cursor, skipping the pages it had done:
    // then a second, whole pass follows.
    let resumed = !ledger::status(pool)
        .await?
        .reconciliation_in_progress
        .is_empty();
    for _ in 0..(1 + usize::from(resumed)) {
        let summary = reconciler
            .run_pass(&PassRequest::default(), &CancellationToken::new())
            .await
            .context("the final reconciliation pass")?;
        println!(
            "        final reconciliation pass of `{}` (the daemon stopped first, so it runs alone): {} leads scanned, {} differences repaired, {} ms{}",
            account.id,
            summary.leads_scanned,
            summary.repaired,
            summary.duration_ms,
            if summary.errors.is_empty() {
                String::new()
            } else {
                format!(", errors: {}", summary.errors.join("; "))
            }
        );
    }
    Ok(())
}

/// The opt-outs the final pass queued for `account`'s service (a suppression that a lead
/// opted in at the service, its webhook lost, is held to): pushed as the daemon's pusher
/// would have, had it still run, so that the last row compares what the daemon decided with
/// what the service then holds.
async fn push_what_the_pass_queued(account: &Account, pool: &Pool) -> anyhow::Result<()> {
    let client = upstream::service_client(account, pool, Default::default())?;
    let pusher = outreach_sync::pusher::Pusher::new(pool.clone(), client, Default::default())
        .with_account(account);
    let started = Instant::now();
    let mut pushed = 0;
    while started.elapsed() < PUSH_LIMIT
        && pusher
            .try_push(chrono::Utc::now())
            .await
            .context("pushing what the final pass queued")?
            .is_some()
    {
        pushed += 1;
    }
    if pushed > 0 {
        println!(
            "        the final pass of `{}` queued {pushed} opt-out(s) for its service (a suppression held against an opt-in whose webhook was lost); pushed",
            account.id
        );
    }
    Ok(())
}

/// The run's totals: the webhooks as the service sent them, what the daemon stored and
/// recorded, and how far the mirror is from the service.
fn print_totals(row: &Row) {
    let w = &row.webhooks;
    let share = |n: u64| 100.0 * n as f64 / w.events.max(1) as f64;
    println!(
        "\n{} webhook events: {} dropped ({:.1}%), {} delivered, {} waiting, {} given up; {} sent twice ({:.1}%); {} attempts refused or unanswered",
        w.events,
        w.dropped,
        share(w.dropped),
        w.delivered,
        w.waiting,
        w.gave_up,
        w.duplicated,
        share(w.duplicated),
        w.failed_attempts,
    );
    println!(
        "the daemon stored {} deliveries ({} quarantined), recorded {} ledger entries; {} reconciliation passes repaired {} differences",
        row.stored, row.quarantined, row.ledger, row.passes, row.repaired
    );
    let d = &row.differences;
    println!(
        "the mirror now differs from the service for {} of {} leads ({} with the other consent, {} not mirrored)",
        d.total(),
        d.leads,
        d.wrong,
        d.missing
    );
    for difference in &d.named {
        println!("  {difference}");
    }
}

/// Waits (up to [`PUSH_LIMIT`]) until no opt-out waits for a service: those shared with
/// the second account are the compliance report's too.
async fn pushed_all(pool: &Pool) -> bool {
    let deadline = Instant::now() + PUSH_LIMIT;
    while Instant::now() < deadline {
        if ledger::status(pool)
            .await
            .is_ok_and(|s| s.pushes.pending == 0)
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Waits (up to [`APPLY_LIMIT`]) until the daemon has applied every stored delivery.
async fn applied_all(pool: &Pool) -> bool {
    let deadline = Instant::now() + APPLY_LIMIT;
    while Instant::now() < deadline {
        if ledger::status(pool).await.is_ok_and(|s| s.backlog == 0) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}
