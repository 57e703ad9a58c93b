//! Leases and replica heartbeats on PostgreSQL (the statements: [`crate::store::leases`]).

/// Now, in Unix milliseconds, on the database's clock.
pub(crate) const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";
