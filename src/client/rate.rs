//! One token bucket shared by every call of a client, so all tasks together stay under
//! `requests_per_second`.

use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// A token bucket of `burst` tokens refilled at `per_second`. Each caller reserves its slot
/// under the lock and sleeps outside it, so waiting callers queue in arrival order.
#[derive(Debug)]
pub struct RateLimiter {
    state: Option<Mutex<Instant>>,
    interval: Duration,
    burst: u32,
}

impl RateLimiter {
    /// `per_second` of 0 disables limiting (for benchmarks against the sandbox). `burst` is
    /// how many requests may leave back to back after a quiet spell; 1 gives even spacing.
    pub fn new(per_second: u32, burst: u32) -> Self {
        if per_second == 0 {
            return Self::disabled();
        }
        Self {
            state: Some(Mutex::new(Instant::now())),
            interval: Duration::from_secs(1) / per_second,
            burst: burst.max(1),
        }
    }

    pub fn disabled() -> Self {
        Self {
            state: None,
            interval: Duration::ZERO,
            burst: 1,
        }
    }

    /// Waits until one more request may be sent.
    pub async fn acquire(&self) {
        let Some(state) = &self.state else {
            return;
        };
        let slot = {
            // `next` is the theoretical arrival time of the next request (GCRA): a request
            // may go at `next - (burst - 1) * interval` at the earliest.
            let mut next = state.lock().await;
            let now = Instant::now();
            let tolerance = self.interval * (self.burst - 1);
            let earliest = next.checked_sub(tolerance).unwrap_or(now);
            let slot = earliest.max(now);
            *next = (*next).max(now) + self.interval;
            slot
        };
        tokio::time::sleep_until(slot).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Paused time: the clock moves only when every task waits on a timer, so the bounds
    // are exact.

    #[tokio::test(start_paused = true)]
    async fn requests_are_spaced_by_the_rate() {
        let limiter = RateLimiter::new(100, 1);
        let start = Instant::now();
        let mut sent = Vec::new();
        for _ in 0..11 {
            limiter.acquire().await;
            sent.push(start.elapsed());
        }
        // The first goes at once, the next ten 10 ms apart.
        let expected: Vec<Duration> = (0..11).map(|i| Duration::from_millis(10 * i)).collect();
        assert_eq!(sent, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_goes_at_once_then_the_rate_applies() {
        let limiter = RateLimiter::new(10, 5);
        let start = Instant::now();
        for _ in 0..5 {
            limiter.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        // The bucket refills one token per 100 ms from the start.
        limiter.acquire().await;
        assert_eq!(start.elapsed(), Duration::from_millis(100));
        limiter.acquire().await;
        assert_eq!(start.elapsed(), Duration::from_millis(200));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_spell_earns_the_burst_back() {
        let limiter = RateLimiter::new(10, 3);
        for _ in 0..6 {
            limiter.acquire().await;
        }
        tokio::time::advance(Duration::from_secs(10)).await;
        let start = Instant::now();
        for _ in 0..3 {
            limiter.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "a fresh burst of three");
        limiter.acquire().await;
        assert_eq!(start.elapsed(), Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_callers_go_in_arrival_order() {
        let limiter = std::sync::Arc::new(RateLimiter::new(10, 1));
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let tasks: Vec<_> = (0..5)
            .map(|i| {
                let (limiter, order) = (limiter.clone(), order.clone());
                tokio::spawn(async move {
                    limiter.acquire().await;
                    order.lock().unwrap().push(i);
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_disabled_limiter_never_waits() {
        let limiter = RateLimiter::new(0, 1);
        let start = Instant::now();
        for _ in 0..1000 {
            limiter.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
