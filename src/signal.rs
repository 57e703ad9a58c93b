//! "The ledger grew": the wake-up of everything that follows the ledger (subscriber senders,
//! the SSE stream, `wait=` on the change feed), so that a new entry is on its way at once
//! instead of at the next poll.
//!
//! Three sources raise it:
//! - every writer of this process, right after a commit that may have appended entries
//!   ([`ledger_grew`]);
//! - on PostgreSQL, the commits of every replica: a trigger on the ledger `NOTIFY`s
//!   [`PG_CHANNEL`] in the appending transaction (delivered at commit; see the migration
//!   `ledger_notify`) and [`listen`] turns that into the same wake-up here;
//! - nothing else: followers still look again every [`FALLBACK_POLL`], which covers writers
//!   in other processes on SQLite (the CLI's `opt-out`) and a listener that is reconnecting.
//!
//! A wake-up carries no data: the follower reads the ledger after it. Spurious wake-ups
//! (another database in the same process, as in tests) only cost that read.

use std::sync::LazyLock;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The PostgreSQL notification channel the ledger's trigger notifies (its migration names it too).
pub const PG_CHANNEL: &str = "outreach_sync_ledger";
/// Longest a follower waits without a wake-up before reading the ledger again.
pub const FALLBACK_POLL: Duration = Duration::from_secs(1);
/// Pause before listening again after the listening connection failed.
const RELISTEN_PAUSE: Duration = Duration::from_secs(1);

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

/// Turns the `NOTIFY`s of every replica's appenders into wake-ups here, until `shutdown`.
/// A lost connection is logged and listened to again; meanwhile followers poll.
pub async fn listen(pool: sqlx::PgPool, shutdown: CancellationToken) {
    loop {
        let listened = tokio::select! {
            _ = shutdown.cancelled() => return,
            result = listen_once(&pool) => result,
        };
        if let Err(error) = listened {
            tracing::warn!(%error, "not listening to the ledger's notifications; followers poll meanwhile");
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(RELISTEN_PAUSE) => {}
        }
    }
}

async fn listen_once(pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
    let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
    listener.listen(PG_CHANNEL).await?;
    // What was committed before this connection listened is read now.
    ledger_grew();
    loop {
        // `None`: the connection was lost and is listening again; what was notified in
        // between is lost, so the followers read the ledger anyway.
        listener.try_recv().await?;
        ledger_grew();
    }
}
