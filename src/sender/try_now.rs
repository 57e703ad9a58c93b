//! Asking a running sender to try its next delivery at once, whatever its backoff says: the
//! senders of this process list themselves in a [`Running`] while they run, and answer a
//! request between two attempts with what the attempt made at once did.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use super::Attempt;

/// A request to try at once, answered with the attempt (or the database's error, as text).
pub(super) type Request = oneshot::Sender<Result<Attempt, String>>;

/// Requests a sender has not taken yet; more wait for room.
const QUEUED: usize = 8;

/// Why a sender could not be asked to try at once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TryNowError {
    /// Not configured, not leading here (another replica's senders run), or stopping.
    #[error("no sender of that subscriber runs in this process")]
    NotRunning,
    #[error("cannot read or record the subscriber's state: {0}")]
    Database(String),
}

/// The subscribers' senders running in this process, by name. Cloned handles share the list.
#[derive(Clone)]
pub struct Running(Arc<watch::Sender<HashMap<String, mpsc::Sender<Request>>>>);

impl Default for Running {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(HashMap::new())))
    }
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.0.borrow().keys().cloned().collect();
        f.debug_tuple("Running").field(&names).finish()
    }
}

impl Running {
    /// Asks the sender of `name` to attempt its next delivery at once, even while it waits
    /// out a backoff or a `Retry-After` (a disabled subscriber stays disabled until a
    /// replay), and to keep its cursor right after; returns what the attempt did. A sender in
    /// the middle of an attempt, or delivering a backlog batch after batch, answers once it
    /// has nothing more to send at once.
    pub async fn try_now(&self, name: &str) -> Result<Attempt, TryNowError> {
        let requests = self
            .0
            .borrow()
            .get(name)
            .cloned()
            .ok_or(TryNowError::NotRunning)?;
        let (reply, answer) = oneshot::channel();
        requests
            .send(reply)
            .await
            .map_err(|_| TryNowError::NotRunning)?;
        answer
            .await
            .map_err(|_| TryNowError::NotRunning)?
            .map_err(TryNowError::Database)
    }

    /// Waits until a sender of `name` runs in this process (at once if one does).
    pub async fn started(&self, name: &str) {
        let mut list = self.0.subscribe();
        // The sender side lives as long as `self`: the wait cannot fail.
        let _ = list.wait_for(|running| running.contains_key(name)).await;
    }

    /// Lists the sender of `name` until the returned guard is dropped.
    pub(super) fn list(&self, name: &str) -> Listed {
        let (requests, taken) = mpsc::channel(QUEUED);
        self.0.send_modify(|running| {
            running.insert(name.to_owned(), requests.clone());
        });
        Listed {
            running: self.clone(),
            name: name.to_owned(),
            requests,
            taken,
        }
    }
}

/// A sender's place in [`Running`], and the requests made to it.
pub(super) struct Listed {
    running: Running,
    name: String,
    requests: mpsc::Sender<Request>,
    taken: mpsc::Receiver<Request>,
}

impl Listed {
    /// The next request (never ends while listed: the list holds the other side).
    pub(super) async fn next(&mut self) -> Option<Request> {
        self.taken.recv().await
    }
}

impl Drop for Listed {
    fn drop(&mut self) {
        // A sender started since (a new leadership term) keeps its own place.
        self.running.0.send_if_modified(|running| {
            let ours = running
                .get(&self.name)
                .is_some_and(|listed| listed.same_channel(&self.requests));
            if ours {
                running.remove(&self.name);
            }
            ours
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_a_listed_sender_is_asked_and_a_later_listing_outlives_an_earlier_one() {
        let running = Running::default();
        assert_eq!(running.try_now("crm").await, Err(TryNowError::NotRunning));

        let mut first = running.list("crm");
        let asked = tokio::spawn({
            let running = running.clone();
            async move { running.try_now("crm").await }
        });
        let reply = first.next().await.expect("a request");
        reply.send(Ok(Attempt::Idle)).expect("asked");
        assert_eq!(asked.await.expect("join"), Ok(Attempt::Idle));

        // A new term's sender lists itself before the old one's place is dropped.
        let second = running.list("crm");
        drop(first);
        running.started("crm").await;
        let asked = tokio::spawn({
            let running = running.clone();
            async move { running.try_now("crm").await }
        });
        drop(second);
        assert_eq!(asked.await.expect("join"), Err(TryNowError::NotRunning));
        assert_eq!(running.try_now("crm").await, Err(TryNowError::NotRunning));
    }
}
