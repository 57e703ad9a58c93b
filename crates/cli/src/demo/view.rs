//! The demo's live view: one row of figures every few seconds, each column counting what its
//! heading says.

use outreach_sync_sandbox::{DeliveryCounts, RunningSandbox};

use super::differences::{ConsentDifferences, consent_differences_in};
use outreach_sync::ledger;
use outreach_sync::store::{DemoStore as _, Pool};

/// What the columns count, printed once above them.
pub(super) const LEGEND: &str = concat!(
    "  webhook events: one per change the service announces (a consent, a message status);\n",
    "    each is dropped, delivered, waiting (queued, delayed or being retried) or given up,\n",
    "    so events = dropped + delivered + waiting + gave up. twice: events sent twice.\n",
    "  stored: deliveries the daemon committed, one per delivered event (a second copy is\n",
    "    answered \"duplicate\" and stores nothing), and the registration's 2 mock events;\n",
    "    applied: of those, applied to the mirror.\n",
    "  differ: leads whose consent in the mirror is not the service's right now (a lead not\n",
    "    mirrored yet counts). A reconciliation pass brings it to 0; webhooks dropped since\n",
    "    raise it.",
);

/// One row of the view, read at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    /// What became of the service's webhook events (the sandbox's counters).
    pub webhooks: DeliveryCounts,
    /// Deliveries the daemon committed to its outbox.
    pub stored: i64,
    /// Of `stored`: applied to the mirror and ledger.
    pub applied: i64,
    /// Of `stored`: quarantined (verified but not understood).
    pub quarantined: i64,
    /// Consent ledger entries.
    pub ledger: i64,
    /// Reconciliation passes finished.
    pub passes: i64,
    /// Consent differences those passes found and repaired.
    pub repaired: i64,
    /// The mirror beside the service, now.
    pub differences: ConsentDifferences,
}

impl Row {
    /// Reads the sandbox's counters and truth, then the daemon's database.
    pub async fn read(
        sandbox: &RunningSandbox,
        pool: impl Into<Pool>,
    ) -> Result<Row, outreach_sync::store::Error> {
        Self::read_in(sandbox, pool, None).await
    }

    /// [`Row::read`], the mirror compared being the account `account`'s (the sandbox's).
    pub async fn read_in(
        sandbox: &RunningSandbox,
        pool: impl Into<Pool>,
        account: Option<&str>,
    ) -> Result<Row, outreach_sync::store::Error> {
        let pool = pool.into();
        let webhooks = sandbox.delivery_counts();
        let leads = sandbox.leads();
        let status = ledger::status(&pool).await?;
        let totals = pool.pass_totals().await?;
        Ok(Row {
            webhooks,
            stored: status.applied + status.backlog + status.quarantined,
            applied: status.applied,
            quarantined: status.quarantined,
            ledger: status.ledger_entries,
            passes: totals.passes,
            repaired: totals.repaired,
            differences: consent_differences_in(&pool, account, &leads).await?,
        })
    }

    /// The row under [`header`], `label` in the first column (seconds, or "final").
    pub fn line(&self, label: &str) -> String {
        let w = &self.webhooks;
        format!(
            "{label:>6}  {:>7} {:>8} {:>10} {:>8} {:>8} {:>6}  {:>7} {:>8} {:>7}  {:>7} {:>9}  {:>7}",
            w.events,
            w.dropped,
            w.delivered,
            w.waiting,
            w.gave_up,
            w.duplicated,
            self.stored,
            self.applied,
            self.ledger,
            self.passes,
            self.repaired,
            self.differences.total(),
        )
    }
}

/// The two heading lines of the view.
pub(super) fn header() -> String {
    let groups = format!(
        "{:6}  {:<52}  {:<24}  {:<17}  {:>7}",
        "", "webhook events of the service", "the daemon", "reconciliation", "mirror"
    );
    let columns = format!(
        "{:>6}  {:>7} {:>8} {:>10} {:>8} {:>8} {:>6}  {:>7} {:>8} {:>7}  {:>7} {:>9}  {:>7}",
        "time",
        "events",
        "dropped",
        "delivered",
        "waiting",
        "gave up",
        "twice",
        "stored",
        "applied",
        "ledger",
        "passes",
        "repaired",
        "differ"
    );
    format!("{groups}\n{columns}")
}
