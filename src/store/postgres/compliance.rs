//! The compliance report's reads on PostgreSQL (the statements: [`crate::store::compliance`]).

crate::store::compliance::statements!(sqlx::PgPool, "jsonb_array_elements_text(CAST($1 AS jsonb))");
