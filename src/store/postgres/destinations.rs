//! Destinations' outcomes on PostgreSQL (the statements: [`crate::store::destinations`]).

crate::store::destinations::statements!(sqlx::PgPool);
