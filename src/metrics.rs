//! Process-wide counters in Prometheus text format. Counters are plain atomics bumped on the
//! hot paths (no locks, no allocation); gauges that describe the database (backlog, lag,
//! quarantine, pending pushes) are read at scrape time by the caller and passed to
//! [`Metrics::render`], so they can never drift from the truth.
//!
//! One file over 400 lines on purpose: every series the daemon exposes is declared and
//! rendered here, so `/metrics` reads as one list; split, a series could be counted and
//! never shown.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Every metric name starts with this.
const PREFIX: &str = "outreach_sync";
/// Upstream statuses are counted per code in `100..600`; anything else is "other".
const STATUS_CODES: usize = 500;

/// What the ingest listener answered to one delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Accepted,
    Duplicate,
    Rejected,
    TooLarge,
    NotJson,
    BacklogFull,
    Unavailable,
}

impl Delivery {
    const ALL: [Delivery; 7] = [
        Delivery::Accepted,
        Delivery::Duplicate,
        Delivery::Rejected,
        Delivery::TooLarge,
        Delivery::NotJson,
        Delivery::BacklogFull,
        Delivery::Unavailable,
    ];

    fn label(self) -> &'static str {
        match self {
            Delivery::Accepted => "accepted",
            Delivery::Duplicate => "duplicate",
            Delivery::Rejected => "rejected",
            Delivery::TooLarge => "too_large",
            Delivery::NotJson => "not_json",
            Delivery::BacklogFull => "backlog_full",
            Delivery::Unavailable => "unavailable",
        }
    }
}

/// What one request to a subscriber ended in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SubscriberOutcome {
    /// Answered 2xx: the cursor moved past the entries.
    Delivered,
    /// No answer, a 5xx, 408 or 429: retried.
    Failed,
    /// Another 3xx or 4xx: retried, and shown as an error.
    Rejected,
    /// 410: the subscriber is disabled.
    Gone,
}

impl SubscriberOutcome {
    fn label(self) -> &'static str {
        match self {
            SubscriberOutcome::Delivered => "delivered",
            SubscriberOutcome::Failed => "failed",
            SubscriberOutcome::Rejected => "rejected",
            SubscriberOutcome::Gone => "gone",
        }
    }
}

/// What one push attempt of a local consent change ended in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// The service accepted the change.
    Sent,
    /// It failed and will be tried again.
    Retry,
    /// It failed for good (attempts exhausted or refused by the service).
    Failed,
}

impl Push {
    const ALL: [Push; 3] = [Push::Sent, Push::Retry, Push::Failed];

    fn label(self) -> &'static str {
        match self {
            Push::Sent => "sent",
            Push::Retry => "retry",
            Push::Failed => "failed",
        }
    }
}

/// One of the daemon's two listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    Ingest,
    Admin,
}

impl Listener {
    const ALL: [Listener; 2] = [Listener::Ingest, Listener::Admin];

    pub fn label(self) -> &'static str {
        match self {
            Listener::Ingest => "ingest",
            Listener::Admin => "admin",
        }
    }
}

/// Why a listener closed a connection itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// No request began within the idle timeout.
    Idle,
    /// A request's head did not arrive whole within the header timeout.
    HeaderTimeout,
    /// At the cap, a new connection took its place.
    Evicted,
    /// At the cap with every connection busy: closed as soon as accepted.
    Refused,
}

impl Closed {
    const ALL: [Closed; 4] = [
        Closed::Idle,
        Closed::HeaderTimeout,
        Closed::Evicted,
        Closed::Refused,
    ];

    fn label(self) -> &'static str {
        match self {
            Closed::Idle => "idle",
            Closed::HeaderTimeout => "header_timeout",
            Closed::Evicted => "evicted",
            Closed::Refused => "refused",
        }
    }
}

/// A credential presented to the admin listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthAttempt {
    /// A bearer token on the API.
    Bearer,
    /// A token on the console's sign-in form.
    SignIn,
}

impl AuthAttempt {
    const ALL: [AuthAttempt; 2] = [AuthAttempt::Bearer, AuthAttempt::SignIn];

    pub fn label(self) -> &'static str {
        match self {
            AuthAttempt::Bearer => "bearer",
            AuthAttempt::SignIn => "signin",
        }
    }
}

/// What became of a credential that matched no token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthOutcome {
    /// Refused (401), counted against its address.
    Refused,
    /// Refused with 429: its address is past the limit (the credential was not compared).
    Limited,
}

impl AuthOutcome {
    const ALL: [AuthOutcome; 2] = [AuthOutcome::Refused, AuthOutcome::Limited];

    fn label(self) -> &'static str {
        match self {
            AuthOutcome::Refused => "refused",
            AuthOutcome::Limited => "limited",
        }
    }
}

/// Values read from the database at scrape time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauges {
    pub outbox_backlog: u64,
    /// Age in seconds of the oldest unapplied delivery (0 when none).
    pub apply_lag_seconds: f64,
    pub quarantined: u64,
    pub pushes_pending: u64,
    /// Each subscriber's lag, in entries.
    pub subscriber_lag: Vec<(String, u64)>,
    /// Whether the last check of the webhook registrations passed; `None` before the
    /// first check, when the metric has no sample.
    pub registration_ok: Option<bool>,
    /// Per destination (the service, each subscriber), the age in seconds of the oldest
    /// opt-out it has not had (0 when none).
    pub optout_oldest_pending: Vec<(String, f64)>,
    /// Opt-outs past their deadline and not yet had by every destination.
    pub optouts_overdue: u64,
}

/// The process's counters.
pub struct Metrics {
    deliveries: [AtomicU64; Delivery::ALL.len()],
    events_applied: AtomicU64,
    events_quarantined: AtomicU64,
    echoes: AtomicU64,
    messages_after_opt_out: AtomicU64,
    /// 1 while this process holds the leader's lease.
    leader: AtomicU64,
    reconcile_passes: AtomicU64,
    reconcile_leads_scanned: AtomicU64,
    reconcile_repairs: AtomicU64,
    reconcile_messages_refreshed: AtomicU64,
    reconcile_errors: AtomicU64,
    upstream: [AtomicU64; STATUS_CODES],
    upstream_other: AtomicU64,
    upstream_transport_errors: AtomicU64,
    pushes: [AtomicU64; Push::ALL.len()],
    /// Requests to subscribers, by subscriber and outcome.
    subscriber_requests: Mutex<BTreeMap<(String, SubscriberOutcome), u64>>,
    /// Failed admin credentials, by attempt and outcome.
    auth_failures: [[AtomicU64; AuthOutcome::ALL.len()]; AuthAttempt::ALL.len()],
    /// Open connections, by listener.
    connections_open: [AtomicU64; Listener::ALL.len()],
    /// Connections the listeners closed, by listener and reason.
    connections_closed: [[AtomicU64; Closed::ALL.len()]; Listener::ALL.len()],
}

static GLOBAL: Metrics = Metrics::new();

/// The process-wide registry.
pub fn global() -> &'static Metrics {
    &GLOBAL
}

/// Shorthand for `global().record_reconcile_pass(..)`, for the reconciler.
pub fn record_reconcile_pass(
    leads_scanned: u64,
    repaired: u64,
    messages_refreshed: u64,
    errors: u64,
) {
    GLOBAL.record_reconcile_pass(leads_scanned, repaired, messages_refreshed, errors);
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl Metrics {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Self {
            deliveries: [const { AtomicU64::new(0) }; Delivery::ALL.len()],
            events_applied: AtomicU64::new(0),
            events_quarantined: AtomicU64::new(0),
            echoes: AtomicU64::new(0),
            messages_after_opt_out: AtomicU64::new(0),
            leader: AtomicU64::new(0),
            reconcile_passes: AtomicU64::new(0),
            reconcile_leads_scanned: AtomicU64::new(0),
            reconcile_repairs: AtomicU64::new(0),
            reconcile_messages_refreshed: AtomicU64::new(0),
            reconcile_errors: AtomicU64::new(0),
            upstream: [const { AtomicU64::new(0) }; STATUS_CODES],
            upstream_other: AtomicU64::new(0),
            upstream_transport_errors: AtomicU64::new(0),
            pushes: [const { AtomicU64::new(0) }; Push::ALL.len()],
            subscriber_requests: Mutex::new(BTreeMap::new()),
            auth_failures: [const { [const { AtomicU64::new(0) }; AuthOutcome::ALL.len()] };
                AuthAttempt::ALL.len()],
            connections_open: [const { AtomicU64::new(0) }; Listener::ALL.len()],
            connections_closed: [const { [const { AtomicU64::new(0) }; Closed::ALL.len()] };
                Listener::ALL.len()],
        }
    }

    /// A credential that matched no admin token.
    pub fn auth_failure(&self, attempt: AuthAttempt, outcome: AuthOutcome) {
        add(&self.auth_failures[attempt as usize][outcome as usize], 1);
    }

    /// Failed credentials so far.
    pub fn auth_failures(&self, attempt: AuthAttempt, outcome: AuthOutcome) -> u64 {
        get(&self.auth_failures[attempt as usize][outcome as usize])
    }

    /// How many connections `listener` holds open now.
    pub fn connections_open(&self, listener: Listener, open: usize) {
        let open = u64::try_from(open).unwrap_or(u64::MAX);
        self.connections_open[listener as usize].store(open, Ordering::Relaxed);
    }

    /// `listener` closed a connection itself, for `reason`.
    pub fn connection_closed(&self, listener: Listener, reason: Closed) {
        add(
            &self.connections_closed[listener as usize][reason as usize],
            1,
        );
    }

    /// Connections `listener` closed for `reason` so far.
    pub fn connections_closed(&self, listener: Listener, reason: Closed) -> u64 {
        get(&self.connections_closed[listener as usize][reason as usize])
    }

    pub fn delivery(&self, outcome: Delivery) {
        add(&self.deliveries[outcome as usize], 1);
    }

    pub fn deliveries(&self, outcome: Delivery) -> u64 {
        get(&self.deliveries[outcome as usize])
    }

    /// Outbox rows applied and quarantined by one worker batch.
    pub fn applied(&self, applied: u64, quarantined: u64) {
        add(&self.events_applied, applied);
        add(&self.events_quarantined, quarantined);
    }

    /// A returning webhook recognised as the echo of a local change.
    pub fn echo(&self) {
        add(&self.echoes, 1);
    }

    /// Whether this process holds the leader's lease now.
    pub fn leading(&self, leading: bool) {
        self.leader.store(u64::from(leading), Ordering::Relaxed);
    }

    /// `n` messages new to the mirror were sent to a number after its opt-out.
    pub fn messages_after_opt_out(&self, n: u64) {
        if n > 0 {
            add(&self.messages_after_opt_out, n);
        }
    }

    pub fn record_reconcile_pass(
        &self,
        leads_scanned: u64,
        repaired: u64,
        messages_refreshed: u64,
        errors: u64,
    ) {
        add(&self.reconcile_passes, 1);
        add(&self.reconcile_leads_scanned, leads_scanned);
        add(&self.reconcile_repairs, repaired);
        add(&self.reconcile_messages_refreshed, messages_refreshed);
        add(&self.reconcile_errors, errors);
    }

    /// One upstream HTTP answer (token endpoint included).
    pub fn upstream_status(&self, status: u16) {
        match usize::from(status).checked_sub(100) {
            Some(i) if i < STATUS_CODES => add(&self.upstream[i], 1),
            _ => add(&self.upstream_other, 1),
        }
    }

    /// One upstream call that got no answer (connect error, timeout, broken body).
    pub fn upstream_transport_error(&self) {
        add(&self.upstream_transport_errors, 1);
    }

    pub fn push(&self, outcome: Push) {
        add(&self.pushes[outcome as usize], 1);
    }

    pub fn pushes(&self, outcome: Push) -> u64 {
        get(&self.pushes[outcome as usize])
    }

    /// Counts a request to `subscriber`.
    pub fn subscriber_request(&self, subscriber: &str, outcome: SubscriberOutcome) {
        let mut requests = self
            .subscriber_requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *requests
            .entry((subscriber.to_owned(), outcome))
            .or_default() += 1;
    }

    /// Requests to `subscriber` that ended in `outcome`.
    pub fn subscriber_requests(&self, subscriber: &str, outcome: SubscriberOutcome) -> u64 {
        let requests = self
            .subscriber_requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        requests
            .get(&(subscriber.to_owned(), outcome))
            .copied()
            .unwrap_or(0)
    }

    /// The Prometheus text exposition (format 0.0.4) of every metric.
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = Exposition::default();
        self.render_pipeline(&mut out, gauges);
        self.render_counters(&mut out);
        self.render_upstream(&mut out, gauges);
        self.render_subscribers(&mut out, gauges);
        self.render_compliance(&mut out, gauges);
        self.render_connections(&mut out);
        out.0
    }

    /// Opt-outs not yet honoured everywhere ([compliance]).
    fn render_compliance(&self, out: &mut Exposition, gauges: &Gauges) {
        out.family(
            "optout_oldest_pending_seconds",
            "gauge",
            "Age of the oldest opt-out the destination (the service, or a subscriber) has not had yet; 0 when none.",
            gauges.optout_oldest_pending.iter().map(|(name, secs)| {
                (
                    format!("{{destination=\"{name}\"}}"),
                    format!("{secs:.3}"),
                )
            }),
        );
        out.single(
            "leader",
            "gauge",
            "1 while this process holds the leader's lease (the reconciler's schedule, the pusher and the subscribers' senders run there).",
            get(&self.leader),
        );
        out.single(
            "optouts_overdue",
            "gauge",
            "Opt-outs past their deadline ([compliance] deadline_business_days) and not yet had by every destination.",
            gauges.optouts_overdue,
        );
    }

    /// Ingest's answers and the outbox's state.
    fn render_pipeline(&self, out: &mut Exposition, gauges: &Gauges) {
        out.family(
            "deliveries_total",
            "counter",
            "Webhook deliveries by the ingest listener's answer.",
            Delivery::ALL.iter().map(|d| {
                (
                    format!("{{outcome=\"{}\"}}", d.label()),
                    self.deliveries(*d).to_string(),
                )
            }),
        );
        out.single(
            "outbox_backlog",
            "gauge",
            "Deliveries committed but not yet applied.",
            gauges.outbox_backlog,
        );
        out.single(
            "apply_lag_seconds",
            "gauge",
            "Age of the oldest unapplied delivery.",
            format!("{:.3}", gauges.apply_lag_seconds),
        );
        out.single(
            "quarantined",
            "gauge",
            "Deliveries quarantined (not applicable as they are).",
            gauges.quarantined,
        );
    }

    /// The single-value counters of the worker and the reconciler.
    fn render_counters(&self, out: &mut Exposition) {
        let counters: [(&str, &str, &AtomicU64); 9] = [
            (
                "events_applied_total",
                "Outbox rows applied by the worker.",
                &self.events_applied,
            ),
            (
                "events_quarantined_total",
                "Outbox rows quarantined by the worker.",
                &self.events_quarantined,
            ),
            (
                "echoes_recognised_total",
                "Returning webhooks recognised as the echo of a local change.",
                &self.echoes,
            ),
            (
                "messages_after_optout_total",
                "Messages first seen by this process that were sent to a number after its opt-out, past the confirmation window ([compliance]).",
                &self.messages_after_opt_out,
            ),
            (
                "reconcile_passes_total",
                "Reconciliation passes.",
                &self.reconcile_passes,
            ),
            (
                "reconcile_leads_scanned_total",
                "Leads read from the service by reconciliation.",
                &self.reconcile_leads_scanned,
            ),
            (
                "reconcile_repairs_total",
                "Differences reconciliation repaired.",
                &self.reconcile_repairs,
            ),
            (
                "reconcile_messages_refreshed_total",
                "Message statuses reconciliation refreshed.",
                &self.reconcile_messages_refreshed,
            ),
            (
                "reconcile_errors_total",
                "Errors during reconciliation passes.",
                &self.reconcile_errors,
            ),
        ];
        for (name, help, counter) in counters {
            out.single(name, "counter", help, get(counter));
        }
    }

    /// The service's answers, and the pushes of local changes to it.
    fn render_upstream(&self, out: &mut Exposition, gauges: &Gauges) {
        let by_status = self.upstream.iter().enumerate().filter_map(|(i, c)| {
            let n = get(c);
            (n > 0).then(|| (format!("{{status=\"{}\"}}", i + 100), n.to_string()))
        });
        let others = [
            (
                "{status=\"other\"}".into(),
                get(&self.upstream_other).to_string(),
            ),
            (
                "{status=\"error\"}".into(),
                get(&self.upstream_transport_errors).to_string(),
            ),
        ];
        out.family(
            "upstream_responses_total",
            "counter",
            "Answers of the service's API by HTTP status (\"error\": no answer).",
            by_status.chain(others),
        );
        out.family(
            "pushes_total",
            "counter",
            "Push attempts of local consent changes by outcome.",
            Push::ALL.iter().map(|p| {
                (
                    format!("{{outcome=\"{}\"}}", p.label()),
                    self.pushes(*p).to_string(),
                )
            }),
        );
        out.single(
            "pushes_pending",
            "gauge",
            "Local consent changes not yet accepted by the service.",
            gauges.pushes_pending,
        );
        out.family(
            "registration_ok",
            "gauge",
            "1 when the last `webhooks check` found both webhook registrations right and passing a mock event, 0 when not; no sample before the first check.",
            gauges
                .registration_ok
                .map(|ok| (String::new(), u8::from(ok).to_string())),
        );
    }

    /// The listeners' connections, and failed admin credentials.
    fn render_connections(&self, out: &mut Exposition) {
        out.family(
            "connections_open",
            "gauge",
            "Connections each listener holds open.",
            Listener::ALL.iter().map(|l| {
                (
                    format!("{{listener=\"{}\"}}", l.label()),
                    get(&self.connections_open[*l as usize]).to_string(),
                )
            }),
        );
        let closed = Listener::ALL.iter().flat_map(|l| {
            Closed::ALL.iter().map(move |c| {
                (
                    format!("{{listener=\"{}\",reason=\"{}\"}}", l.label(), c.label()),
                    self.connections_closed(*l, *c).to_string(),
                )
            })
        });
        out.family(
            "connections_closed_total",
            "counter",
            "Connections a listener closed itself: idle, a head too slow, evicted at the cap, or refused at the cap with every connection busy.",
            closed,
        );
        let failures = AuthAttempt::ALL.iter().flat_map(|a| {
            AuthOutcome::ALL.iter().map(move |o| {
                (
                    format!("{{attempt=\"{}\",outcome=\"{}\"}}", a.label(), o.label()),
                    self.auth_failures(*a, *o).to_string(),
                )
            })
        });
        out.family(
            "admin_auth_failures_total",
            "counter",
            "Admin credentials that matched no token: refused, or refused unread because the client's address is past [admin] failed_auth_per_minute.",
            failures,
        );
    }

    /// Deliveries to the campaign's other tools.
    fn render_subscribers(&self, out: &mut Exposition, gauges: &Gauges) {
        let requests: Vec<(String, String)> = self
            .subscriber_requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|((name, outcome), n)| {
                (
                    format!("{{subscriber=\"{name}\",outcome=\"{}\"}}", outcome.label()),
                    n.to_string(),
                )
            })
            .collect();
        out.family(
            "subscriber_requests_total",
            "counter",
            "Requests to subscribers by outcome.",
            requests,
        );
        out.family(
            "subscriber_lag_entries",
            "gauge",
            "Ledger entries after each subscriber's cursor.",
            gauges
                .subscriber_lag
                .iter()
                .map(|(name, lag)| (format!("{{subscriber=\"{name}\"}}"), lag.to_string())),
        );
    }
}

/// The Prometheus text being written, family by family.
#[derive(Default)]
struct Exposition(String);

impl Exposition {
    /// A family's help, type and samples (labels, value).
    fn family(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: impl IntoIterator<Item = (String, String)>,
    ) {
        // Writing to a String cannot fail.
        let _ = writeln!(self.0, "# HELP {PREFIX}_{name} {help}");
        let _ = writeln!(self.0, "# TYPE {PREFIX}_{name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(self.0, "{PREFIX}_{name}{labels} {value}");
        }
    }

    /// A family of one sample without labels.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
        self.family(name, kind, help, [(String::new(), value.to_string())]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rendering_has_a_help_and_type_line_for_every_family_and_labelled_samples() {
        let m = Metrics::new();
        m.delivery(Delivery::BacklogFull);
        m.upstream_status(429);
        m.upstream_status(9);
        m.record_reconcile_pass(10, 2, 3, 0);
        m.push(Push::Sent);
        m.subscriber_request("crm", SubscriberOutcome::Failed);
        m.subscriber_request("crm", SubscriberOutcome::Failed);
        let text = m.render(&Gauges {
            outbox_backlog: 7,
            apply_lag_seconds: 1.5,
            quarantined: 1,
            pushes_pending: 2,
            subscriber_lag: vec![("crm".into(), 12)],
            registration_ok: Some(false),
            optout_oldest_pending: vec![("service".into(), 0.0), ("crm".into(), 3600.25)],
            optouts_overdue: 3,
        });
        assert!(text.contains(
            "outreach_sync_optout_oldest_pending_seconds{destination=\"crm\"} 3600.250\n"
        ));
        assert!(text.contains("outreach_sync_optouts_overdue 3\n"));
        assert!(text.contains("outreach_sync_messages_after_optout_total 0\n"));
        assert!(text.contains(
            "outreach_sync_subscriber_requests_total{subscriber=\"crm\",outcome=\"failed\"} 2\n"
        ));
        assert!(text.contains("outreach_sync_subscriber_lag_entries{subscriber=\"crm\"} 12\n"));
        assert!(text.contains("outreach_sync_deliveries_total{outcome=\"backlog_full\"} 1\n"));
        assert!(text.contains("outreach_sync_deliveries_total{outcome=\"accepted\"} 0\n"));
        assert!(text.contains("outreach_sync_upstream_responses_total{status=\"429\"} 1\n"));
        assert!(text.contains("outreach_sync_upstream_responses_total{status=\"other\"} 1\n"));
        assert!(text.contains("outreach_sync_reconcile_repairs_total 2\n"));
        assert!(text.contains("outreach_sync_outbox_backlog 7\n"));
        assert!(text.contains("outreach_sync_apply_lag_seconds 1.500\n"));
        assert!(text.contains("outreach_sync_pushes_total{outcome=\"sent\"} 1\n"));
        assert!(text.contains("outreach_sync_registration_ok 0\n"));
        let unchecked = m.render(&Gauges::default());
        assert!(unchecked.contains("# TYPE outreach_sync_registration_ok gauge\n"));
        assert!(!unchecked.contains("outreach_sync_registration_ok 0"));
        let helps = text.lines().filter(|l| l.starts_with("# HELP")).count();
        let types = text.lines().filter(|l| l.starts_with("# TYPE")).count();
        assert_eq!(helps, types);
    }
}
