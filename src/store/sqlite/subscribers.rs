//! Subscribers' delivery state on SQLite (the statements: [`crate::store::subscribers`]).

crate::store::subscribers::statements!(sqlx::SqlitePool);
