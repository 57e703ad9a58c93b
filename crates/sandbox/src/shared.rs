//! State shared by the API handlers, the control endpoints and background tasks. Every
//! change to the world goes through [`Shared::with_world`], which hands the changes it
//! produced to the deliverer, so no change escapes announcement.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use rand::Rng as _;
use rand::SeedableRng as _;
use rand::rngs::StdRng;
use serde::Serialize;

use super::config::{ApiFaults, SandboxConfig};
use super::deliver::{Deliverer, Job};
use super::wire::{Event, EventKind};
use super::world::{Change, World, timestamp};

/// Counters a test can read (for example: how many token requests were made).
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub token_requests: AtomicU64,
    pub token_failures: AtomicU64,
    pub api_requests: AtomicU64,
    pub injected_faults: AtomicU64,
}

/// A copy of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatsSnapshot {
    pub token_requests: u64,
    pub token_failures: u64,
    pub api_requests: u64,
    pub injected_faults: u64,
}

/// Resource requests kept in [`Shared::requests`]: the most recent, so a long-running
/// sandbox (`demo`) does not grow without bound.
const REQUEST_LOG_CAP: usize = 10_000;

/// One resource request as the sandbox answered it (token requests are counted in
/// [`StatsSnapshot`] instead): which endpoints a client used, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiRequest {
    pub method: String,
    /// The full path, version prefix included (`/v2/organizations/org_1/leads`).
    pub path: String,
    pub query: Option<String>,
    pub status: u16,
}

/// API fault injection: rates, plus a queue of statuses to answer next (deterministic).
pub(crate) struct FaultState {
    pub faults: ApiFaults,
    pub fail_next: VecDeque<u16>,
    rng: StdRng,
}

pub(crate) struct Shared {
    pub config: SandboxConfig,
    world: Mutex<World>,
    /// Token value -> when it stops being accepted.
    tokens: Mutex<HashMap<String, Instant>>,
    pub api_faults: Mutex<FaultState>,
    pub stats: Stats,
    requests: Mutex<VecDeque<ApiRequest>>,
    pub deliverer: Deliverer,
    /// For mock_event, which posts while the caller waits.
    pub http: reqwest::Client,
    /// Makes event ids unique across sandbox runs (the daemon deduplicates on them).
    run_nonce: String,
    next_event: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub(crate) fn new(config: SandboxConfig, world: World, deliverer: Deliverer) -> Self {
        let faults = FaultState {
            faults: config.api_faults.clone(),
            fail_next: VecDeque::new(),
            rng: StdRng::seed_from_u64(config.seed ^ 0xFA17),
        };
        let nonce = Utc::now().timestamp_millis();
        Self {
            config,
            world: Mutex::new(world),
            tokens: Mutex::new(HashMap::new()),
            api_faults: Mutex::new(faults),
            stats: Stats::default(),
            requests: Mutex::new(VecDeque::new()),
            deliverer,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap_or_default(),
            run_nonce: format!("{nonce:x}"),
            next_event: AtomicU64::new(0),
        }
    }

    /// Runs `f` on the world, then announces whatever it changed.
    pub(crate) fn with_world<R>(&self, f: impl FnOnce(&mut World) -> R) -> R {
        let mut world = lock(&self.world);
        let result = f(&mut world);
        let changes = world.take_changes();
        for change in changes {
            self.announce(&world, change);
        }
        result
    }

    /// Reads the world without changing it.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&World) -> R) -> R {
        f(&lock(&self.world))
    }

    pub(crate) fn next_event_id(&self) -> String {
        let n = self.next_event.fetch_add(1, Ordering::Relaxed) + 1;
        format!("evt_{}_{n}", self.run_nonce)
    }

    fn announce(&self, world: &World, change: Change) {
        let targets: Vec<_> = world
            .registrations
            .values()
            .filter(|r| r.wants(&change))
            .cloned()
            .collect();
        if targets.is_empty() {
            return;
        }
        let id = self.next_event_id();
        let (kind, body) = match &change {
            Change::Consent { lead, at } => (
                EventKind::ConsentUpdate,
                envelope(EventKind::ConsentUpdate, &id, *at, lead),
            ),
            Change::Message { message, at } => (
                EventKind::MessageStatus,
                envelope(EventKind::MessageStatus, &id, *at, message),
            ),
        };
        for registration in targets {
            self.deliverer.enqueue(Job {
                event_id: id.clone(),
                event_type: kind.token(),
                registration_id: registration.resource.id.clone(),
                target_url: registration.resource.target_url.clone(),
                secret: registration.secret.clone(),
                body: body.clone(),
            });
        }
    }

    /// Mints a token valid for the configured lifetime.
    pub(crate) fn mint_token(&self) -> String {
        let mut bytes = [0u8; 24];
        rand::thread_rng().fill(&mut bytes[..]);
        let token = format!("sbx_{}", hex::encode(bytes));
        let expires = Instant::now() + self.config.token_lifetime;
        let mut tokens = lock(&self.tokens);
        tokens.retain(|_, until| *until > Instant::now());
        tokens.insert(token.clone(), expires);
        token
    }

    /// `None` if the token is valid, else why not.
    pub(crate) fn check_token(&self, token: &str) -> Option<&'static str> {
        match lock(&self.tokens).get(token) {
            None => Some("invalid access token"),
            Some(until) if *until <= Instant::now() => Some("access token expired"),
            Some(_) => None,
        }
    }

    /// Every token stops working at once (as if they had all expired).
    pub(crate) fn revoke_tokens(&self) {
        lock(&self.tokens).clear();
    }

    /// The fault to inject into this request, if any: a status and whether to send
    /// `Retry-After`.
    pub(crate) fn draw_fault(&self) -> Option<(u16, Option<u64>)> {
        let mut state = lock(&self.api_faults);
        let retry_after = state.faults.retry_after_secs;
        if let Some(status) = state.fail_next.pop_front() {
            return Some((status, retry_after.filter(|_| status == 429)));
        }
        let (r429, r5xx) = (
            state.faults.rate_429.clamp(0.0, 1.0),
            state.faults.rate_5xx.clamp(0.0, 1.0),
        );
        let roll: f64 = state.rng.gen_range(0.0..1.0);
        if roll < r429 {
            Some((429, retry_after))
        } else if roll < r429 + r5xx {
            let status = if state.rng.gen_bool(0.5) { 500 } else { 503 };
            Some((status, None))
        } else {
            None
        }
    }

    pub(crate) fn log_request(&self, request: ApiRequest) {
        let mut log = lock(&self.requests);
        if log.len() >= REQUEST_LOG_CAP {
            log.pop_front();
        }
        log.push_back(request);
    }

    /// The most recent resource requests, oldest first.
    pub(crate) fn requests(&self) -> Vec<ApiRequest> {
        lock(&self.requests).iter().cloned().collect()
    }

    pub(crate) fn stats(&self) -> StatsSnapshot {
        let s = &self.stats;
        StatsSnapshot {
            token_requests: s.token_requests.load(Ordering::Relaxed),
            token_failures: s.token_failures.load(Ordering::Relaxed),
            api_requests: s.api_requests.load(Ordering::Relaxed),
            injected_faults: s.injected_faults.load(Ordering::Relaxed),
        }
    }
}

/// The delivered bytes of an event: `{"type","id","createdAt","data"}` in that order.
pub(crate) fn envelope<T: Serialize>(
    kind: EventKind,
    id: &str,
    at: DateTime<Utc>,
    data: &T,
) -> Bytes {
    let event = Event {
        kind,
        id,
        created_at: timestamp(at),
        data,
    };
    Bytes::from(serde_json::to_vec(&event).unwrap_or_default())
}
