//! The figures of `demo`'s live view that no other concern reads: the reconciliation
//! passes' totals, and the mirror's consent beside the service's. Implemented here for both
//! backends, which differ only in how they read a number out of a pass's JSON summary.
#![allow(async_fn_in_trait)] // Called on the concrete `Pool`, whose futures are Send.

use enum_dispatch::enum_dispatch;

use crate::model::{MirroredConsent, PassTotals};

// enum_dispatch writes these signatures again beside `Pool`: every type is named by its
// whole path, so that they resolve there too.

/// What the demo's view reads of the daemon's database, beside `status`.
#[enum_dispatch]
pub trait DemoStore {
    /// Reconciliation passes recorded and the consent differences they repaired.
    async fn pass_totals(&self) -> Result<crate::model::PassTotals, crate::store::Error>;

    /// Every row of the `consent_current` view.
    async fn mirrored_consent(
        &self,
    ) -> Result<Vec<crate::model::MirroredConsent>, crate::store::Error>;
}

/// The same on both backends.
const MIRRORED_CONSENT: &str =
    "SELECT organization_id, lead_id, phone_number, opted_out, account_id FROM consent_current";

/// The statements for the pool type `$pool`, whose pass totals `$totals` reads.
macro_rules! statements {
    ($pool:ty, $totals:literal) => {
        impl DemoStore for $pool {
            async fn pass_totals(&self) -> Result<PassTotals, crate::store::Error> {
                let (passes, repaired) = sqlx::query_as($totals).fetch_one(self).await?;
                Ok(PassTotals { passes, repaired })
            }

            async fn mirrored_consent(&self) -> Result<Vec<MirroredConsent>, crate::store::Error> {
                Ok(sqlx::query_as(MIRRORED_CONSENT).fetch_all(self).await?)
            }
        }
    };
}

statements!(
    sqlx::SqlitePool,
    "SELECT COUNT(*), COALESCE(SUM(summary ->> '$.repaired'), 0) FROM reconcile_passes"
);

statements!(
    sqlx::PgPool,
    "SELECT COUNT(*), COALESCE(SUM((summary ->> 'repaired')::BIGINT), 0)::BIGINT FROM reconcile_passes"
);
