//! The reconciler's cron schedule: a pass at start if configured, then one per tick, a tick
//! skipped while another pass of the same organizations runs anywhere.

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{PassRefused, PassRequest, Reconciler};

impl Reconciler {
    /// Runs a pass at start (if configured) and on the cron schedule until `shutdown`.
    pub async fn run_scheduled(self, shutdown: CancellationToken) {
        if self.settings.on_start {
            self.run_scheduled_pass(&shutdown).await;
        }
        if self.settings.schedule.is_disabled() {
            shutdown.cancelled().await;
            return;
        }
        let ticks = TaskTracker::new();
        let scheduler = match self.scheduler(shutdown.clone(), ticks.clone()).await {
            Ok(scheduler) => scheduler,
            Err(error) => {
                tracing::error!(%error, "cannot start the reconciliation schedule");
                shutdown.cancelled().await;
                return;
            }
        };
        shutdown.cancelled().await;
        let mut scheduler = scheduler;
        if let Err(error) = scheduler.shutdown().await {
            tracing::warn!(%error, "stopping the reconciliation schedule");
        }
        // The daemon closes its database once this returns: every tick that fired is done
        // first. A pass in progress stops at its next page boundary, its cursor saved; a
        // tick that fired during the stop starts none.
        ticks.close();
        ticks.wait().await;
        let _ = self.running.lock().await;
    }

    /// A scheduled pass over everything, unless the daemon is stopping; a refusal only
    /// skips this tick.
    async fn run_scheduled_pass(&self, shutdown: &CancellationToken) {
        if shutdown.is_cancelled() {
            return;
        }
        match self.run_pass(&PassRequest::default(), shutdown).await {
            Ok(_) => {}
            Err(PassRefused::Running(held)) => {
                tracing::info!(%held, "another reconciliation pass is running; this tick is skipped");
            }
            Err(error) => tracing::error!(%error, "cannot start a reconciliation pass"),
        }
    }

    /// The schedule, started; each tick's pass runs under `ticks`.
    async fn scheduler(
        &self,
        shutdown: CancellationToken,
        ticks: TaskTracker,
    ) -> Result<tokio_cron_scheduler::JobScheduler, tokio_cron_scheduler::JobSchedulerError> {
        let scheduler = tokio_cron_scheduler::JobScheduler::new().await?;
        let reconciler = self.clone();
        let job =
            tokio_cron_scheduler::Job::new_async(self.settings.schedule.as_str(), move |_, _| {
                let reconciler = reconciler.clone();
                let shutdown = shutdown.clone();
                Box::pin(
                    ticks.track_future(
                        async move { reconciler.run_scheduled_pass(&shutdown).await },
                    ),
                )
            })?;
        scheduler.add(job).await?;
        scheduler.start().await?;
        Ok(scheduler)
    }
}
