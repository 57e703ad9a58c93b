//! Leases and replica heartbeats on PostgreSQL (the statements: [`crate::store::leases`]).

crate::store::leases::statements!(
    sqlx::PgPool,
    "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
);
