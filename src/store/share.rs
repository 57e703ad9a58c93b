//! What sharing opt-outs across accounts reads: the opt-outs recorded after a point of the
//! ledger, but those that are themselves shared. One text for both backends.
#![allow(async_fn_in_trait)] // Called on the concrete `Pool`, whose futures are Send.

use super::Error;
use super::Pool;
use super::backend::on_backend;

/// The ledger as sharing across accounts follows it.
pub trait ShareStore {
    /// Up to `limit` opt-outs after entry `after`, in seq order, that are not themselves
    /// shared from another account (their `event_ref` is not `shared:...`), each saying
    /// whether it is derived from one recorded already (an echo, a suppression).
    async fn opt_outs_to_share(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::OptOutToShare>, Error>;
}

/// An entry is derived, not an act of the person's, when it is a shared copy (never read:
/// `shared:` refs), the suppression of a lead that appeared later (`suppression:` refs), or
/// a webhook the apply path recognised as the echo of a push (a push names it `echo_ref`).
/// What it follows was shared already; an opt-out the person gave again, after an opt-in,
/// is none of these, whatever was shared before it.
const OPT_OUTS_TO_SHARE: &str =
    "SELECT e.seq, e.account_id, e.organization_id, e.phone_number, e.occurred_at,
       (e.event_ref LIKE 'suppression:%'
        OR EXISTS (SELECT 1 FROM pushes AS p
                   WHERE p.echo_ref = e.event_ref AND p.account_id = e.account_id)) AS derived
     FROM ledger AS e
     WHERE e.seq > $1 AND e.opted_out AND e.event_ref NOT LIKE 'shared:%'
     ORDER BY e.seq LIMIT $2";

impl ShareStore for Pool {
    async fn opt_outs_to_share(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::OptOutToShare>, Error> {
        on_backend!(self, |pool| {
            Ok(sqlx::query_as(OPT_OUTS_TO_SHARE)
                .bind(after)
                .bind(limit)
                .fetch_all(pool)
                .await?)
        })
    }
}
