//! The daemon: binds its listeners, starts its tasks under one supervisor, and stops them
//! in order.

mod reload;
mod supervisor;
/// The tasks the supervisor runs, and the routers of the listeners.
mod tasks;
use tasks::{
    admin_router, ingest_router, serve_ingest, supervise_admin, supervise_leader_work,
    supervise_ledger_listener, supervise_reload, supervise_worker,
};

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
use crate::metrics::Metrics;
use crate::model::AccountId;
use crate::outbox::{OutboxState, OutboxWriter};
use crate::settings::{Account, AdminToken, Live, Settings};
use crate::signature::Verifier;
use crate::store::{Pool, ReadStore as _};
use crate::{outbox, upstream};

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
    /// Each account served with its service client (an account without one is neither
    /// reconciled nor pushed to).
    clients: Vec<(Account, ServiceClient)>,
    tasks: Supervisor,
    senders: crate::sender::Running,
    /// Whether `run_until_stopped` starts the worker (see [`Application::without_worker`]).
    worker: bool,
    /// Each account's ingest route and its verifier, replaced by a reload.
    routes: Vec<crate::ingest::AccountRoute>,
    /// The admin tokens in force, replaced by a reload.
    tokens: Live<Vec<AdminToken>>,
    /// The destinations' API keys in force, replaced by a reload.
    destination_keys: Live<crate::settings::DestinationKeys>,
    /// The sources in force, replaced by a reload.
    sources: Live<Vec<crate::settings::SourceSettings>>,
    /// The callers in force (reloaded): who an opt-out binds.
    callers: Live<Vec<crate::model::caller::Caller>>,
    /// How the writer and the worker apply (its sources are `sources`).
    policy: crate::apply::Policy,
    /// `Some(--config)`: reload on SIGHUP (see [`Application::reload_on_hangup`]).
    reload: Option<Option<PathBuf>>,
    /// This daemon's metrics, counted by every part of it and shown on its `/metrics`.
    metrics: Arc<Metrics>,
}

impl Application {
    /// Opens and migrates the database, starts the outbox writer and binds the listeners
    /// (`127.0.0.1:0` in tests picks a free port).
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        settings.validate_scopes()?;
        let pool = crate::store::open(&settings)
            .await
            .context("opening and migrating the database")?;
        let metrics = Arc::new(Metrics::new());
        let state = Arc::new(OutboxState::default());
        state.set_pending(outbox::count_pending(&pool).await?);
        // One policy for the writer and the worker: its sources are the ones a reload
        // replaces, and ingest verifies replies posted to a source against them.
        let policy = crate::apply::Policy::of(&settings, crate::systems::post_reader_of);
        let (writer, writer_task) =
            OutboxWriter::start(&settings, policy.clone(), state, metrics.clone())
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
        let accounts = settings.accounts()?;
        let ids: Vec<AccountId> = accounts.iter().map(|account| account.id.clone()).collect();
        metrics.serving(&ids);
        let clients = service_clients(&accounts, &pool, &metrics);
        let routes = accounts
            .into_iter()
            .map(|account| {
                let verifier = Live::new(Verifier::new(&account.webhook));
                (account, verifier)
            })
            .collect();
        Ok(Self {
            pool,
            ingest_listener,
            ingest_addr,
            admin_listener,
            admin_addr,
            limits: (ingest_limits, admin_limits),
            writer,
            writer_task,
            clients,
            tasks: Supervisor::default(),
            senders: crate::sender::Running::default(),
            worker: true,
            routes,
            tokens: Live::new(settings.admin.named_tokens()),
            destination_keys: Live::new(crate::settings::keys_of(&settings.destination)),
            sources: policy.sources.sources.clone(),
            callers: Live::new(settings.callers()?),
            policy,
            reload: None,
            metrics,
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
            self.routes
                .iter()
                .map(|(account, verifier)| (account.id.clone(), verifier.clone()))
                .collect(),
            self.tokens.clone(),
        )
        .with_destination_keys(self.destination_keys.clone())
        .with_sources(self.sources.clone())
        .with_callers(self.callers.clone())
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
    pub fn senders(&self) -> crate::sender::Running {
        self.senders.clone()
    }

    /// This daemon's metrics (what its `/metrics` shows), shared with every part of it.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
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
            clients,
            mut tasks,
            senders,
            worker,
            routes,
            tokens,
            destination_keys: keys,
            sources,
            callers,
            policy,
            reload: _,
            metrics,
        } = self;
        let served: Vec<AccountId> = routes.iter().map(|(a, _)| a.id.clone()).collect();
        spawn_warning_of_accounts_not_served(served.clone(), &pool);
        // The worker, reconciler and pusher loops log their errors and go on, so only a
        // panic ends them early; the admin listener can fail as a whole, and is restarted.
        if worker {
            supervise_worker(&mut tasks, &pool, &writer, policy.clone(), &metrics);
        }
        // Local changes queued through the admin API wake the pusher at once.
        let wake = Arc::new(tokio::sync::Notify::new());
        let leader = (clients, wake.clone(), senders.clone(), metrics.clone());
        let leaders_sources = (keys, sources.clone(), callers.clone());
        supervise_leader_work(&mut tasks, &pool, &settings, leader, leaders_sources).await?;
        supervise_ledger_listener(&mut tasks, &pool);
        let long_reads = crate::store::open_long_reads(&settings).await?;
        let admin = admin_router(
            (&settings, served),
            (&pool, long_reads),
            tokens,
            wake,
            &writer,
            (senders, metrics.clone()),
            (&shutdown, sources.clone(), callers.clone()),
        );
        supervise_admin(
            &mut tasks,
            admin_listener,
            admin,
            admin_limits,
            metrics.clone(),
        )?;
        tracing::info!(%admin_addr, "admin listening");
        log_listening(&routes, ingest_addr);
        let ingest = (routes, policy.sources, &settings.ingest);
        let (router, keep_rejections) = ingest_router(ingest, writer, &pool, &metrics, &shutdown)?;
        if let Some(reloader) = reloader {
            supervise_reload(&mut tasks, reloader)?;
        }
        if let Some(interval) = sd_notify::watchdog_enabled() {
            tasks.add("watchdog", move |s| watchdog(interval / 2, s).map(Ok));
        }
        // The listeners are bound and every task starts now: tell systemd (no-op outside it).
        notify_systemd(sd_notify::NotifyState::Ready);
        let ingest = serve_ingest(
            ingest_listener,
            router,
            (ingest_limits, metrics),
            shutdown.clone(),
            keep_rejections,
            writer_task,
        );
        run_to_the_end(tasks, ingest, pool, &shutdown).await
    }
}

/// Runs `tasks` beside `ingest` (the ingest listener) until `shutdown` and both have
/// finished (then closes `pool`), or [`STOP_LIMIT`] after `shutdown`: the daemon's outcome
/// (a task's failure, if one failed).
async fn run_to_the_end(
    mut tasks: Supervisor,
    ingest: impl Future<Output = ()>,
    pool: Pool,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let finish = async {
        let ((), supervised) = tokio::join!(ingest, tasks.run(shutdown));
        pool.close().await;
        supervised
    };
    let finished = within_stop_limit(finish, shutdown).await;
    finished.unwrap_or_else(|| {
        tracing::warn!(limit = ?STOP_LIMIT, "requests or tasks still open after the stop request; exiting without them");
        tasks.take_failure().map_or(Ok(()), Err)
    })
}

/// What `finish` ends with, or `None` once [`STOP_LIMIT`] has passed since `shutdown`. A
/// client that never finishes its request (or an upstream call that hangs) must not hold
/// the stop past the promised bound: what is still open then is dropped, which is as safe
/// as a crash (nothing unacknowledged was promised).
async fn within_stop_limit<T>(
    finish: impl Future<Output = T>,
    shutdown: &CancellationToken,
) -> Option<T> {
    tokio::select! {
        result = finish => Some(result),
        _ = async {
            shutdown.cancelled().await;
            tokio::time::sleep(STOP_LIMIT).await;
        } => None,
    }
}

/// Each account's service client, counted in `metrics`; an account whose client cannot be
/// made is left out (and said so).
fn service_clients(
    accounts: &[Account],
    pool: &Pool,
    metrics: &Arc<Metrics>,
) -> Vec<(Account, ServiceClient)> {
    let mut clients = Vec::new();
    for account in accounts {
        match upstream::service_client(account, pool, metrics.clone()) {
            Ok(client) => clients.push((account.clone(), client)),
            Err(error) => tracing::warn!(
                account = %account.id,
                %error,
                "no service client: reconciliation and pushes of this account are off"
            ),
        }
    }
    clients
}

/// Reads the ledger's accounts beside the start (one read of the whole ledger, never in
/// its way) and warns of those not served ([`warn_of_accounts_not_served`]).
fn spawn_warning_of_accounts_not_served(served: Vec<AccountId>, pool: &Pool) {
    let ledger = pool.clone();
    tokio::spawn(async move {
        if let Err(error) = warn_of_accounts_not_served(&served, &ledger).await {
            tracing::warn!(error = %format!("{error:#}"), "the ledger's accounts could not be read");
        }
    });
}

/// Warns of each account the ledger holds entries of that no `[[account]]` serves (the
/// `default` of a configuration that moved from `[service]` to a named `[[account]]`): its
/// states are no longer reconciled, pushed or looked up by default.
async fn warn_of_accounts_not_served(served: &[AccountId], pool: &Pool) -> anyhow::Result<()> {
    for account in pool.ledger_accounts().await? {
        if !served.iter().any(|id| *id == account) {
            let served: Vec<&str> = served.iter().map(AccountId::as_str).collect();
            tracing::warn!(
                account,
                served = served.join(", "),
                "the ledger holds entries of an account no [[account]] serves: its numbers are \
                 neither reconciled nor pushed; to serve them, name an [[account]] so (the \
                 records of a configuration with [service] are of the account `default`)"
            );
        }
    }
    Ok(())
}

/// Says where each account's deliveries are received.
fn log_listening(routes: &[crate::ingest::AccountRoute], ingest_addr: SocketAddr) {
    for (account, _) in routes {
        let (account, path) = (&account.id, &account.ingest_path);
        tracing::info!(%ingest_addr, %path, %account, "ingest listening");
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
