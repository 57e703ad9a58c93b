//! The daemon's metrics, one registry per [`Application`](crate::app::Application), exposed
//! in the Prometheus text format through `prometheus-client`. Counters and the in-process
//! gauges (leadership, open connections) are the crate's atomics, bumped on the hot paths;
//! the gauges that describe the database are read by the caller at scrape time and encoded
//! by a collector ([`Gauges`]), so they can never drift from the truth.
//!
//! A new metric: a line of `declared!` below (field, type, name, help; the macro registers
//! it) and the method that counts it, called by whoever holds the daemon's `Arc<Metrics>`;
//! a new scrape-time gauge: a field of [`Gauges`] and a line of its collector
//! (`metrics/scrape.rs`); a new label value: its variant in `metrics/labels.rs`. The
//! methods that count what the systems outside the service did (sources, destinations,
//! subscribers) are in `metrics/systems.rs`.

mod labels;
mod scrape;
/// The counts of sources, destinations and subscribers.
mod systems;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, prometheus_text};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::model::AccountId;
use labels::{
    AccountLabels, AuthLabels, ClosedLabels, DeliveryLabels, DestinationLabels,
    DestinationNameLabels, ListenerLabels, PushLabels, SourceLabels, SourceNameLabels,
    SourcePostLabels, SubscriberLabels, SystemLabels, Upstream, UpstreamLabels,
};
pub use labels::{
    AuthAttempt, AuthOutcome, Closed, Delivery, DestinationOutcome, Listener, Push, SourceOutcome,
    SubscriberOutcome,
};
pub use scrape::Gauges;

/// Every metric name starts with this.
const PREFIX: &str = "outreach_sync";

/// The `Content-Type` of the exposition: the Prometheus text format, version 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Declares [`Metrics`]: each metric once, as a field with its name (without the prefix,
/// and for a counter without the `_total` the crate appends) and its help (without the
/// full stop the crate appends). Every field declared is registered, so no metric can be
/// counted and never shown.
macro_rules! declared {
    ($($(#[$doc:meta])* $field:ident: $kind:ty = $name:literal, $help:literal;)+) => {
        /// One daemon's metrics: what it counts, and the registry that exposes them.
        pub struct Metrics {
            registry: Registry,
            $($(#[$doc])* $field: $kind,)+
        }

        impl Metrics {
            /// A registry of every metric, each labelled series known in advance at zero.
            pub fn new() -> Self {
                let mut metrics = Self {
                    registry: Registry::with_prefix(PREFIX),
                    $($field: <$kind>::default(),)+
                };
                $(metrics.registry.register($name, $help, Shown(metrics.$field.clone()));)+
                metrics.zeroed();
                metrics
            }
        }
    };
}

declared! {
    deliveries: Family<DeliveryLabels, Counter> = "deliveries",
        "Webhook deliveries by the ingest listener's answer";
    outbox_applied: Counter = "events_applied", "Outbox rows applied by the worker";
    outbox_quarantined: Counter = "events_quarantined", "Outbox rows quarantined by the worker";
    echoes: Counter = "echoes_recognised",
        "Returning webhooks recognised as the echo of a local change";
    messages_after_opt_out: Counter = "messages_after_optout",
        "Messages first seen by this process that were sent to a number after its opt-out, \
         past the confirmation window ([compliance])";
    reconcile_passes: Family<AccountLabels, Counter> = "reconcile_passes",
        "Reconciliation passes";
    reconcile_leads_scanned: Family<AccountLabels, Counter> = "reconcile_leads_scanned",
        "Leads read from the service by reconciliation";
    reconcile_repairs: Family<AccountLabels, Counter> = "reconcile_repairs",
        "Differences reconciliation repaired";
    reconcile_messages_refreshed: Family<AccountLabels, Counter> = "reconcile_messages_refreshed",
        "Message statuses reconciliation refreshed";
    reconcile_errors: Family<AccountLabels, Counter> = "reconcile_errors",
        "Errors during reconciliation passes";
    upstream: Family<UpstreamLabels, Counter> = "upstream_responses",
        "Answers of the service's API by HTTP status (\"error\": no answer)";
    pushes: Family<PushLabels, Counter> = "pushes",
        "Push attempts of local consent changes by outcome";
    subscriber_requests: Family<SubscriberLabels, Counter> = "subscriber_requests",
        "Requests to subscribers by outcome";
    destination_requests: Family<DestinationLabels, Counter> = "destination_requests",
        "Requests to destinations (VAN, Action Network) by outcome; an unmatched entry is \
         counted once, with no request";
    destination_refills: Family<DestinationNameLabels, Counter> = "destination_refills",
        "Warehouse tables found behind what was sent to them (missing, made again, \
         truncated) and filled again from the destination's first entry";
    source_records: Family<SourceLabels, Counter> = "source_records",
        "Records sources read back or were posted (VAN, Action Network, Twilio), by what each \
         came to";
    future_times: Family<SystemLabels, Counter> = "future_times",
        "Times another system gave further past their receipt than [consent] \
         future_tolerance_secs, ranked at the receipt instead (system: \"service\" for the \
         webhooks, a source's kind)";
    source_posts: Family<SourcePostLabels, Counter> = "source_posts",
        "Posts to sources the system posts to (Twilio), by the ingest listener's answer";
    source_last_success: Family<SourceNameLabels, Gauge> =
        "source_last_success_timestamp_seconds",
        "When each source last read to its end (Unix seconds; its start in this process until \
         then)";
    source_interval: Family<SourceNameLabels, Gauge> = "source_interval_seconds",
        "How often each source reads (every_secs)";
    /// 1 while this process holds the leader's lease.
    leader: Gauge = "leader",
        "1 while this process holds the leader's lease (the reconciler's schedule, the pusher \
         and the subscribers' senders run there)";
    connections_open: Family<ListenerLabels, Gauge> = "connections_open",
        "Connections each listener holds open";
    change_feed_waiting: Gauge = "change_feed_waiting",
        "Change-feed requests (wait=) waiting for an entry newer than they asked after";
    connections_closed: Family<ClosedLabels, Counter> = "connections_closed",
        "Connections a listener closed itself: idle, a head too slow, evicted at the cap, or \
         refused at the cap with every connection busy";
    auth_failures: Family<AuthLabels, Counter> = "admin_auth_failures",
        "Admin credentials that matched no token: refused, or refused unread because the \
         client's address is past [admin] failed_auth_per_minute";
}

/// A change-feed request counted as waiting, until dropped (answered, or given up by its
/// client).
#[must_use = "the request is counted as waiting only while this lives"]
pub struct ChangeFeedWait(Gauge);

impl Drop for ChangeFeedWait {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A metric shown (its help and type) before its first sample too: the crate leaves out a
/// family with no series, and a scrape would lose a family until it is first counted.
#[derive(Debug)]
struct Shown<M>(M);

impl<M: EncodeMetric> EncodeMetric for Shown<M> {
    fn encode(&self, encoder: MetricEncoder) -> std::fmt::Result {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates the series shown at zero before anything is counted; those of each account
    /// once it is served ([`Metrics::serving`]).
    fn zeroed(&self) {
        let _ = self.deliveries.get_or_create(&DeliveryLabels {
            account: None,
            outcome: Delivery::UnknownPath,
        });
        let _ = self.future_times.get_or_create(&SystemLabels {
            system: "service".to_owned(),
        });
        for &listener in Listener::ALL {
            let _ = self
                .connections_open
                .get_or_create(&ListenerLabels { listener });
            for &reason in Closed::ALL {
                let labels = ClosedLabels { listener, reason };
                let _ = self.connections_closed.get_or_create(&labels);
            }
        }
        for &attempt in AuthAttempt::ALL {
            for &outcome in AuthOutcome::ALL {
                let _ = self
                    .auth_failures
                    .get_or_create(&AuthLabels { attempt, outcome });
            }
        }
    }

    /// Shows the series of each of `accounts` at zero before anything is counted: every
    /// answer to a delivery on its path, its service's answers without a status, its pushes
    /// and its reconciliation.
    pub fn serving(&self, accounts: &[AccountId]) {
        for account in accounts {
            for &outcome in Delivery::ALL {
                let labels = DeliveryLabels {
                    account: Some(account.clone()),
                    outcome,
                };
                if outcome != Delivery::UnknownPath {
                    let _ = self.deliveries.get_or_create(&labels);
                }
            }
            for status in [Upstream::Other, Upstream::Error] {
                let account = account.clone();
                let _ = self
                    .upstream
                    .get_or_create(&UpstreamLabels { account, status });
            }
            for &outcome in Push::ALL {
                let account = account.clone();
                let _ = self.pushes.get_or_create(&PushLabels { account, outcome });
            }
            let labels = AccountLabels {
                account: account.clone(),
            };
            for family in self.reconcile_families() {
                let _ = family.get_or_create(&labels);
            }
        }
    }

    /// The counters of a reconciliation pass, by account.
    fn reconcile_families(&self) -> [&Family<AccountLabels, Counter>; 5] {
        [
            &self.reconcile_passes,
            &self.reconcile_leads_scanned,
            &self.reconcile_repairs,
            &self.reconcile_messages_refreshed,
            &self.reconcile_errors,
        ]
    }

    /// A credential that matched no admin token.
    pub fn auth_failure(&self, attempt: AuthAttempt, outcome: AuthOutcome) {
        self.auth_failures
            .get_or_create(&AuthLabels { attempt, outcome })
            .inc();
    }

    /// Failed credentials so far.
    pub fn auth_failures(&self, attempt: AuthAttempt, outcome: AuthOutcome) -> u64 {
        count(&self.auth_failures, &AuthLabels { attempt, outcome })
    }

    /// How many connections `listener` holds open now.
    pub fn connections_open(&self, listener: Listener, open: usize) {
        let open = i64::try_from(open).unwrap_or(i64::MAX);
        self.connections_open
            .get_or_create(&ListenerLabels { listener })
            .set(open);
    }

    /// How many connections `listener` held open when it last counted them.
    pub fn open_connections(&self, listener: Listener) -> i64 {
        self.connections_open
            .get_or_create(&ListenerLabels { listener })
            .get()
    }

    /// A change-feed request now waits for a newer entry: counted until the guard is dropped.
    pub fn change_feed_wait(&self) -> ChangeFeedWait {
        self.change_feed_waiting.inc();
        ChangeFeedWait(self.change_feed_waiting.clone())
    }

    /// How many change-feed requests wait for a newer entry now.
    pub fn change_feed_waiting(&self) -> i64 {
        self.change_feed_waiting.get()
    }

    /// `listener` closed a connection itself, for `reason`.
    pub fn connection_closed(&self, listener: Listener, reason: Closed) {
        self.connections_closed
            .get_or_create(&ClosedLabels { listener, reason })
            .inc();
    }

    /// Connections `listener` closed for `reason` so far.
    pub fn connections_closed(&self, listener: Listener, reason: Closed) -> u64 {
        count(&self.connections_closed, &ClosedLabels { listener, reason })
    }

    /// An answer to a delivery on `account`'s path (`None`: on no account's path).
    pub fn delivery(&self, account: Option<&AccountId>, outcome: Delivery) {
        let account = account.cloned();
        self.deliveries
            .get_or_create(&DeliveryLabels { account, outcome })
            .inc();
    }

    /// Counts a post to source `name`, by its answer.
    pub fn source_post(&self, name: &str, outcome: Delivery) {
        self.source_posts
            .get_or_create(&SourcePostLabels {
                source: name.to_owned(),
                outcome,
            })
            .inc();
    }

    /// Outbox rows applied and quarantined by one committed batch.
    pub fn applied(&self, applied: u64, quarantined: u64) {
        self.outbox_applied.inc_by(applied);
        self.outbox_quarantined.inc_by(quarantined);
    }

    /// `n` returning webhooks recognised as the echo of a local change.
    pub fn echoes(&self, n: u64) {
        self.echoes.inc_by(n);
    }

    /// `n` messages new to the mirror were sent to a number after its opt-out.
    pub fn messages_after_opt_out(&self, n: u64) {
        self.messages_after_opt_out.inc_by(n);
    }

    /// Whether this process holds the leader's lease now.
    pub fn leading(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// One reconciliation pass of `account`.
    pub fn record_reconcile_pass(
        &self,
        account: &AccountId,
        leads_scanned: u64,
        repaired: u64,
        messages_refreshed: u64,
        errors: u64,
    ) {
        let labels = AccountLabels {
            account: account.clone(),
        };
        let [passes, scanned, repairs, refreshed, failed] = self.reconcile_families();
        passes.get_or_create(&labels).inc();
        scanned.get_or_create(&labels).inc_by(leads_scanned);
        repairs.get_or_create(&labels).inc_by(repaired);
        refreshed.get_or_create(&labels).inc_by(messages_refreshed);
        failed.get_or_create(&labels).inc_by(errors);
    }

    /// One answer of `account`'s service (token endpoint included).
    pub fn upstream_status(&self, account: &AccountId, status: u16) {
        self.upstream_answer(account, Upstream::of(status));
    }

    /// One call to `account`'s service that got no answer (connect error, timeout, broken
    /// body).
    pub fn upstream_transport_error(&self, account: &AccountId) {
        self.upstream_answer(account, Upstream::Error);
    }

    fn upstream_answer(&self, account: &AccountId, status: Upstream) {
        let account = account.clone();
        self.upstream
            .get_or_create(&UpstreamLabels { account, status })
            .inc();
    }

    /// One push attempt to `account`'s service.
    pub fn push(&self, account: &AccountId, outcome: Push) {
        let account = account.clone();
        self.pushes
            .get_or_create(&PushLabels { account, outcome })
            .inc();
    }

    /// The Prometheus text exposition (format 0.0.4) of every metric, `gauges` read now.
    pub fn render(&self, gauges: Gauges) -> String {
        let mut scraped = Registry::with_prefix(PREFIX);
        scraped.register_collector(Box::new(gauges));
        let mut text = String::new();
        // Writing to a String cannot fail, nor can the encoders of these metrics.
        let _ = prometheus_text::encode(&mut text, &self.registry);
        let _ = prometheus_text::encode(&mut text, &scraped);
        text
    }
}

/// The value of one counter of `family`, 0 when never counted.
fn count<S>(family: &Family<S, Counter>, labels: &S) -> u64
where
    S: Clone + std::hash::Hash + Eq,
{
    family.get(labels).map_or(0, |counter| counter.get())
}

#[cfg(test)]
mod tests;
