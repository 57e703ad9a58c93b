//! What became of the deliveries, kept two ways: the most recent records, attempt by attempt
//! ([`DELIVERY_RECORDS_KEPT`] of them, so a sandbox running for weeks stays small), and
//! counters of every event since the start ([`DeliveryCounts`]), for totals.

use std::collections::VecDeque;

use serde::Serialize;

use super::Job;

/// Delivery records kept: the most recent ones; older ones are forgotten, the counters
/// ([`DeliveryCounts`]) keep counting.
pub const DELIVERY_RECORDS_KEPT: usize = 10_000;

/// What became of one attempt (or of an event dropped on purpose).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryRecord {
    pub event_id: String,
    pub event_type: &'static str,
    pub registration_id: String,
    pub target_url: String,
    pub attempt: u32,
    /// The target's HTTP status, if it answered.
    pub status: Option<u16>,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Delivered,
    /// A non-2xx or no answer; another attempt follows unless attempts ran out.
    Failed,
    /// The last attempt failed too.
    GaveUp,
    /// Dropped by fault injection.
    Dropped,
}

/// Totals since the sandbox started. An event here is one event for one registration (an
/// event two registrations want counts twice). Every event is in exactly one of `dropped`,
/// `delivered`, `gave_up` and `waiting`, so those four add up to `events`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryCounts {
    /// Events handed over for delivery.
    pub events: u64,
    /// Events never sent, by fault injection.
    pub dropped: u64,
    /// Events the target accepted (2xx), at least once.
    pub delivered: u64,
    /// Events given up on: every attempt of every copy was refused or unanswered.
    pub gave_up: u64,
    /// Events not yet dropped, delivered or given up on: queued, delayed or being retried.
    pub waiting: u64,
    /// Events sent twice, by fault injection (each copy is delivered and counted on its own:
    /// `delivered` counts the event once).
    pub duplicated: u64,
    /// Requests made: every attempt of every copy.
    pub attempts: u64,
    /// Attempts refused (non-2xx) or unanswered; every one but a copy's last is retried.
    pub failed_attempts: u64,
}

/// The records of the most recent deliveries and the totals.
#[derive(Default)]
pub(super) struct Log {
    pub(super) records: VecDeque<DeliveryRecord>,
    pub(super) counts: DeliveryCounts,
}

impl Log {
    pub(super) fn push(&mut self, record: DeliveryRecord) {
        if self.records.len() == DELIVERY_RECORDS_KEPT {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }
}

/// The record of one attempt of `job` (attempt 0: none was made).
pub(super) fn record(
    job: &Job,
    attempt: u32,
    status: Option<u16>,
    outcome: Outcome,
) -> DeliveryRecord {
    DeliveryRecord {
        event_id: job.event_id.clone(),
        event_type: job.event_type,
        registration_id: job.registration_id.clone(),
        target_url: job.target_url.clone(),
        attempt,
        status,
        outcome,
    }
}
