//! "The ledger grew": the wake-up of everything that follows the ledger (subscriber senders,
//! the SSE stream, `wait=` on the change feed), so that a new entry is on its way at once
//! instead of at the next poll.
//!
//! Three sources raise it:
//! - every writer of this process, right after a commit that may have appended entries
//!   ([`ledger_grew`]);
//! - on PostgreSQL, the commits of every replica: a trigger on the ledger `NOTIFY`s
//!   [`PG_CHANNEL`] in the appending transaction (delivered at commit; see the migration
//!   `ledger_notify`) and the storage layer's listener (`store::Pool::listen_to_replicas`)
//!   turns that into the same wake-up here;
//! - nothing else: followers still look again every [`FALLBACK_POLL`], which covers writers
//!   in other processes on SQLite (the CLI's `opt-out`) and a listener that is reconnecting.
//!
//! A wake-up carries no data: the follower reads the ledger after it. Spurious wake-ups
//! (another database in the same process, as in tests) only cost that read.

use std::sync::LazyLock;
use std::time::Duration;

use tokio::sync::watch;

/// The PostgreSQL notification channel the ledger's trigger notifies (its migration names it too).
pub const PG_CHANNEL: &str = "outreach_sync_ledger";
/// Longest a follower waits without a wake-up before reading the ledger again.
pub const FALLBACK_POLL: Duration = Duration::from_secs(1);

/// A generation counter: a change of value is the wake-up.
static GROWN: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::Sender::new(0));

/// Wakes every follower of the ledger in this process.
pub fn ledger_grew() {
    GROWN.send_modify(|generation| *generation = generation.wrapping_add(1));
}

/// A follower's view of the signal. Take it *before* reading the ledger: a commit between
/// the read and [`Follower::wait`] then still ends the wait at once.
pub struct Follower(watch::Receiver<u64>);

impl Follower {
    pub fn new() -> Self {
        let mut receiver = GROWN.subscribe();
        receiver.mark_unchanged();
        Self(receiver)
    }

    /// Waits until the ledger may have grown since the last wait (or since [`Follower::new`]),
    /// or `at_most`, whichever comes first.
    pub async fn wait(&mut self, at_most: Duration) {
        // The sender is static, so `changed` cannot fail; a timeout is as good as a wake-up.
        let _ = tokio::time::timeout(at_most, self.0.changed()).await;
        self.0.mark_unchanged();
    }
}

impl Default for Follower {
    fn default() -> Self {
        Self::new()
    }
}
