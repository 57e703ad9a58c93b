//! The rules of the trust boundary that are pure: what a time another system gives ranks
//! at, and the region its numbers are read in. Every system the daemon hears (the service,
//! every source) goes through these, so that no kind can forget them; links are resolved by
//! `systems::http::resolve_link`, text escaped by [`super::text`].

use chrono::{DateTime, TimeDelta, Utc};

use super::phone::{self, E164, PhoneError, Region};

/// How far past its receipt a given time may lie by default: clocks drift by seconds, and
/// events reordered within five minutes keep their order.
pub const DEFAULT_FUTURE_TOLERANCE_SECS: u64 = 300;

/// The rules as configured (`[consent] future_tolerance_secs`, `default_region`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trust {
    pub future_tolerance: TimeDelta,
    pub region: Region,
}

impl Default for Trust {
    fn default() -> Self {
        Self {
            future_tolerance: TimeDelta::seconds(DEFAULT_FUTURE_TOLERANCE_SECS as i64),
            region: Region::default(),
        }
    }
}

/// A time another system gave, as the ledger ranks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ranked {
    pub at: DateTime<Utc>,
    /// The time given, when it lay further past its receipt than the tolerance: it ranks
    /// at the receipt instead (the original stays in the evidence, and is counted).
    pub future: Option<DateTime<Utc>>,
}

impl Trust {
    /// `given` (an event's `createdAt`, a `modified_date`, a `DateChanged`) received at
    /// `received`: as given, unless it lies more than the tolerance past the receipt, when
    /// it ranks at the receipt. A time in 2099 would otherwise outrank every later act of
    /// the person until 2099.
    pub fn time(&self, given: DateTime<Utc>, received: DateTime<Utc>) -> Ranked {
        if given > received + self.future_tolerance {
            Ranked {
                at: received,
                future: Some(given),
            }
        } else {
            Ranked {
                at: given,
                future: None,
            }
        }
    }

    /// A number another system wrote, by the one rule of every way a number comes in: a
    /// national number takes the region's code; one that is not a possible number there is
    /// an error, never guessed into another country's.
    pub fn number(&self, written: &str) -> Result<E164, PhoneError> {
        phone::normalize(written, self.region)
    }
}

/// Where a read that started at `started` may move its watermark, given the latest change
/// time it `found`: never past its own start, so that a change time in the future (a wrong
/// clock, one bad row) cannot make the reads after it skip what happens until then.
pub fn watermark(found: DateTime<Utc>, started: DateTime<Utc>) -> DateTime<Utc> {
    found.min(started)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn a_time_within_the_tolerance_ranks_as_given_and_one_past_it_at_the_receipt() {
        let trust = Trust::default();
        let received = at("2026-12-02T10:00:00Z");
        let drift = at("2026-12-02T10:04:59Z");
        assert_eq!(
            trust.time(drift, received),
            Ranked {
                at: drift,
                future: None
            }
        );
        let past = at("2026-12-01T10:00:00Z");
        assert_eq!(trust.time(past, received).at, past);
        let far = at("2099-01-01T00:00:00Z");
        assert_eq!(
            trust.time(far, received),
            Ranked {
                at: received,
                future: Some(far)
            }
        );
        let just_over = at("2026-12-02T10:05:01Z");
        assert_eq!(trust.time(just_over, received).at, received);
    }

    #[test]
    fn a_tolerance_of_zero_ranks_every_later_time_at_the_receipt() {
        let trust = Trust {
            future_tolerance: TimeDelta::zero(),
            ..Trust::default()
        };
        let received = at("2026-12-02T10:00:00Z");
        assert_eq!(trust.time(received, received).future, None);
        assert_eq!(
            trust.time(at("2026-12-02T10:00:01Z"), received).at,
            received
        );
    }

    #[test]
    fn a_watermark_never_passes_the_start_of_its_read() {
        let started = at("2026-12-02T10:00:00Z");
        assert_eq!(watermark(at("2099-01-01T00:00:00Z"), started), started);
        let earlier = at("2026-12-02T09:00:00Z");
        assert_eq!(watermark(earlier, started), earlier);
    }

    #[test]
    fn a_national_number_takes_the_regions_code_and_is_never_read_as_a_country_code() {
        let us = Trust::default();
        let number = |trust: &Trust, written: &str| trust.number(written).map(E164::into_string);
        assert_eq!(number(&us, "2025550103").as_deref(), Ok("+12025550103"));
        assert_eq!(number(&us, "12025550103").as_deref(), Ok("+12025550103"));
        assert_eq!(number(&us, "+12025550103").as_deref(), Ok("+12025550103"));
        assert_eq!(
            number(&us, "011 44 20 7946 0958").as_deref(),
            Ok("+442079460958")
        );
        // `00` is not the international prefix from the US: not a US number, not guessed.
        assert!(number(&us, "00442079460958").is_err());
        let gb = Trust {
            region: "GB".parse().unwrap(),
            ..Trust::default()
        };
        assert_eq!(
            number(&gb, "00442079460958").as_deref(),
            Ok("+442079460958")
        );
        assert_eq!(number(&gb, "020 7946 0958").as_deref(), Ok("+442079460958"));
        assert!(number(&us, "555").is_err());
        assert!(number(&us, "20255501031234567890").is_err());
    }
}
