//! The reconciler's bookkeeping on SQLite: checkpoints of interrupted scans, the last pass
//! of each organization, and every pass's summary (the statements:
//! [`crate::store::reconcile`]).

crate::store::reconcile::statements!(
    sqlx::SqlitePool,
    record_pass: "INSERT INTO reconcile_passes (id, started_at, finished_at, summary, account_id)
         VALUES ($1, $2, $3, $4, $5)"
);

crate::store::reconcile::page_written!(sqlx::SqliteConnection);
