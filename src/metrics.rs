//! The daemon's metrics, one registry per [`Application`](crate::app::Application), exposed
//! in the Prometheus text format through `prometheus-client`. Counters and the in-process
//! gauges (leadership, open connections) are the crate's atomics, bumped on the hot paths;
//! the gauges that describe the database are read by the caller at scrape time and encoded
//! by a collector ([`Gauges`]), so they can never drift from the truth.
//!
//! A new metric: a field of [`Metrics`], registered in [`Metrics::new`] under its name
//! without the prefix (and, for a counter, without `_total`, which the crate appends), with
//! the method that counts it; a new scrape-time gauge: a field of [`Gauges`] and a line in
//! its collector (`metrics/scrape.rs`); a new label value: its variant in `metrics/labels.rs`.

mod labels;
mod scrape;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub use labels::{AuthAttempt, AuthOutcome, Closed, Delivery, Listener, Push, SubscriberOutcome};
use labels::{
    AuthLabels, ClosedLabels, DeliveryLabels, ListenerLabels, PushLabels, SubscriberLabels,
    Upstream, UpstreamLabels,
};
pub use scrape::Gauges;

/// Every metric name starts with this.
const PREFIX: &str = "outreach_sync";

/// The `Content-Type` of the exposition: the Prometheus text format, version 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// One daemon's metrics: what it counts, and the registry that exposes them.
pub struct Metrics {
    registry: Registry,
    deliveries: Family<DeliveryLabels, Counter>,
    events_applied: Counter,
    events_quarantined: Counter,
    echoes: Counter,
    messages_after_opt_out: Counter,
    /// 1 while this process holds the leader's lease.
    leader: Gauge,
    reconcile_passes: Counter,
    reconcile_leads_scanned: Counter,
    reconcile_repairs: Counter,
    reconcile_messages_refreshed: Counter,
    reconcile_errors: Counter,
    upstream: Family<UpstreamLabels, Counter>,
    pushes: Family<PushLabels, Counter>,
    subscriber_requests: Family<SubscriberLabels, Counter>,
    auth_failures: Family<AuthLabels, Counter>,
    connections_open: Family<ListenerLabels, Gauge>,
    connections_closed: Family<ClosedLabels, Counter>,
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

/// The crate ends every help text with a full stop itself; ours are written whole.
fn help(text: &str) -> &str {
    text.strip_suffix('.').unwrap_or(text)
}

impl Metrics {
    /// A registry of every metric, each labelled series known in advance at zero.
    pub fn new() -> Self {
        let metrics = Self {
            registry: Registry::with_prefix(PREFIX),
            deliveries: Family::default(),
            events_applied: Counter::default(),
            events_quarantined: Counter::default(),
            echoes: Counter::default(),
            messages_after_opt_out: Counter::default(),
            leader: Gauge::default(),
            reconcile_passes: Counter::default(),
            reconcile_leads_scanned: Counter::default(),
            reconcile_repairs: Counter::default(),
            reconcile_messages_refreshed: Counter::default(),
            reconcile_errors: Counter::default(),
            upstream: Family::default(),
            pushes: Family::default(),
            subscriber_requests: Family::default(),
            auth_failures: Family::default(),
            connections_open: Family::default(),
            connections_closed: Family::default(),
        };
        metrics.zeroed();
        metrics.registered()
    }

    /// Creates the series shown at zero before anything is counted.
    fn zeroed(&self) {
        for &outcome in Delivery::ALL {
            let _ = self.deliveries.get_or_create(&DeliveryLabels { outcome });
        }
        for status in [Upstream::Other, Upstream::Error] {
            let _ = self.upstream.get_or_create(&UpstreamLabels { status });
        }
        for &outcome in Push::ALL {
            let _ = self.pushes.get_or_create(&PushLabels { outcome });
        }
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

    /// Registers every metric under its name and help.
    fn registered(mut self) -> Self {
        let r = &mut self.registry;
        r.register(
            "deliveries",
            help("Webhook deliveries by the ingest listener's answer."),
            self.deliveries.clone(),
        );
        let counters = [
            (
                "events_applied",
                "Outbox rows applied by the worker.",
                &self.events_applied,
            ),
            (
                "events_quarantined",
                "Outbox rows quarantined by the worker.",
                &self.events_quarantined,
            ),
            (
                "echoes_recognised",
                "Returning webhooks recognised as the echo of a local change.",
                &self.echoes,
            ),
            (
                "messages_after_optout",
                "Messages first seen by this process that were sent to a number after its opt-out, past the confirmation window ([compliance]).",
                &self.messages_after_opt_out,
            ),
            (
                "reconcile_passes",
                "Reconciliation passes.",
                &self.reconcile_passes,
            ),
            (
                "reconcile_leads_scanned",
                "Leads read from the service by reconciliation.",
                &self.reconcile_leads_scanned,
            ),
            (
                "reconcile_repairs",
                "Differences reconciliation repaired.",
                &self.reconcile_repairs,
            ),
            (
                "reconcile_messages_refreshed",
                "Message statuses reconciliation refreshed.",
                &self.reconcile_messages_refreshed,
            ),
            (
                "reconcile_errors",
                "Errors during reconciliation passes.",
                &self.reconcile_errors,
            ),
        ];
        for (name, text, counter) in counters {
            r.register(name, help(text), counter.clone());
        }
        r.register(
            "upstream_responses",
            help("Answers of the service's API by HTTP status (\"error\": no answer)."),
            self.upstream.clone(),
        );
        r.register(
            "pushes",
            help("Push attempts of local consent changes by outcome."),
            self.pushes.clone(),
        );
        r.register(
            "subscriber_requests",
            help("Requests to subscribers by outcome."),
            self.subscriber_requests.clone(),
        );
        r.register(
            "leader",
            help("1 while this process holds the leader's lease (the reconciler's schedule, the pusher and the subscribers' senders run there)."),
            self.leader.clone(),
        );
        r.register(
            "connections_open",
            help("Connections each listener holds open."),
            self.connections_open.clone(),
        );
        r.register(
            "connections_closed",
            help("Connections a listener closed itself: idle, a head too slow, evicted at the cap, or refused at the cap with every connection busy."),
            self.connections_closed.clone(),
        );
        r.register(
            "admin_auth_failures",
            help("Admin credentials that matched no token: refused, or refused unread because the client's address is past [admin] failed_auth_per_minute."),
            self.auth_failures.clone(),
        );
        self
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

    pub fn delivery(&self, outcome: Delivery) {
        self.deliveries
            .get_or_create(&DeliveryLabels { outcome })
            .inc();
    }

    pub fn deliveries(&self, outcome: Delivery) -> u64 {
        count(&self.deliveries, &DeliveryLabels { outcome })
    }

    /// What one committed batch of outbox rows did: rows applied and quarantined, echoes
    /// recognised, messages found sent after an opt-out.
    pub fn applied(&self, outcome: &crate::apply::Outcome) {
        self.events_applied.inc_by(outcome.applied);
        self.events_quarantined.inc_by(outcome.quarantined);
        self.echoes.inc_by(outcome.echoes);
        self.messages_after_opt_out
            .inc_by(outcome.sent_after_opt_out);
    }

    /// Outbox rows applied and quarantined so far.
    pub fn events(&self) -> (u64, u64) {
        (self.events_applied.get(), self.events_quarantined.get())
    }

    /// Whether this process holds the leader's lease now.
    pub fn leading(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    pub fn record_reconcile_pass(
        &self,
        leads_scanned: u64,
        repaired: u64,
        messages_refreshed: u64,
        errors: u64,
    ) {
        self.reconcile_passes.inc();
        self.reconcile_leads_scanned.inc_by(leads_scanned);
        self.reconcile_repairs.inc_by(repaired);
        self.reconcile_messages_refreshed.inc_by(messages_refreshed);
        self.reconcile_errors.inc_by(errors);
    }

    /// One upstream HTTP answer (token endpoint included).
    pub fn upstream_status(&self, status: u16) {
        let status = Upstream::of(status);
        self.upstream
            .get_or_create(&UpstreamLabels { status })
            .inc();
    }

    /// One upstream call that got no answer (connect error, timeout, broken body).
    pub fn upstream_transport_error(&self) {
        let status = Upstream::Error;
        self.upstream
            .get_or_create(&UpstreamLabels { status })
            .inc();
    }

    pub fn push(&self, outcome: Push) {
        self.pushes.get_or_create(&PushLabels { outcome }).inc();
    }

    pub fn pushes(&self, outcome: Push) -> u64 {
        count(&self.pushes, &PushLabels { outcome })
    }

    /// Counts a request to `subscriber`.
    pub fn subscriber_request(&self, subscriber: &str, outcome: SubscriberOutcome) {
        let subscriber = subscriber.to_owned();
        self.subscriber_requests
            .get_or_create(&SubscriberLabels {
                subscriber,
                outcome,
            })
            .inc();
    }

    /// Requests to `subscriber` that ended in `outcome`.
    pub fn subscriber_requests(&self, subscriber: &str, outcome: SubscriberOutcome) -> u64 {
        let subscriber = subscriber.to_owned();
        let labels = SubscriberLabels {
            subscriber,
            outcome,
        };
        count(&self.subscriber_requests, &labels)
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
