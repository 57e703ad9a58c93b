//! The cap on a listener's open connections: who is let in, and whose place a new one takes
//! (the oldest quiet connection of the busiest address); and the descriptors the caps need.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use super::{Connection, Limits};
use crate::metrics::{Closed, Listener, Metrics};

/// The open connections of one listener, oldest first.
pub(super) struct Open {
    max: usize,
    which: Listener,
    metrics: Arc<Metrics>,
    next_id: AtomicU64,
    started: Instant,
    open: Mutex<Connections>,
}

impl Open {
    pub(super) fn new(max: usize, which: Listener, metrics: Arc<Metrics>) -> Self {
        Self {
            max: max.max(1),
            which,
            metrics,
            next_id: AtomicU64::new(0),
            started: Instant::now(),
            open: Mutex::new(Connections::default()),
        }
    }

    /// A place for a new connection from `peer`: a free one, or the place of a connection
    /// with no request in progress (see [`Open::victim`]); `None` when every one is busy.
    pub(super) fn admit(&self, peer: IpAddr) -> Option<Arc<Connection>> {
        let mut open = self.lock();
        if open.len >= self.max {
            let (address, id) = open.victim()?;
            open.remove(address, id);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection::new(id, peer, self.started));
        open.insert(connection.clone());
        self.metrics.connections_open(self.which, open.len);
        Some(connection)
    }

    pub(super) fn release(&self, address: IpAddr, id: u64) {
        let mut open = self.lock();
        open.remove(address, id);
        self.metrics.connections_open(self.which, open.len);
    }

    /// This listener closed a connection itself, for `reason`.
    pub(super) fn closed(&self, reason: Closed) {
        self.metrics.connection_closed(self.which, reason);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connections> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The open connections, by client address.
#[derive(Default)]
struct Connections {
    /// Each address's connections, oldest first.
    by_address: HashMap<IpAddr, BTreeMap<u64, Arc<Connection>>>,
    len: usize,
}

impl Connections {
    fn insert(&mut self, connection: Arc<Connection>) {
        let held = self.by_address.entry(connection.peer).or_default();
        held.insert(connection.id, connection);
        self.len += 1;
    }

    /// The connection to close for a new one: of those with no request in progress, the
    /// oldest of the address that holds the most connections (a flood from a few addresses
    /// evicts its own). Looks at the busiest address first, so that a flood costs each new
    /// connection a look at a few of its own, not at every connection.
    fn victim(&self) -> Option<(IpAddr, u64)> {
        let oldest_quiet = |(address, held): (&IpAddr, &BTreeMap<u64, Arc<Connection>>)| {
            held.values().find(|c| !c.busy()).map(|c| (*address, c.id))
        };
        let busiest = self.by_address.iter().max_by_key(|(_, held)| held.len())?;
        oldest_quiet(busiest).or_else(|| {
            let mut addresses: Vec<_> = self.by_address.iter().collect();
            addresses.sort_by_key(|(_, held)| std::cmp::Reverse(held.len()));
            addresses.into_iter().find_map(oldest_quiet)
        })
    }

    /// Forgets connection `id` of `address`, and tells it to close if it is still open.
    fn remove(&mut self, address: IpAddr, id: u64) {
        let Some(held) = self.by_address.get_mut(&address) else {
            return;
        };
        if let Some(connection) = held.remove(&id) {
            connection.evicted.cancel();
            self.len -= 1;
        }
        if held.is_empty() {
            self.by_address.remove(&address);
        }
    }
}

/// Descriptors kept aside for the database, the service's and subscribers' clients, and
/// files, beside the listeners' connections.
pub const RESERVED_DESCRIPTORS: u64 = 256;

/// Raises the process's open-file limit to its hard limit, and lowers the listeners' caps
/// (in proportion) when even that cannot hold them beside [`RESERVED_DESCRIPTORS`]: past
/// the limit, accepting fails and both listeners stall together. Gives back the limit.
pub fn fit_descriptors(ingest: &mut Limits, admin: &mut Limits) -> u64 {
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(error) => {
            tracing::warn!(%error, "cannot read the open-file limit; the connection caps stay as set");
            return u64::MAX;
        }
    };
    let wanted = (ingest.max_connections + admin.max_connections) as u64;
    let room = limit.saturating_sub(RESERVED_DESCRIPTORS).max(2);
    if wanted + RESERVED_DESCRIPTORS > limit {
        let fit = |cap: usize| {
            usize::try_from((cap as u64).saturating_mul(room) / wanted).map_or(1, |c| c.max(1))
        };
        let (ingest_was, admin_was) = (ingest.max_connections, admin.max_connections);
        ingest.max_connections = fit(ingest_was);
        admin.max_connections = fit(admin_was);
        tracing::warn!(
            open_file_limit = limit,
            ingest.max_connections = ingest.max_connections,
            admin.max_connections = admin.max_connections,
            "ingest.max_connections ({ingest_was}) and admin.max_connections ({admin_was}) do not fit the open-file limit beside {RESERVED_DESCRIPTORS} reserved descriptors; both are lowered (raise LimitNOFILE, or lower them)"
        );
    }
    limit
}
