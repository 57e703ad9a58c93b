//! The tests' one polling loop, for what gives no signal to wait on.

use std::time::Duration;

/// How often [`within`] looks again.
const POLL_EVERY: Duration = Duration::from_millis(10);

/// What a probe of [`within`] found: `true`, or `Some` value.
pub trait Found {
    type Value;
    fn found(self) -> Option<Self::Value>;
}

impl Found for bool {
    type Value = ();
    fn found(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Found for Option<T> {
    type Value = T;
    fn found(self) -> Option<T> {
        self
    }
}

/// What `probe` finds (it answers `true`, or `Some` value) once it does, asking again every
/// [`POLL_EVERY`]; `None` when it found nothing within `limit` (of the runtime's clock, so
/// paused time passes at once). The tests' one polling loop: for what gives no signal to
/// wait on (another process, a browser, the database as another process left it).
pub async fn within<R: Found>(
    limit: Duration,
    mut probe: impl AsyncFnMut() -> R,
) -> Option<R::Value> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = probe().await.found() {
            return Some(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// [`within`], failing the test when nothing was found, with `what` was waited for.
pub async fn eventually<R: Found>(
    what: impl std::fmt::Display,
    limit: Duration,
    probe: impl AsyncFnMut() -> R,
) -> R::Value {
    match within(limit, probe).await {
        Some(value) => value,
        None => panic!("waited {limit:?} for {what}, in vain"),
    }
}
