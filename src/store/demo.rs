//! The figures of `demo`'s live view that no other concern reads: the reconciliation
//! passes' totals, and the mirror's consent beside the service's. Written here for both
//! backends, which differ only in how they read a number out of a pass's JSON summary.
#![allow(async_fn_in_trait)] // Called on the concrete `Pool`, whose futures are Send.

use super::Error;
use super::Pool;
use super::backend::on_backend;
use crate::model::{MirroredConsent, PassTotals};

/// What the demo's view reads of the daemon's database, beside `status`.
pub trait DemoStore {
    /// Reconciliation passes recorded and the consent differences they repaired.
    async fn pass_totals(&self) -> Result<crate::model::PassTotals, Error>;

    /// Every row of the `consent_current` view.
    async fn mirrored_consent(&self) -> Result<Vec<crate::model::MirroredConsent>, Error>;
}

/// The same on both backends.
const MIRRORED_CONSENT: &str =
    "SELECT organization_id, lead_id, phone_number, opted_out, account_id FROM consent_current";

/// Reconciliation passes recorded and the differences they repaired: the backends differ
/// in how they read a number out of a pass's JSON summary.
fn pass_totals_sql(pool: &Pool) -> &'static str {
    match pool {
        Pool::Sqlite(_) => {
            "SELECT COUNT(*), COALESCE(SUM(summary ->> '$.repaired'), 0) FROM reconcile_passes"
        }
        Pool::Postgres(_) => {
            "SELECT COUNT(*), COALESCE(SUM((summary ->> 'repaired')::BIGINT), 0)::BIGINT FROM
                 reconcile_passes"
        }
    }
}

impl DemoStore for Pool {
    async fn pass_totals(&self) -> Result<PassTotals, Error> {
        let sql = pass_totals_sql(self);
        on_backend!(self, |pool| {
            let (passes, repaired) = sqlx::query_as(sql).fetch_one(pool).await?;
            Ok(PassTotals { passes, repaired })
        })
    }

    async fn mirrored_consent(&self) -> Result<Vec<MirroredConsent>, Error> {
        on_backend!(self, |pool| Ok(sqlx::query_as(MIRRORED_CONSENT)
            .fetch_all(pool)
            .await?))
    }
}
