//! Leases and replica heartbeats on SQLite (the statements: [`crate::store::leases`]).

crate::store::leases::statements!(
    sqlx::SqlitePool,
    "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
);
