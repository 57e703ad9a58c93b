//! Console sessions on PostgreSQL (the statements: [`crate::store::console`]).

crate::store::console::statements!(sqlx::PgPool);
