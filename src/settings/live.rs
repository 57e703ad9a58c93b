//! Settings the running daemon takes anew on reload (`serve` on SIGHUP): the webhook
//! secrets' verifier and the admin tokens.

use std::sync::{Arc, PoisonError, RwLock};

/// A value replaced whole while readers hold on to the one they took: a request verifies
/// against one set of secrets from start to end, never half the old and half the new.
/// Cloning shares it.
pub struct Live<T>(Arc<RwLock<Arc<T>>>);

impl<T> Live<T> {
    pub fn new(value: T) -> Self {
        Self(Arc::new(RwLock::new(Arc::new(value))))
    }

    /// The value in force now.
    pub fn current(&self) -> Arc<T> {
        // The lock only guards a swap of one `Arc`: a panic cannot leave it half done.
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Puts `value` in force for every reader from now on.
    pub fn replace(&self, value: T) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(value);
    }
}

impl<T> Clone for Live<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

/// Says what kind of value it holds, never the value: it may be a secret.
impl<T> std::fmt::Debug for Live<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Live<{}>", std::any::type_name::<T>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_what_it_took_and_the_next_one_sees_the_replacement() {
        let live = Live::new(vec!["s3cret-a"]);
        let shared = live.clone();
        let taken = live.current();
        shared.replace(vec!["s3cret-b", "s3cret-a"]);
        assert_eq!(*taken, vec!["s3cret-a"]);
        assert_eq!(*live.current(), vec!["s3cret-b", "s3cret-a"]);
        assert!(!format!("{live:?}").contains("s3cret"));
    }
}
