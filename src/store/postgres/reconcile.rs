//! The reconciler's bookkeeping on PostgreSQL: checkpoints of interrupted scans, the last pass
//! of each organization, and every pass's summary.

use sqlx::{PgConnection, PgPool};

use crate::store::PassRecord;
use crate::store::PassStore;

impl PassStore for PgPool {
    crate::store::reconcile::shared!();

    async fn record_pass(&self, pass: PassRecord<'_>) -> Result<(), crate::store::Error> {
        sqlx::query(
        "INSERT INTO reconcile_passes (id, started_at, finished_at, summary) VALUES ($1, $2::TIMESTAMPTZ, $3::TIMESTAMPTZ, $4::JSONB)",
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

crate::store::reconcile::page_written!(PgConnection);
