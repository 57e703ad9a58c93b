//! The ledger's hash chain as stored: walking every entry in `seq` order to check it, the
//! head as stored, and the hourly log of the head. The hashing itself is `model::chain`.

use crate::model::chain::{Break, ChainHead, Walk};
use crate::store::ChainStore;
use crate::store::Pool;

/// Entries read per page of a walk.
const WALK_PAGE: i64 = 10_000;

/// How often the leader logs the chain's head, so that it can be kept elsewhere (a log
/// shipped off the machine holds the ledger to what it was).
pub const HEAD_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3600);

/// Walks the whole chain in `seq` order: `Ok(head)` when every entry matches its hash,
/// `Err(break)` naming the first that does not.
pub async fn verify(
    pool: impl Into<Pool>,
) -> Result<Result<ChainHead, Break>, crate::store::Error> {
    let pool = pool.into();
    let mut walk = Walk::default();
    loop {
        let after = walk.head().seq;
        let rows = pool.chain_page(after, WALK_PAGE).await?;
        if rows.is_empty() {
            return Ok(Ok(walk.head().clone()));
        }
        if let Err(broken) = walk.check(&rows) {
            return Ok(Err(broken));
        }
    }
}

/// The last entry and its hash, as stored (not checked: see [`verify`]).
pub async fn head(pool: impl Into<Pool>) -> Result<ChainHead, crate::store::Error> {
    (pool.into()).chain_head().await
}

/// Logs the chain's head now and every [`HEAD_LOG_INTERVAL`] until `stop`; a failed read
/// is logged and tried again at the next tick.
pub async fn log_head(pool: Pool, stop: tokio_util::sync::CancellationToken) {
    let mut ticker = tokio::time::interval(HEAD_LOG_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => match head(&pool).await {
                Ok(head) => tracing::info!(seq = head.seq, hash = %head.hash, "ledger chain head"),
                Err(error) => tracing::warn!(%error, "cannot read the ledger chain head"),
            },
        }
    }
}
