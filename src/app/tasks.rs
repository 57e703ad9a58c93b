//! The daemon's tasks as the supervisor runs them: the worker, the leader's work, the
//! ledger's listener, the reload, and the two listeners with their routers.

use std::future::Future;
use std::sync::Arc;

use anyhow::Context as _;
use futures::FutureExt as _;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Hangups, Reloader, Supervisor, notify_systemd};
use crate::client::ServiceClient;
use crate::listener::Limits;
use crate::metrics::{Listener, Metrics};
use crate::model::AccountId;
use crate::outbox::OutboxWriter;
use crate::pusher::Pusher;
use crate::reconcile::Reconciler;
use crate::replica::Replica;
use crate::settings::{Account, AdminToken, IngestSettings, Live, Settings};
use crate::store::Pool;
use crate::worker::Worker;
use crate::{admin, ingest};

/// The worker, applying the outbox on every replica.
pub(super) fn supervise_worker(
    tasks: &mut Supervisor,
    pool: &Pool,
    writer: &OutboxWriter,
    policy: crate::apply::Policy,
    metrics: &Arc<Metrics>,
) {
    let worker = Worker::new(pool.clone(), writer.state().clone(), policy.account_sync)
        .with_policy(policy)
        .counted_in(metrics.clone());
    tasks.add("worker", move |shutdown| {
        worker.clone().run(shutdown).map(Ok)
    });
}

/// What the leader's work is given besides the database and the settings.
pub(super) type LeaderParts = (
    Vec<(Account, ServiceClient)>,
    Arc<tokio::sync::Notify>,
    crate::sender::Running,
    Arc<Metrics>,
);

/// What the leader's work reads as it is now (reloaded): the destinations' keys, the
/// sources, the callers.
pub(super) type LeadersLive = (
    Live<crate::settings::DestinationKeys>,
    Live<Vec<crate::settings::SourceSettings>>,
    Live<Vec<crate::model::caller::Caller>>,
);

/// This replica's heartbeat, and the work that runs on the leader alone while this replica
/// leads: the reconciler's schedule and the pusher (when a client is configured: they talk
/// to the service), the subscribers' senders, and housekeeping. What it is given: the
/// client, the pusher's wake-up, the senders' list, and the metrics it counts in.
pub(super) async fn supervise_leader_work(
    tasks: &mut Supervisor,
    pool: &Pool,
    settings: &Settings,
    (clients, wake, running, metrics): LeaderParts,
    (keys, sources, callers): LeadersLive,
) -> anyhow::Result<()> {
    // What the sources read back is checked against the destinations' writes (no echo).
    let echoing = readers_of(settings)?;
    let singletons = upstream_work(pool, settings, clients, &wake);
    let sharer = crate::share::Sharer::new(pool.clone(), callers, wake.clone());
    let mut subscribers = crate::sender::configured(&settings.subscriber);
    subscribers.extend(crate::sender::destinations::configured(
        &settings.destination,
        &keys,
        &sources,
    ));
    let http = crate::sender::http_client()
        .context("building the subscribers' HTTP client (timeouts, no redirects)")?;
    let replica = Replica::new(pool.clone(), &settings.replica).counted_in(metrics.clone());
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
        let sharer = sharer.clone();
        let subscribers = subscribers.clone();
        let http = http.clone();
        let pool = pool.clone();
        let pruner = pruner.clone();
        let running = running.clone();
        let metrics = metrics.clone();
        let (sources, echoing) = (sources.clone(), echoing.clone());
        replica
            .clone()
            .run(shutdown, move |stop| {
                let singletons = singletons.clone();
                let sharer = sharer.clone();
                // Each subscriber and destination is sent to by the leader alone, so in seq
                // order.
                let senders = crate::sender::run_listed(
                    pool.clone(),
                    subscribers.clone(),
                    http.clone(),
                    (running.clone(), metrics.clone()),
                    stop.clone(),
                );
                let housekeeping = futures::future::join(
                    crate::ledger::chain::log_head(pool.clone(), stop.clone()),
                    pruner.clone().run(stop.clone()),
                );
                let upstream = run_upstream(singletons, sharer, stop.clone());
                // Each source is read by the leader alone.
                let readers = crate::sources::run_configured(
                    sources.clone(),
                    echoing.clone(),
                    pool.clone(),
                    metrics.clone(),
                    stop.clone(),
                );
                async move {
                    tokio::join!(stop.cancelled(), upstream, senders, housekeeping, readers);
                }
            })
            .map(Ok)
    });
    Ok(())
}

/// Runs each account's reconciler and pusher, and the sharer, until `stop`.
async fn run_upstream(
    singletons: Vec<(Reconciler, Pusher)>,
    sharer: crate::share::Sharer,
    stop: CancellationToken,
) {
    let each = futures::future::join_all(singletons.into_iter().map(|(reconciler, pusher)| {
        let stop = stop.clone();
        async move {
            tokio::join!(reconciler.run_scheduled(stop.clone()), pusher.run(stop));
        }
    }));
    let sharing = sharer.run(stop.clone());
    tokio::join!(each, sharing);
}

/// Each account's reconciler and pusher, under its own client (its rate limit, its token:
/// one account's outage never holds up another's).
fn upstream_work(
    pool: &Pool,
    settings: &Settings,
    clients: Vec<(Account, ServiceClient)>,
    wake: &Arc<tokio::sync::Notify>,
) -> Vec<(Reconciler, Pusher)> {
    clients
        .into_iter()
        .map(|(account, client)| {
            (
                Reconciler::new(pool.clone(), client.clone(), &settings.reconcile)
                    .with_lease(settings.replica.lease())
                    .with_account(&account),
                Pusher::new(pool.clone(), client, wake.clone()).with_account(&account),
            )
        })
        .collect()
}

/// Every replica's followers of the ledger wake on every replica's commits (PostgreSQL).
pub(super) fn supervise_ledger_listener(tasks: &mut Supervisor, pool: &Pool) {
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
pub(super) fn admin_router(
    (settings, accounts): (&Settings, Vec<AccountId>),
    (pool, long_reads): (&Pool, Pool),
    tokens: Live<Vec<AdminToken>>,
    wake: Arc<tokio::sync::Notify>,
    writer: &OutboxWriter,
    (senders, metrics): (crate::sender::Running, Arc<Metrics>),
    (shutdown, sources, callers): (
        &CancellationToken,
        Live<Vec<crate::settings::SourceSettings>>,
        Live<Vec<crate::model::caller::Caller>>,
    ),
) -> axum::Router {
    admin::router(
        admin::AdminState::new(pool.clone(), Vec::new(), wake)
            .with_long_reads(long_reads)
            .with_accounts(accounts)
            .with_tokens(tokens)
            .with_subscribers(settings.subscriber.clone())
            .with_destinations(settings.destination.clone())
            .with_sources(sources)
            .with_callers(callers)
            .with_compliance(compliance_rules(settings))
            .with_failed_auth_limit(settings.admin.failed_auth_per_minute)
            .with_outbox(writer.state().clone())
            .with_senders(senders)
            .with_metrics(metrics)
            .with_stop(shutdown.clone()),
    )
}

/// The compliance report's rules; the settings were validated, so the defaults stand in only
/// for what validation already refused.
pub(super) fn compliance_rules(settings: &Settings) -> crate::compliance::Rules {
    crate::compliance::Rules::of(settings).unwrap_or_else(|error| {
        tracing::error!(%error, "[compliance] is not valid; the report uses the defaults");
        crate::compliance::Rules::default()
    })
}

/// Reloads the webhook secrets and admin tokens on every SIGHUP, listened to from now on:
/// before the daemon tells anyone it is ready, since an unheard SIGHUP ends a process.
pub(super) fn supervise_reload(tasks: &mut Supervisor, reloader: Reloader) -> anyhow::Result<()> {
    let hangups = Hangups::listen().context("listening to SIGHUP")?;
    tasks.add("reload", move |shutdown| {
        reloader.clone().run(hangups.clone(), shutdown).map(Ok)
    });
    Ok(())
}

/// The admin listener. Every run of its task serves on a handle of the one bound socket, so
/// a restart needs no new bind and keeps the port.
pub(super) fn supervise_admin(
    tasks: &mut Supervisor,
    listener: TcpListener,
    admin: axum::Router,
    limits: Limits,
    metrics: Arc<Metrics>,
) -> anyhow::Result<()> {
    let socket = listener
        .into_std()
        .context("taking the admin listener's socket")?;
    tasks.add("admin", move |shutdown| {
        let socket = socket.try_clone();
        let admin = admin.clone();
        let counted = (Listener::Admin, metrics.clone());
        async move {
            let socket = socket.context("cloning the admin listener's socket")?;
            let listener =
                TcpListener::from_std(socket).context("registering the admin listener's socket")?;
            crate::listener::serve(listener, admin, limits, counted, shutdown).await;
            Ok(())
        }
    });
    Ok(())
}

/// The ingest listener's router, and the task that keeps the sample of refused deliveries it
/// leaves (see [`crate::rejections`]), which ends once `shutdown` is cancelled.
pub(super) fn ingest_router(
    accounts: (
        Vec<ingest::AccountRoute>,
        crate::apply::InForce,
        &IngestSettings,
    ),
    writer: OutboxWriter,
    pool: &Pool,
    metrics: &Arc<Metrics>,
    shutdown: &CancellationToken,
) -> Result<(axum::Router, impl Future<Output = ()> + use<>), ingest::RouteError> {
    let rejections = Arc::new(crate::rejections::Rejections::new(writer.clone()));
    let keep_rejections = {
        let (rejections, stop) = (rejections.clone(), shutdown.clone());
        async move { rejections.keep(stop).await }
    };
    let metrics = metrics.clone();
    let router = ingest::router(accounts, writer, pool.clone(), rejections, metrics)?;
    Ok((router, keep_rejections))
}

/// Serves deliveries until `shutdown`, then drains the outbox writer: with the router and
/// `keep_rejections` (which ends once `shutdown` is cancelled) gone, the writer ends after
/// its last batch.
pub(super) async fn serve_ingest(
    listener: TcpListener,
    router: axum::Router,
    (limits, metrics): (Limits, Arc<Metrics>),
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
    let counted = (Listener::Ingest, metrics);
    let serve = crate::listener::serve(listener, router, limits, counted, shutdown);
    tokio::join!(serve, stopping, keep_rejections);
    tracing::info!("ingest listener stopped");
    if let Err(error) = writer_task.await {
        tracing::error!(%error, "outbox writer ended abnormally");
    }
}

/// What the sources' readers are built with: the accounts served, the destinations whose
/// writes read back are echoes, and the trust boundary's rules.
fn readers_of(
    settings: &Settings,
) -> Result<
    (
        Vec<crate::model::AccountId>,
        Vec<crate::settings::DestinationSettings>,
        crate::model::trust::Trust,
    ),
    crate::settings::SettingsError,
> {
    Ok((
        settings.account_ids()?,
        settings.destination.clone(),
        settings.consent.trust(),
    ))
}
