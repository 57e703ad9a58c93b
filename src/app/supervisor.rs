//! The one supervisor of the daemon's background tasks: a task that fails is restarted
//! after a growing delay; a task that panics stops the daemon, so that systemd restarts
//! the whole process rather than ingest acknowledging deliveries nobody applies.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Wait before restarting a task after its first failure; doubled after each failure in a
/// row, up to [`MAX_RESTART_DELAY`].
pub const FIRST_RESTART_DELAY: Duration = Duration::from_secs(1);
/// Longest wait before a restart.
pub const MAX_RESTART_DELAY: Duration = Duration::from_secs(60);
/// A run this long before its failure counts as healthy: the next restart waits
/// [`FIRST_RESTART_DELAY`] again, not the delay reached by failures long past.
pub const HEALTHY_RUN: Duration = Duration::from_secs(300);

/// Makes a new run of a task from the shutdown token.
type Factory = Box<dyn FnMut(CancellationToken) -> BoxFuture<'static, anyhow::Result<()>> + Send>;

struct Task {
    name: &'static str,
    factory: Factory,
    /// The wait before the next restart.
    delay: Duration,
    /// When the current run started (or starts, once its delay is over).
    started: Instant,
}

/// Background tasks under one cancellation token. Each end of a task is logged once: a
/// run that returns `Ok` stopped (it does when the token is cancelled); a run that
/// returns `Err` failed as a whole and the task is restarted with backoff (unless the
/// daemon is stopping); a run that panics cancels the token, and [`Supervisor::run`]
/// returns the panic once every other task has stopped.
#[derive(Default)]
pub struct Supervisor {
    /// Added, not started yet.
    added: Vec<Task>,
    running: HashMap<Id, Task>,
    set: JoinSet<anyhow::Result<()>>,
    /// The first task that ended abnormally.
    failure: Option<anyhow::Error>,
}

impl Supervisor {
    /// Adds a task, started by [`Supervisor::run`]. `factory` makes one run of the task
    /// each time it is called, at the start and at every restart.
    pub fn add<F, Fut>(&mut self, name: &'static str, mut factory: F)
    where
        F: FnMut(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        self.added.push(Task {
            name,
            factory: Box::new(move |shutdown| factory(shutdown).boxed()),
            delay: FIRST_RESTART_DELAY,
            started: Instant::now(),
        });
    }

    /// Starts the tasks added and supervises them until every one has stopped, which they
    /// do once `shutdown` is cancelled (by the caller, or here after a panic). An error if
    /// a task panicked.
    pub async fn run(&mut self, shutdown: &CancellationToken) -> anyhow::Result<()> {
        for task in std::mem::take(&mut self.added) {
            self.start(task, Duration::ZERO, shutdown);
        }
        while let Some(joined) = self.set.join_next_with_id().await {
            match joined {
                Ok((id, result)) => {
                    if let Some(task) = self.running.remove(&id) {
                        self.ended(task, result, shutdown);
                    }
                }
                Err(error) => {
                    let name = self.running.remove(&error.id()).map_or("?", |t| t.name);
                    tracing::error!(task = name, %error, "task ended abnormally; stopping the daemon");
                    if self.failure.is_none() {
                        let failure = anyhow::Error::new(error)
                            .context(format!("the {name} task ended abnormally"));
                        self.failure = Some(failure);
                    }
                    shutdown.cancel();
                }
            }
        }
        self.take_failure().map_or(Ok(()), Err)
    }

    /// The abnormal end seen so far, for a caller that gave up waiting for [`Self::run`].
    pub(crate) fn take_failure(&mut self) -> Option<anyhow::Error> {
        self.failure.take()
    }

    fn ended(&mut self, mut task: Task, result: anyhow::Result<()>, shutdown: &CancellationToken) {
        let name = task.name;
        match result {
            Ok(()) => tracing::info!(task = name, "stopped"),
            Err(error) if shutdown.is_cancelled() => {
                tracing::error!(task = name, error = %format!("{error:#}"), "task failed while stopping");
            }
            Err(error) => {
                if task.started.elapsed() >= HEALTHY_RUN {
                    task.delay = FIRST_RESTART_DELAY;
                }
                let delay = task.delay;
                task.delay = (delay * 2).min(MAX_RESTART_DELAY);
                tracing::error!(task = name, error = %format!("{error:#}"), restart_in = ?delay, "task failed; restarting");
                self.start(task, delay, shutdown);
            }
        }
    }

    /// Spawns a new run of `task`, after `delay` unless `shutdown` comes first.
    fn start(&mut self, mut task: Task, delay: Duration, shutdown: &CancellationToken) {
        let run = (task.factory)(shutdown.clone());
        task.started = Instant::now() + delay;
        let handle = if delay.is_zero() {
            self.set.spawn(run)
        } else {
            let shutdown = shutdown.clone();
            self.set.spawn(async move {
                tokio::select! {
                    _ = shutdown.cancelled() => Ok(()),
                    _ = tokio::time::sleep(delay) => run.await,
                }
            })
        };
        self.running.insert(handle.id(), task);
    }
}
