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
    /// shared from another account (their `event_ref` is not `shared:...`).
    async fn opt_outs_to_share(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::model::OptOutToShare>, crate::store::Error>;
}

const OPT_OUTS_TO_SHARE: &str = "SELECT seq, account_id, phone_number, occurred_at FROM ledger
     WHERE seq > $1 AND opted_out AND event_ref NOT LIKE 'shared:%'
     ORDER BY seq LIMIT $2";

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
