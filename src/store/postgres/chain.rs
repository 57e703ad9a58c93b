//! The ledger's hash chain on PostgreSQL (the statements: [`crate::store::chain`]). The
//! chain of entries recorded before it existed is computed by its migration.

crate::store::chain::statements!(sqlx::PgPool);
