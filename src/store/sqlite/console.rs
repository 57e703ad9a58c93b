//! Console sessions on SQLite (the statements: [`crate::store::console`]).

crate::store::console::statements!(sqlx::SqlitePool);
