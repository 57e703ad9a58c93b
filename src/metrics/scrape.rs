//! The gauges that describe the database (backlog, lag, quarantine, pending pushes, the
//! subscribers' and destinations' lag, the destinations stopped in `error`, the
//! registrations' check, the opt-outs not yet honoured): read by the
//! caller at scrape time and encoded by a collector, so they can never drift from the truth.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue};
use prometheus_client::metrics::MetricType;

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
    /// Each destination's (system of record's) lag, in entries.
    pub destination_lag: Vec<(String, u64)>,
    /// Per destination (system of record), 1 while its state is `error`, else 0.
    pub destination_error: Vec<(String, u64)>,
    /// Per destination (the service, each subscriber and system of record), the age in
    /// seconds of the oldest opt-out it has not had (0 when none).
    pub optout_oldest_pending: Vec<(String, f64)>,
    /// Opt-outs past their deadline and not yet had by every destination.
    pub optouts_overdue: u64,
    /// Replies waiting for a person's decision.
    pub review_waiting: u64,
    /// Seconds until the oldest waiting reply is due (negative once past); no sample when
    /// none waits.
    pub review_oldest_due_seconds: Option<f64>,
    /// How much of the oldest waiting reply's deadline has passed (0 to 1, more past it;
    /// 0 when none waits).
    pub review_oldest_deadline_used: f64,
}

impl Collector for Gauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        self.encode_pipeline(&mut encoder)?;
        self.encode_destinations(&mut encoder)?;
        self.encode_compliance(&mut encoder)
    }
}

impl Gauges {
    /// The outbox, the pushes and the registrations' check.
    fn encode_pipeline(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let unlabelled = |value| [(None, value)];
        gauge(
            encoder,
            "outbox_backlog",
            "Deliveries committed but not yet applied.",
            unlabelled(self.outbox_backlog),
        )?;
        gauge(
            encoder,
            "apply_lag_seconds",
            "Age of the oldest unapplied delivery.",
            [(None, self.apply_lag_seconds)],
        )?;
        gauge(
            encoder,
            "quarantined",
            "Deliveries quarantined (not applicable as they are).",
            unlabelled(self.quarantined),
        )?;
        gauge(
            encoder,
            "pushes_pending",
            "Local consent changes not yet accepted by the service.",
            unlabelled(self.pushes_pending),
        )?;
        gauge(
            encoder,
            "registration_ok",
            "1 when the last `webhooks check` found both webhook registrations right and passing a mock event, 0 when not; no sample before the first check.",
            self.registration_ok.map(|ok| (None, u64::from(ok))),
        )
    }

    /// Each subscriber's and destination's lag, error and oldest opt-out not yet had.
    fn encode_destinations(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        gauge(
            encoder,
            "subscriber_lag_entries",
            "Ledger entries after each subscriber's cursor.",
            labelled("subscriber", &self.subscriber_lag),
        )?;
        gauge(
            encoder,
            "destination_lag_entries",
            "Ledger entries after each destination's (system of record's) cursor.",
            labelled("destination", &self.destination_lag),
        )?;
        gauge(
            encoder,
            "destination_error",
            "1 while the destination (system of record) is stopped in state error (its key refused, or a lookup not found), 0 otherwise.",
            labelled("destination", &self.destination_error),
        )?;
        gauge(
            encoder,
            "optout_oldest_pending_seconds",
            "Age of the oldest opt-out the destination (the service, a subscriber or a system of record) has not had yet; 0 when none.",
            labelled("destination", &self.optout_oldest_pending),
        )
    }

    /// The opt-outs overdue and the replies waiting for review.
    fn encode_compliance(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let unlabelled = |value| [(None, value)];
        gauge(
            encoder,
            "optouts_overdue",
            "Opt-outs past their deadline ([compliance] deadline_business_days) and not yet had by every destination.",
            unlabelled(self.optouts_overdue),
        )?;
        gauge(
            encoder,
            "review_waiting",
            "Replies waiting for a person's decision (a revocation word among other words).",
            unlabelled(self.review_waiting),
        )?;
        gauge(
            encoder,
            "review_oldest_due_seconds",
            "Seconds until the oldest reply waiting for review is due (negative once past); no sample when none waits.",
            self.review_oldest_due_seconds.map(|s| (None, s)),
        )?;
        gauge(
            encoder,
            "review_oldest_deadline_used",
            "The part of the oldest waiting reply's deadline that has passed (0.5: half of it); 0 when none waits.",
            [(None, self.review_oldest_deadline_used)],
        )
    }
}

/// One label per sample, `key` = each name.
fn labelled<'a, V: Copy>(
    key: &'static str,
    samples: &'a [(String, V)],
) -> impl Iterator<Item = (Option<(&'static str, &'a str)>, V)> {
    samples
        .iter()
        .map(move |(name, value)| (Some((key, name.as_str())), *value))
}

/// A gauge family: its help and type, then its samples (one label or none, value).
fn gauge<'a, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: impl IntoIterator<Item = (Option<(&'static str, &'a str)>, V)>,
) -> std::fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (label, value) in samples {
        match label {
            Some(label) => family.encode_family(&[label])?.encode_gauge(&value)?,
            None => family.encode_gauge(&value)?,
        }
    }
    Ok(())
}
