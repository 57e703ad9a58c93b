//! Failed credentials, limited per client address: a bearer token or a console sign-in that
//! matches no configured token counts against its address, at most
//! `[admin] failed_auth_per_minute` (a burst of as many, refilled evenly over the minute;
//! the rate is `governor`'s). Past it the address is refused with 429 and `Retry-After`
//! until the limiter would take another failure, and while refused nothing it presents is
//! compared, the right token included: a guess cannot be confirmed faster than the limit.
//!
//! IPv6 clients are counted by /64, the block one host usually holds. The limiter forgets
//! addresses whose failures have been refilled, and the refusals it remembers are bounded.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::metrics::{AuthAttempt, AuthOutcome, Metrics};

/// Addresses refused at once, at most; past it the ones whose refusal ended are forgotten,
/// then the one ending soonest.
const REFUSED_KEPT: usize = 10_000;
/// Limiter entries above which the refilled ones are forgotten.
const LIMITER_KEPT: usize = 10_000;

/// The limiter of failed credentials.
pub struct FailedAuth {
    limiter: DefaultKeyedRateLimiter<IpAddr>,
    clock: DefaultClock,
    /// Addresses past the limit, and until when.
    refused: Mutex<HashMap<IpAddr, Instant>>,
}

/// An address past the limit: how long until it may try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub retry_after: Duration,
}

impl Limited {
    /// Whole seconds for `Retry-After` (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_secs() + u64::from(self.retry_after.subsec_nanos() > 0)
    }
}

impl FailedAuth {
    /// At most `per_minute` failures a minute from one address (at least 1).
    pub fn new(per_minute: u32) -> Self {
        let per_minute = NonZeroU32::new(per_minute).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: RateLimiter::keyed(Quota::per_minute(per_minute)),
            clock: DefaultClock::default(),
            refused: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `client` is refused now, before anything it presents is compared.
    pub fn check(&self, client: IpAddr) -> Result<(), Limited> {
        let key = counted_as(client);
        let mut refused = self.refused();
        match refused.get(&key) {
            Some(until) => match until.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Err(Limited { retry_after: left }),
                _ => {
                    refused.remove(&key);
                    Ok(())
                }
            },
            None => Ok(()),
        }
    }

    /// Counts a failure of `client`'s (in `metrics` too); `Err` when it took the address
    /// past the limit.
    pub fn failed(
        &self,
        client: IpAddr,
        attempt: AuthAttempt,
        metrics: &Metrics,
    ) -> Result<(), Limited> {
        let key = counted_as(client);
        if self.limiter.len() > LIMITER_KEPT {
            self.limiter.retain_recent();
        }
        match self.limiter.check_key(&key) {
            Ok(()) => {
                metrics.auth_failure(attempt, AuthOutcome::Refused);
                tracing::info!(client = %client, attempt = attempt.label(), "credentials refused");
                Ok(())
            }
            Err(not_until) => {
                let retry_after = not_until.wait_time_from(self.clock.now());
                self.refuse(key, retry_after);
                metrics.auth_failure(attempt, AuthOutcome::Limited);
                tracing::warn!(
                    client = %client,
                    attempt = attempt.label(),
                    retry_after_secs = retry_after.as_secs_f64(),
                    "too many failed credentials from this address: refused for a while"
                );
                Err(Limited { retry_after })
            }
        }
    }

    /// Counts a request refused unread because its address is past the limit.
    pub fn refused_unread(&self, attempt: AuthAttempt, metrics: &Metrics) {
        metrics.auth_failure(attempt, AuthOutcome::Limited);
    }

    fn refuse(&self, key: IpAddr, for_: Duration) {
        let now = Instant::now();
        let mut refused = self.refused();
        if refused.len() >= REFUSED_KEPT {
            refused.retain(|_, until| *until > now);
        }
        if refused.len() >= REFUSED_KEPT
            && let Some(soonest) = refused
                .iter()
                .min_by_key(|(_, until)| **until)
                .map(|(k, _)| *k)
        {
            refused.remove(&soonest);
        }
        refused.insert(key, now + for_);
    }

    fn refused(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Instant>> {
        self.refused.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The client's address, as the listener saw it (unspecified when served otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub IpAddr);

impl ClientAddress {
    pub fn of(extensions: &axum::http::Extensions) -> Self {
        Self(
            extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |info| info.0.ip()),
        )
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientAddress {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self::of(&parts.extensions))
    }
}

/// The address failures are counted under: an IPv4 address as it is, an IPv6 one by its
/// /64 (an IPv4-mapped one as the IPv4 address).
fn counted_as(client: IpAddr) -> IpAddr {
    match client {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let block = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(block.into())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_after_its_failures_and_others_are_not() {
        let (guard, metrics) = (FailedAuth::new(3), Metrics::new());
        let (attacker, other) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        for _ in 0..3 {
            assert_eq!(guard.check(attacker), Ok(()));
            let failed = guard.failed(attacker, AuthAttempt::Bearer, &metrics);
            assert_eq!(failed, Ok(()));
        }
        let limited = guard
            .failed(attacker, AuthAttempt::Bearer, &metrics)
            .unwrap_err();
        assert!(
            limited.retry_after > Duration::ZERO && limited.retry_after <= Duration::from_secs(20)
        );
        assert!(guard.check(attacker).is_err());
        assert_eq!(guard.check(other), Ok(()));
        let counted = |outcome| metrics.auth_failures(AuthAttempt::Bearer, outcome);
        assert_eq!(counted(AuthOutcome::Refused), 3);
        assert_eq!(counted(AuthOutcome::Limited), 1);
    }

    #[test]
    fn ipv6_addresses_of_one_64_block_count_together() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let elsewhere: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(counted_as(a), counted_as(b));
        assert_ne!(counted_as(a), counted_as(elsewhere));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(counted_as(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
    }
}
