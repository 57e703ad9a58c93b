//! What sharing opt-outs across accounts reads: the opt-outs recorded after a point of the
//! ledger, but those that are themselves shared. One text for both backends.
#![allow(async_fn_in_trait)] // Called on the concrete `Pool`, whose futures are Send.

use enum_dispatch::enum_dispatch;

// enum_dispatch writes these signatures again beside `Pool`: every type is named by its
// whole path, so that they resolve there too.

/// The ledger as sharing across accounts follows it.
#[enum_dispatch]
pub trait ShareStore {
    /// Up to `limit` opt-outs after entry `after`, in seq order, that are not themselves
    /// shared from another account (their `event_ref` is not `shared:...`), each saying
    /// whether it only confirms what sharing did.
    async fn opt_outs_to_share(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::OptOutToShare>, crate::store::Error>;
}

/// Whether sharing had opted the number out in the entry's account before it: the last
/// account-wide entry of the number there is a shared opt-out (`ledger_by_phone` finds it).
const OPT_OUTS_TO_SHARE: &str = "SELECT e.seq, e.account_id, e.phone_number, e.occurred_at,
       COALESCE((SELECT s.opted_out AND s.event_ref LIKE 'shared:%' FROM ledger AS s
                 WHERE s.phone_number = e.phone_number AND s.seq < e.seq
                   AND s.account_id = e.account_id AND s.organization_id = '*'
                 ORDER BY s.seq DESC LIMIT 1), FALSE) AS confirms_sharing
     FROM ledger AS e
     WHERE e.seq > $1 AND e.opted_out AND e.event_ref NOT LIKE 'shared:%'
     ORDER BY e.seq LIMIT $2";

macro_rules! statements {
    ($pool:ty) => {
        impl ShareStore for $pool {
            async fn opt_outs_to_share(
                &self,
                after: i64,
                limit: i64,
            ) -> Result<Vec<crate::model::OptOutToShare>, crate::store::Error> {
                Ok(sqlx::query_as(OPT_OUTS_TO_SHARE)
                    .bind(after)
                    .bind(limit)
                    .fetch_all(self)
                    .await?)
            }
        }
    };
}

statements!(sqlx::SqlitePool);
statements!(sqlx::PgPool);
