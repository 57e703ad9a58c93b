//! The reconciler's bookkeeping on PostgreSQL: checkpoints of interrupted scans, the last
//! pass of each organization, and every pass's summary, kept as `jsonb` (the statements:
//! [`crate::store::reconcile`]).

crate::store::reconcile::statements!(
    sqlx::PgPool,
    record_pass: "INSERT INTO reconcile_passes (id, started_at, finished_at, summary, account_id)
         VALUES ($1, $2::TIMESTAMPTZ, $3::TIMESTAMPTZ, $4::JSONB, $5)"
);

crate::store::reconcile::page_written!(sqlx::PgConnection);
