//! What the daemon counts of the systems outside the service: each `[[source]]`'s records
//! and last success, each destination's and subscriber's requests, each warehouse's
//! refills, and the times a system gave in the future.

use super::labels::{
    DestinationLabels, DestinationNameLabels, SourceLabels, SourceNameLabels, SubscriberLabels,
    SystemLabels,
};
use super::{DestinationOutcome, Metrics, SourceOutcome, SubscriberOutcome, count};

impl Metrics {
    /// Shows source `name`'s series before anything is counted: its records at zero, its
    /// interval, and its last success at `now` (the clock of its staleness starts with the
    /// process).
    pub fn source_known(&self, name: &str, every_secs: u64, now: i64) {
        let labels = SourceNameLabels {
            source: name.to_owned(),
        };
        self.source_interval
            .get_or_create(&labels)
            .set(i64::try_from(every_secs).unwrap_or(i64::MAX));
        self.source_last_success.get_or_create(&labels).set(now);
        for &outcome in SourceOutcome::ALL {
            let _ = self.source_records.get_or_create(&SourceLabels {
                source: name.to_owned(),
                outcome,
            });
        }
    }

    /// Counts what `n` records of source `name` came to.
    pub fn source_records(&self, name: &str, outcome: SourceOutcome, n: u64) {
        self.source_records
            .get_or_create(&SourceLabels {
                source: name.to_owned(),
                outcome,
            })
            .inc_by(n);
    }

    /// Counts what records of source `name` came to.
    pub fn source_counts(&self, name: &str, counts: crate::model::SourceCounts) {
        for (outcome, n) in [
            (SourceOutcome::OptOut, counts.opt_outs),
            (SourceOutcome::OptIn, counts.opt_ins),
            (SourceOutcome::Confirmed, counts.confirmed),
            (SourceOutcome::Ignored, counts.ignored),
            (SourceOutcome::Review, counts.review),
        ] {
            self.source_records(name, outcome, u64::try_from(n).unwrap_or(0));
        }
    }

    /// Counts a warehouse `destination` filled again from its first entry.
    pub fn destination_refilled(&self, destination: &str) {
        self.destination_refills
            .get_or_create(&DestinationNameLabels {
                destination: destination.to_owned(),
            })
            .inc();
    }

    /// How many times `destination` was filled again in this process.
    pub fn destination_refills_counted(&self, destination: &str) -> u64 {
        count(
            &self.destination_refills,
            &DestinationNameLabels {
                destination: destination.to_owned(),
            },
        )
    }

    /// Counts `n` times `system` gave in the future, ranked at their receipt.
    pub fn future_times(&self, system: &str, n: u64) {
        if n > 0 {
            self.future_times
                .get_or_create(&SystemLabels {
                    system: system.to_owned(),
                })
                .inc_by(n);
        }
    }

    /// How many times `system` gave in the future in this process.
    pub fn future_times_counted(&self, system: &str) -> u64 {
        count(
            &self.future_times,
            &SystemLabels {
                system: system.to_owned(),
            },
        )
    }

    /// How many records of source `name` came to `outcome` in this process.
    pub fn source_records_counted(&self, name: &str, outcome: SourceOutcome) -> u64 {
        let labels = SourceLabels {
            source: name.to_owned(),
            outcome,
        };
        count(&self.source_records, &labels)
    }

    /// Source `name` read to its end at `at` (Unix seconds).
    pub fn source_succeeded(&self, name: &str, at: i64) {
        self.source_last_success
            .get_or_create(&SourceNameLabels {
                source: name.to_owned(),
            })
            .set(at);
    }

    /// A request to a destination (or an entry found unmatched, which sends none).
    pub fn destination_request(&self, destination: &str, outcome: DestinationOutcome) {
        let destination = destination.to_owned();
        self.destination_requests
            .get_or_create(&DestinationLabels {
                destination,
                outcome,
            })
            .inc();
    }

    /// `rows` rows of a warehouse's request ended in `outcome` (`sent` or `refused`).
    pub fn destination_rows(&self, destination: &str, outcome: DestinationOutcome, rows: u64) {
        let destination = destination.to_owned();
        self.destination_requests
            .get_or_create(&DestinationLabels {
                destination,
                outcome,
            })
            .inc_by(rows);
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
}
