//! The compliance report's reads on SQLite (the statements: [`crate::store::compliance`]).

crate::store::compliance::statements!(sqlx::SqlitePool, "json_each($1)");
