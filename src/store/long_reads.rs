//! The bounded path of long reads (a compliance report, a batch lookup, an export over the
//! admin API): a few at a time, on connections of their own, so that however many people
//! ask at once, the pool the writers and short reads use is never emptied and the work
//! stays bounded. Past the bound a caller is told to come back later.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Pool;

/// Long reads at once, per process.
pub const AT_ONCE: usize = 2;

/// Where long reads run.
#[derive(Clone)]
pub struct LongReads {
    pool: Pool,
    permits: Arc<Semaphore>,
}

/// A long read's place, and the pool it reads from; the place is freed when it is dropped.
pub struct LongRead {
    pub pool: Pool,
    _permit: OwnedSemaphorePermit,
}

impl LongReads {
    /// Long reads on `pool`, [`AT_ONCE`] at a time.
    pub fn new(pool: Pool) -> Self {
        Self {
            pool,
            permits: Arc::new(Semaphore::new(AT_ONCE)),
        }
    }

    /// A place, if one is free now.
    pub fn try_start(&self) -> Option<LongRead> {
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        Some(LongRead {
            pool: self.pool.clone(),
            _permit: permit,
        })
    }
}
