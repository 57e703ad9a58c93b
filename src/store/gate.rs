//! The write gate: SQLite lets one writer in at a time, and one that finds the file locked
//! polls with growing sleeps, so the writers of one database file take turns here instead,
//! in the process, where a turn is handed over the moment it is free.
//!
//! Ingest comes first: the outbox writer waits for the turn of whoever holds it and for no
//! one else. Every other writer (the worker, imports, a reconciliation page, retention, a
//! local change) queues behind the others of its kind, one of them at a time waiting beside
//! ingest, and holds the turn for one bounded transaction. So an acknowledgement waits at
//! most one such transaction, however many writers queue.
//!
//! A writer takes its turn only once it holds its connection: nothing waits for a pooled
//! connection while holding the gate (the pool may be lent out to long reads).
//!
//! PostgreSQL has row locks and no such gate.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use tokio::sync::OwnedMutexGuard;

/// The gate of one database file.
#[derive(Debug, Default)]
pub struct WriteGate {
    /// Held by the writer whose turn it is.
    turn: Arc<tokio::sync::Mutex<()>>,
    /// Held by the one writer other than ingest that is waiting for (or holding) the turn;
    /// the others of its kind wait here, behind it.
    queue: Arc<tokio::sync::Mutex<()>>,
    /// Ingest writers waiting for the turn.
    ingest_waiting: Arc<AtomicUsize>,
}

/// A writer's turn: the database's write lock is its own until it is dropped.
#[derive(Debug)]
pub struct Turn {
    // Dropped in this order: the turn first, so that ingest (waiting on it) goes next.
    _turn: OwnedMutexGuard<()>,
    _queue: Option<OwnedMutexGuard<()>>,
    /// Ingest writers waiting for it (none for ingest's own turn).
    ingest_waiting: Option<Arc<AtomicUsize>>,
}

impl Turn {
    /// Whether ingest is waiting for this turn: a writer that can end its transaction
    /// early (an import between slices of its list) commits now and queues again.
    pub fn wanted_by_ingest(&self) -> bool {
        self.ingest_waiting
            .as_ref()
            .is_some_and(|waiting| waiting.load(Ordering::Acquire) > 0)
    }
}

/// Every gate of the process, by database file: a pool and a dedicated connection to the
/// same file share one.
static GATES: LazyLock<Mutex<HashMap<PathBuf, Weak<WriteGate>>>> = LazyLock::new(Default::default);

impl WriteGate {
    /// The gate of the database file at `path`.
    pub fn of(path: &Path) -> Arc<WriteGate> {
        let mut gates = GATES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(gate) = gates.get(path).and_then(Weak::upgrade) {
            return gate;
        }
        gates.retain(|_, gate| gate.strong_count() > 0);
        let gate = Arc::new(WriteGate::default());
        gates.insert(path.to_owned(), Arc::downgrade(&gate));
        gate
    }

    /// Ingest's turn: after whoever holds it now, before anyone who queues.
    pub async fn first(&self) -> Turn {
        let _waiting = Waiting::on(&self.ingest_waiting);
        Turn {
            _turn: self.turn.clone().lock_owned().await,
            _queue: None,
            ingest_waiting: None,
        }
    }

    /// Any other writer's turn: after the writers that queued before it, and after ingest
    /// when it is waiting. The turn is handed on once to a waiting ingest (the lock is
    /// fair: letting go of it gives it to the first in line), and not again, so that a
    /// steady stream of deliveries never starves the others: they alternate.
    pub async fn queued(&self) -> Turn {
        let queue = self.queue.clone().lock_owned().await;
        let mut turn = self.turn.clone().lock_owned().await;
        if self.ingest_waiting.load(Ordering::Acquire) > 0 {
            drop(turn);
            turn = self.turn.clone().lock_owned().await;
        }
        Turn {
            _turn: turn,
            _queue: Some(queue),
            ingest_waiting: Some(self.ingest_waiting.clone()),
        }
    }
}

/// Counts an ingest writer as waiting while it lives (a cancelled wait is uncounted too).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn on(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn ingest_waits_for_the_writer_holding_the_turn_and_for_no_writer_queued_after_it() {
        let gate = Arc::new(WriteGate::default());
        let holding = gate.queued().await;
        // Two more writers queue behind the one holding the turn.
        let (order_tx, mut order) = tokio::sync::mpsc::unbounded_channel();
        for name in ["import", "retention"] {
            let (gate, order_tx) = (gate.clone(), order_tx.clone());
            tokio::spawn(async move {
                let _turn = gate.queued().await;
                let _ = order_tx.send(name);
            });
        }
        tokio::task::yield_now().await;
        let ingest = {
            let (gate, order_tx) = (gate.clone(), order_tx.clone());
            tokio::spawn(async move {
                let _turn = gate.first().await;
                let _ = order_tx.send("ingest");
            })
        };
        tokio::task::yield_now().await;
        drop(holding);
        let mut seen = Vec::new();
        for _ in 0..3 {
            let next = tokio::time::timeout(Duration::from_secs(5), order.recv()).await;
            seen.push(next.ok().flatten().unwrap_or("none"));
        }
        let _ = ingest.await;
        assert_eq!(
            seen[0], "ingest",
            "ingest goes right after the holder: {seen:?}"
        );
        assert_eq!(
            &seen[1..],
            ["import", "retention"],
            "the others in their order"
        );
    }

    #[tokio::test]
    async fn a_queued_writer_sees_when_ingest_waits_for_its_turn_and_ingest_goes_next() {
        let gate = Arc::new(WriteGate::default());
        let import = gate.queued().await;
        assert!(!import.wanted_by_ingest(), "nobody waits yet");
        let ingest = {
            let gate = gate.clone();
            tokio::spawn(async move {
                let turn = gate.first().await;
                // Ingest's own turn is never asked to end early.
                turn.wanted_by_ingest()
            })
        };
        tokio::time::timeout(Duration::from_secs(5), async {
            while !import.wanted_by_ingest() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the holder sees ingest waiting");
        drop(import);
        let ingest_asked = tokio::time::timeout(Duration::from_secs(5), ingest)
            .await
            .expect("ingest has its turn once the holder lets go")
            .expect("the ingest task");
        assert!(!ingest_asked);
        assert!(!gate.queued().await.wanted_by_ingest(), "and waits no more");
    }

    #[test]
    fn a_pool_and_a_connection_to_the_same_file_share_one_gate() {
        let a = WriteGate::of(Path::new("/tmp/gate-test-a.db"));
        let again = WriteGate::of(Path::new("/tmp/gate-test-a.db"));
        let other = WriteGate::of(Path::new("/tmp/gate-test-b.db"));
        assert!(Arc::ptr_eq(&a, &again));
        assert!(!Arc::ptr_eq(&a, &other));
    }
}
