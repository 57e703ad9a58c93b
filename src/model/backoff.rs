//! The wait between failed attempts: one rule for the API client's retries, the pusher's
//! persisted retries and each subscriber's sender, each with its own first and longest wait.

use std::time::Duration;

use rand::Rng as _;

/// Exponential backoff: `first` after the first failure, doubled per failure after it, never
/// more than `most` (nor less than `first`, should `most` be configured below it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub most: Duration,
}

impl Backoff {
    /// The wait after `failures` failed attempts (0 counts as 1), without jitter: `first`
    /// doubled `failures - 1` times, capped at `most`. Saturating: any count of failures is
    /// a wait within the bounds, never an overflow.
    pub fn step(&self, failures: u32) -> Duration {
        // 31 doublings at most: 2^31 times a millisecond is 24 days, past `most` in any
        // sensible configuration; `saturating_mul` holds a larger `first` at `Duration::MAX`.
        let doublings = failures.saturating_sub(1).min(31);
        self.first
            .saturating_mul(1u32 << doublings)
            .min(self.most.max(self.first))
    }

    /// [`Backoff::step`] with up to a fifth taken off at random, never below `first`.
    ///
    /// The jitter is only so much, and only downward, so that callers failing together
    /// (senders restarted at once, requests of one client hitting one outage) spread out,
    /// while the wait keeps its contract: it grows as documented, stays within
    /// `first..=most`, and the first retry comes after `first` exactly. Full or "equal"
    /// jitter (down to nothing, down to half) would make the growth from one failure to the
    /// next a matter of chance.
    pub fn wait(&self, failures: u32) -> Duration {
        let ceiling = self.step(failures);
        // A fraction of a fifth rather than the whole times a fraction: no float near
        // `Duration::MAX`, whatever `most` is.
        let off = (ceiling / 5).mul_f64(rand::thread_rng().gen_range(0.0..=1.0));
        ceiling.saturating_sub(off).max(self.first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn hour_at_most() -> Backoff {
        Backoff {
            first: SECOND,
            most: Duration::from_secs(3_600),
        }
    }

    #[test]
    fn the_step_doubles_from_first_to_most() {
        let backoff = hour_at_most();
        assert_eq!(backoff.step(0), SECOND, "no failure counts as the first");
        assert_eq!(backoff.step(1), SECOND);
        assert_eq!(backoff.step(2), Duration::from_secs(2));
        assert_eq!(backoff.step(5), Duration::from_secs(16));
        assert_eq!(backoff.step(12), Duration::from_secs(2_048));
        assert_eq!(backoff.step(13), backoff.most, "capped");
    }

    #[test]
    fn a_thousand_failures_or_any_count_wait_at_most_the_cap() {
        let tiny_first_no_cap = Backoff {
            first: Duration::from_millis(1),
            most: Duration::MAX,
        };
        // (the backoff, its step from the 32nd failure on: 31 doublings at most)
        for (backoff, late) in [
            (hour_at_most(), Duration::from_secs(3_600)),
            (tiny_first_no_cap, Duration::from_millis(1 << 31)),
            (
                Backoff {
                    first: Duration::MAX,
                    most: Duration::MAX,
                },
                Duration::MAX,
            ),
        ] {
            for failures in [32, 33, 64, 1_000, u32::MAX] {
                assert_eq!(backoff.step(failures), late, "{backoff:?} {failures}");
                let wait = backoff.wait(failures);
                assert!(wait <= late && wait >= backoff.first, "{wait:?}");
            }
        }
    }

    #[test]
    fn the_wait_is_within_a_fifth_below_the_step_and_never_below_first() {
        let backoff = Backoff {
            first: Duration::from_millis(250),
            most: Duration::from_secs(30),
        };
        for _ in 0..200 {
            assert_eq!(backoff.wait(1), backoff.first, "the first wait is exact");
            for failures in 2..40 {
                let step = backoff.step(failures);
                let wait = backoff.wait(failures);
                assert!(wait <= step, "{failures}: {wait:?} > {step:?}");
                assert!(
                    wait >= step.mul_f64(0.8),
                    "{failures}: {wait:?} < 4/5 {step:?}"
                );
                assert!(wait >= backoff.first);
            }
        }
    }

    #[test]
    fn the_wait_grows_from_one_failure_to_the_next_until_the_cap() {
        let backoff = hour_at_most();
        for _ in 0..200 {
            // Four fifths of a doubled wait is more than the whole previous one.
            for failures in 1..12 {
                assert!(
                    backoff.wait(failures + 1) > backoff.wait(failures),
                    "{failures}"
                );
            }
        }
    }

    #[test]
    fn a_cap_below_first_waits_first() {
        let backoff = Backoff {
            first: Duration::from_secs(2),
            most: SECOND,
        };
        assert_eq!(backoff.step(1), backoff.first);
        assert_eq!(backoff.wait(10), backoff.first);
    }
}
