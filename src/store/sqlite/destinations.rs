//! Destinations' outcomes on SQLite (the statements: [`crate::store::destinations`]).

crate::store::destinations::statements!(sqlx::SqlitePool);
