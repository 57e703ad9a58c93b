//! The reconciler's bookkeeping on SQLite: checkpoints of interrupted scans, the last pass
//! of each organization, and every pass's summary.

use crate::store::PassStore;
use sqlx::{SqliteConnection, SqlitePool};

use crate::store::PassRecord;

impl PassStore for SqlitePool {
    crate::store::reconcile::shared!();

    async fn record_pass(&self, pass: PassRecord<'_>) -> Result<(), crate::store::Error> {
        sqlx::query(
        "INSERT INTO reconcile_passes (id, started_at, finished_at, summary) VALUES (?, ?, ?, ?)",
    )
    .bind(pass.id)
    .bind(pass.started_at)
    .bind(pass.finished_at)
    .bind(pass.summary)
    .execute(self)
    .await?;
        Ok(())
    }
}

crate::store::reconcile::page_written!(SqliteConnection);
