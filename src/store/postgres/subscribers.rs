//! Subscribers' delivery state on PostgreSQL (the statements: [`crate::store::subscribers`]).

crate::store::subscribers::statements!(sqlx::PgPool);
