//! The daemon: binds its listeners, starts its tasks under one supervisor, and stops them
//! in order.

mod reload;
mod supervisor;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use futures::FutureExt as _;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use self::reload::{Hangups, Reloaded, Reloader};
pub use self::supervisor::{FIRST_RESTART_DELAY, HEALTHY_RUN, MAX_RESTART_DELAY, Supervisor};
use crate::client::ServiceClient;
use crate::listener::Limits;
use crate::metrics::Listener;
use crate::outbox::{OutboxState, OutboxWriter};
use crate::pusher::Pusher;
use crate::reconcile::Reconciler;
use crate::replica::Replica;
use crate::settings::{AdminToken, Live, Settings};
use crate::signature::Verifier;
use crate::store::Pool;
use crate::worker::Worker;
use crate::{admin, ingest, outbox, upstream};

/// Longest wait, after a stop request, for in-flight requests and tasks to finish; below
/// the 10 s promised to systemd (TimeoutStopSec=15 in the unit).
const STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(8);

/// A built daemon: listeners bound, database migrated, writer running.
pub struct Application {
    settings: Settings,
    pool: Pool,
    ingest_listener: TcpListener,
    ingest_addr: SocketAddr,
    admin_listener: TcpListener,
    admin_addr: SocketAddr,
    /// The listeners' limits, fitted to the open-file limit.
    limits: (Limits, Limits),
    writer: OutboxWriter,
    writer_task: JoinHandle<()>,
    client: Option<ServiceClient>,
    tasks: Supervisor,
    senders: crate::subscribers::Running,
    /// Whether `run_until_stopped` starts the worker (see [`Application::without_worker`]).
    worker: bool,
    /// The ingest listener's verifier, replaced by a reload.
    verifier: Live<Verifier>,
    /// The admin tokens in force, replaced by a reload.
    tokens: Live<Vec<AdminToken>>,
    /// `Some(--config)`: reload on SIGHUP (see [`Application::reload_on_hangup`]).
    reload: Option<Option<PathBuf>>,
}

impl Application {
    /// Opens and migrates the database, starts the outbox writer and binds the listeners
    /// (`127.0.0.1:0` in tests picks a free port).
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let pool = crate::store::open(&settings)
            .await
            .context("opening and migrating the database")?;
        let state = Arc::new(OutboxState::default());
        state.set_pending(outbox::count_pending(&pool).await?);
        let (writer, writer_task) = OutboxWriter::start(&settings, state)
            .await
            .context("opening the outbox writer")?;
        let bind = settings.ingest_bind();
        let ingest_listener = crate::listener::bind(bind)
            .with_context(|| format!("binding the ingest listener to {bind}"))?;
        let ingest_addr = ingest_listener.local_addr()?;
        let admin_bind = settings.admin_bind();
        let admin_listener = crate::listener::bind(admin_bind)
            .with_context(|| format!("binding the admin listener to {admin_bind} (admin.bind)"))?;
        let admin_addr = admin_listener.local_addr()?;
        let (mut ingest_limits, mut admin_limits) =
            (settings.ingest.limits(), settings.admin.limits());
        crate::listener::fit_descriptors(&mut ingest_limits, &mut admin_limits);
        let client = match upstream::service_client(&settings, &pool) {
            Ok(client) => Some(client),
            Err(error) => {
                tracing::warn!(%error, "no service client: reconciliation and pushes are off");
                None
            }
        };
        Ok(Self {
            pool,
            ingest_listener,
            ingest_addr,
            admin_listener,
            admin_addr,
            limits: (ingest_limits, admin_limits),
            writer,
            writer_task,
            client,
            tasks: Supervisor::default(),
            senders: crate::subscribers::Running::default(),
            worker: true,
            verifier: Live::new(Verifier::new(&settings.webhook)),
            tokens: Live::new(settings.admin.named_tokens()),
            reload: None,
            settings,
        })
    }

    /// Keeps `run_until_stopped` from starting the worker: for measuring the ingest path
    /// alone. The outbox is then left unapplied (deliveries are stored, never applied).
    pub fn without_worker(mut self) -> Self {
        self.worker = false;
        self
    }

    /// Makes `run_until_stopped` reload `[webhook] secrets` and `[admin] tokens` from
    /// `config` (as given to `serve`) on SIGHUP.
    pub fn reload_on_hangup(mut self, config: Option<PathBuf>) -> Self {
        self.reload = Some(config);
        self
    }

    /// What reloads this daemon's secrets and tokens from `config`: SIGHUP's work, for code
    /// embedding the daemon and tests.
    pub fn reloader(&self, config: Option<PathBuf>) -> Reloader {
        Reloader::new(
            config,
            self.settings.clone(),
            self.verifier.clone(),
            self.tokens.clone(),
        )
    }

    /// Runs one more background task beside the daemon's own, under the same supervisor
    /// (see [`Supervisor::add`]); for code embedding the daemon, and tests.
    pub fn supervise<F, Fut>(&mut self, name: &'static str, factory: F)
    where
        F: FnMut(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        self.tasks.add(name, factory);
    }

    /// Where the admin API is served.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Where deliveries are received.
    pub fn ingest_addr(&self) -> SocketAddr {
        self.ingest_addr
    }

    /// The subscribers' senders while this daemon leads, to ask one to try at once; the
    /// handle stays valid across leadership terms.
    pub fn senders(&self) -> crate::subscribers::Running {
        self.senders.clone()
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Serves until `shutdown` is cancelled, then stops accepting, finishes in-flight
    /// requests (each either committed and answered, or refused), lets every task finish
    /// its unit of work, and drains the writer. A task that panics cancels `shutdown`
    /// itself, and the daemon stops the same way but ends with that error.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let reloader = self.reload.clone().map(|config| self.reloader(config));
        let Application {
            settings,
            pool,
            ingest_listener,
            ingest_addr,
            admin_listener,
            admin_addr,
            limits: (ingest_limits, admin_limits),
            writer,
            writer_task,
            client,
            mut tasks,
            senders,
            worker,
            verifier,
            tokens,
            reload: _,
        } = self;
        // The worker, reconciler and pusher loops log their errors and go on, so only a
        // panic ends them early; the admin listener can fail as a whole, and is restarted.
        if worker {
            supervise_worker(&mut tasks, &pool, &writer, &settings);
        }
        // Local changes queued through the admin API wake the pusher at once.
        let wake = Arc::new(tokio::sync::Notify::new());
        let running_senders = senders.clone();
        supervise_leader_work(&mut tasks, &pool, &settings, client, wake.clone(), senders).await?;
        supervise_ledger_listener(&mut tasks, &pool);
        let long_reads = crate::store::open_long_reads(&settings).await?;
        let admin = admin_router(
            &settings,
            (&pool, long_reads),
            tokens,
            wake,
            &writer,
            running_senders,
            &shutdown,
        );
        supervise_admin(&mut tasks, admin_listener, admin, admin_limits)?;
        tracing::info!(%admin_addr, "admin listening");
        let (router, keep_rejections) =
            ingest_router(&settings, verifier, writer, &pool, &shutdown);
        if let Some(reloader) = reloader {
            supervise_reload(&mut tasks, reloader)?;
        }
        tracing::info!(%ingest_addr, path = %settings.ingest.path, "ingest listening");
        if let Some(interval) = sd_notify::watchdog_enabled() {
            tasks.add("watchdog", move |s| watchdog(interval / 2, s).map(Ok));
        }
        // The listeners are bound and every task starts now: tell systemd (no-op outside it).
        notify_systemd(sd_notify::NotifyState::Ready);
        let ingest = serve_ingest(
            ingest_listener,
            router,
            ingest_limits,
            shutdown.clone(),
            keep_rejections,
            writer_task,
        );
        let finish = async {
            let ((), supervised) = tokio::join!(ingest, tasks.run(&shutdown));
            pool.close().await;
            supervised
        };
        // A client that never finishes its request (or an upstream call that hangs) must not
        // hold the stop past the promised bound: what is still open then is dropped, which
        // is as safe as a crash (nothing unacknowledged was promised).
        let finished = tokio::select! {
            result = finish => Some(result),
            _ = async {
                shutdown.cancelled().await;
                tokio::time::sleep(STOP_LIMIT).await;
            } => None,
        };
        finished.unwrap_or_else(|| {
            tracing::warn!(limit = ?STOP_LIMIT, "requests or tasks still open after the stop request; exiting without them");
            tasks.take_failure().map_or(Ok(()), Err)
        })
    }
}

/// The worker, applying the outbox on every replica.
fn supervise_worker(
    tasks: &mut Supervisor,
    pool: &Pool,
    writer: &OutboxWriter,
    settings: &Settings,
) {
    let worker = Worker::new(
        pool.clone(),
        writer.state().clone(),
        settings.consent.account_sync,
    )
    .with_policy(crate::apply::Policy::of(settings));
    tasks.add("worker", move |shutdown| {
        worker.clone().run(shutdown).map(Ok)
    });
}

/// This replica's heartbeat, and the work that runs on the leader alone while this replica
/// leads: the reconciler's schedule and the pusher (when a client is configured: they talk
/// to the service), the subscribers' senders, and housekeeping.
async fn supervise_leader_work(
    tasks: &mut Supervisor,
    pool: &Pool,
    settings: &Settings,
    client: Option<ServiceClient>,
    wake: Arc<tokio::sync::Notify>,
    running: crate::subscribers::Running,
) -> anyhow::Result<()> {
    let singletons = client.map(|client| {
        (
            Reconciler::new(pool.clone(), client.clone(), &settings.reconcile)
                .with_lease(settings.replica.lease()),
            Pusher::new(pool.clone(), client, wake),
        )
    });
    let subscribers = crate::subscribers::configured(&settings.subscriber);
    let http = crate::subscribers::http_client()
        .context("building the subscribers' HTTP client (timeouts, no redirects)")?;
    let replica = Replica::new(pool.clone(), &settings.replica);
    // Listed in `status` from the start; a database busy just now (another process
    // holding its write lock) must not stop the daemon: the replica's own loop beats
    // again a third of a lease period later.
    if let Err(error) = replica.heartbeat().await {
        tracing::warn!(%error, "cannot register this replica yet; its heartbeat will");
    }
    // The leader's housekeeping needs no service: the chain head's hourly log, and
    // pruning stored deliveries past their retention.
    let pruner = crate::retention::Pruner::new(pool.clone(), &settings.retention)
        .with_pause(crate::retention::PRUNE_PAUSE);
    let pool = pool.clone();
    tasks.add("leader", move |shutdown| {
        let singletons = singletons.clone();
        let subscribers = subscribers.clone();
        let http = http.clone();
        let pool = pool.clone();
        let pruner = pruner.clone();
        let running = running.clone();
        replica
            .clone()
            .run(shutdown, move |stop| {
                let singletons = singletons.clone();
                // Each subscriber is sent to by the leader alone, so in seq order.
                let senders = crate::subscribers::run_listed(
                    pool.clone(),
                    subscribers.clone(),
                    http.clone(),
                    running.clone(),
                    stop.clone(),
                );
                let housekeeping = futures::future::join(
                    crate::ledger::chain::log_head(pool.clone(), stop.clone()),
                    pruner.clone().run(stop.clone()),
                );
                async move {
                    match singletons {
                        Some((reconciler, pusher)) => {
                            tokio::join!(
                                reconciler.run_scheduled(stop.clone()),
                                pusher.run(stop),
                                senders,
                                housekeeping
                            );
                        }
                        None => {
                            tokio::join!(stop.cancelled(), senders, housekeeping);
                        }
                    }
                }
            })
            .map(Ok)
    });
    Ok(())
}

/// Every replica's followers of the ledger wake on every replica's commits (PostgreSQL).
fn supervise_ledger_listener(tasks: &mut Supervisor, pool: &Pool) {
    if pool.shared_by_replicas() {
        let pool = pool.clone();
        tasks.add("ledger-listener", move |shutdown| {
            let pool = pool.clone();
            async move {
                pool.listen_to_replicas(shutdown).await;
                Ok(())
            }
        });
    }
}

/// The admin listener's router: the API and the console, with the tokens in force.
fn admin_router(
    settings: &Settings,
    (pool, long_reads): (&Pool, Pool),
    tokens: Live<Vec<AdminToken>>,
    wake: Arc<tokio::sync::Notify>,
    writer: &OutboxWriter,
    senders: crate::subscribers::Running,
    shutdown: &CancellationToken,
) -> axum::Router {
    admin::router(
        admin::AdminState::new(pool.clone(), Vec::new(), wake)
            .with_long_reads(long_reads)
            .with_tokens(tokens)
            .with_subscribers(settings.subscriber.clone())
            .with_compliance(compliance_rules(settings))
            .with_failed_auth_limit(settings.admin.failed_auth_per_minute)
            .with_outbox(writer.state().clone())
            .with_senders(senders)
            .with_stop(shutdown.clone()),
    )
}

/// The compliance report's rules; the settings were validated, so the defaults stand in only
/// for what validation already refused.
fn compliance_rules(settings: &Settings) -> crate::compliance::Rules {
    crate::compliance::Rules::of(settings).unwrap_or_else(|error| {
        tracing::error!(%error, "[compliance] is not valid; the report uses the defaults");
        crate::compliance::Rules::default()
    })
}

/// Reloads the webhook secrets and admin tokens on every SIGHUP, listened to from now on:
/// before the daemon tells anyone it is ready, since an unheard SIGHUP ends a process.
fn supervise_reload(tasks: &mut Supervisor, reloader: Reloader) -> anyhow::Result<()> {
    let hangups = Hangups::listen().context("listening to SIGHUP")?;
    tasks.add("reload", move |shutdown| {
        reloader.clone().run(hangups.clone(), shutdown).map(Ok)
    });
    Ok(())
}

/// The admin listener. Every run of its task serves on a handle of the one bound socket, so
/// a restart needs no new bind and keeps the port.
fn supervise_admin(
    tasks: &mut Supervisor,
    listener: TcpListener,
    admin: axum::Router,
    limits: Limits,
) -> anyhow::Result<()> {
    let socket = listener
        .into_std()
        .context("taking the admin listener's socket")?;
    tasks.add("admin", move |shutdown| {
        let socket = socket.try_clone();
        let admin = admin.clone();
        async move {
            let socket = socket.context("cloning the admin listener's socket")?;
            let listener =
                TcpListener::from_std(socket).context("registering the admin listener's socket")?;
            crate::listener::serve(listener, admin, limits, Listener::Admin, shutdown).await;
            Ok(())
        }
    });
    Ok(())
}

/// The ingest listener's router, and the task that keeps the sample of refused deliveries it
/// leaves (see [`crate::rejections`]), which ends once `shutdown` is cancelled.
fn ingest_router(
    settings: &Settings,
    verifier: Live<Verifier>,
    writer: OutboxWriter,
    pool: &Pool,
    shutdown: &CancellationToken,
) -> (axum::Router, impl Future<Output = ()> + use<>) {
    let rejections = Arc::new(crate::rejections::Rejections::new(writer.clone()));
    let keep_rejections = {
        let (rejections, stop) = (rejections.clone(), shutdown.clone());
        async move { rejections.keep(stop).await }
    };
    let router = ingest::router(settings, verifier, writer, pool.clone(), rejections);
    (router, keep_rejections)
}

/// Serves deliveries until `shutdown`, then drains the outbox writer: with the router and
/// `keep_rejections` (which ends once `shutdown` is cancelled) gone, the writer ends after
/// its last batch.
async fn serve_ingest(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    shutdown: CancellationToken,
    keep_rejections: impl Future<Output = ()>,
    writer_task: JoinHandle<()>,
) {
    let stopping = {
        let shutdown = shutdown.clone();
        async move {
            shutdown.cancelled().await;
            notify_systemd(sd_notify::NotifyState::Stopping);
        }
    };
    let serve = crate::listener::serve(listener, router, limits, Listener::Ingest, shutdown);
    tokio::join!(serve, stopping, keep_rejections);
    tracing::info!("ingest listener stopped");
    if let Err(error) = writer_task.await {
        tracing::error!(%error, "outbox writer ended abnormally");
    }
}

/// Tells systemd about a state change when run under `Type=notify`; does nothing otherwise.
fn notify_systemd(state: sd_notify::NotifyState<'_>) {
    if let Err(error) = sd_notify::notify(&[state]) {
        tracing::warn!(%error, "cannot notify systemd");
    }
}

/// Pings systemd's watchdog every `every` (half of `WatchdogSec=`) until `shutdown`. A
/// stuck runtime stops the pings and systemd restarts the daemon.
async fn watchdog(every: std::time::Duration, shutdown: CancellationToken) {
    let mut ticker = tokio::time::interval(every.max(std::time::Duration::from_millis(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => notify_systemd(sd_notify::NotifyState::Watchdog),
        }
    }
}

/// A token cancelled by the first SIGTERM or SIGINT.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("stop requested; finishing in-flight work");
        cancel.cancel();
    });
    token
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
