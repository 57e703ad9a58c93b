//! What the demo prints at the end of a run: what the subscriber received, what the
//! destinations hold, and the compliance report's totals.

use outreach_sync::settings::Settings;
use outreach_sync_sandbox::RunningSandbox;

use super::receiver::DemoSubscriber;

/// What the demo's subscriber received, and whether every request verified.
pub(super) fn print_received(crm: &DemoSubscriber) {
    let r = crm.received();
    println!(
        "the subscriber `crm` received {} ledger entries ({} opt-outs), every signature checked{}",
        r.entries,
        r.opt_outs,
        if r.unverified > 0 {
            format!("; {} requests did NOT verify", r.unverified)
        } else {
            String::new()
        }
    );
}

/// What VAN and Action Network hold after the run, beside what the daemon kept of each
/// entry it sent them; then the warehouse's rows, when there is one.
pub(super) async fn print_destinations(sandbox: &RunningSandbox, settings: &Settings) {
    let van = sandbox.van_truth();
    let opted_out = van
        .people
        .iter()
        .flat_map(|p| &p.phones)
        .filter(|p| p.phone_opt_in_status.as_deref() == Some("O"))
        .count();
    let an = sandbox.action_network_truth();
    let unsubscribed = an
        .people
        .iter()
        .flat_map(|p| &p.phone_numbers)
        .filter(|p| p.status == "unsubscribed")
        .count();
    let views = match outreach_sync::store::open(settings).await {
        Ok(pool) => {
            let views = outreach_sync::sender::views(&pool, &settings.destination)
                .await
                .unwrap_or_default();
            pool.close().await;
            views
        }
        Err(_) => Vec::new(),
    };
    let kept = |name: &str| {
        views
            .iter()
            .find(|v| v.name == name)
            .map(|v| {
                format!(
                    "{} sent, {} unmatched, {} refused",
                    v.sent, v.unmatched, v.refused
                )
            })
            .unwrap_or_default()
    };
    println!(
        "VAN received {} \"Do Not Text\" canvass responses and holds {opted_out} phones opted out ({})",
        van.canvass_responses.len(),
        kept("van")
    );
    println!(
        "Action Network holds {unsubscribed} numbers unsubscribed ({})",
        kept("action-network")
    );
    if views.iter().any(|v| v.unmatched > 0) {
        println!(
            "  (unmatched: leads with no VanID custom field; `outreach-sync destinations outcomes van --state unmatched` lists them)"
        );
    }
    super::warehouse::print(settings).await;
}

/// The compliance report's totals for the run: when the service and `crm` had each opt-out
/// (the full report: `outreach-sync report compliance`).
pub(super) async fn print_compliance(settings: &Settings) -> anyhow::Result<()> {
    use outreach_sync::compliance::{self, Items, Rules, Window};
    let rules = std::sync::Arc::new(Rules::of(settings)?);
    let now = chrono::Utc::now();
    let window = Window::parse(None, None, None, &rules.calendar, now)?;
    let pool = outreach_sync::store::open(settings).await?;
    let items = Items::new(pool.clone(), rules.clone(), window.clone(), now);
    let report = compliance::summarize(items, &rules, &window).await?;
    pool.close().await;
    let t = &report.totals;
    let slowest: Vec<String> = report
        .destinations
        .iter()
        .map(|d| match d.max_secs {
            Some(secs) => format!("{} at most {secs:.1} s after", d.name),
            None => format!("{} none yet", d.name),
        })
        .collect();
    println!(
        "compliance: {} opt-outs, {} honoured everywhere within the deadline ({}), {} pending, {} overdue, {} unreachable in a system of record (no VAN ID); {} messages sent after an opt-out",
        t.opt_outs,
        t.honoured,
        slowest.join(", "),
        t.pending,
        t.overdue,
        t.unreachable,
        t.sent_after_opt_out
    );
    if t.account_wide > 0 {
        println!(
            "  ({} of the opt-outs are account-wide, organization *: held by the caller in each account, the one it was given in too; the service and VAN had each through the entries of its leads)",
            t.account_wide
        );
    }
    if t.pending > 0 {
        println!(
            "  (the final pass ran after the daemon stopped: `crm` never got what it recorded, and shows it as pending)"
        );
    }
    Ok(())
}
