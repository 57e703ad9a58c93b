//! Leases and replica heartbeats on SQLite (the statements: [`crate::store::leases`]).

/// Now, in Unix milliseconds, on the database's clock.
pub(crate) const NOW_MS: &str = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
