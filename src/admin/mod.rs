//! The admin listener: the consent ledger, the mirror and the daemon's state over HTTP for
//! the campaign's other tools, on localhost by default. Every `/v1` route needs a bearer
//! token from `admin.tokens`; `/healthz` and `/metrics` need none.
//!
//! With no token configured the listener still starts (ingest must not stop because of
//! it) and logs a warning, but every `/v1` request is refused with 401.
//!
//! The router and the OpenAPI document are both built from [`ROUTES`], so they cannot
//! disagree.

mod auth;
mod compliance;
mod consent;
mod console;
mod error;
mod evidence;
pub mod guard;
mod import;
mod openapi;
mod records;
mod state;
mod stream;
mod subscribers;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::Method;
use axum::routing::{MethodRouter, get, post};

pub use error::{AdminError, BUSY_RETRY_SECS};
pub use state::AdminState;

/// Largest request body: a 10,000-number lookup is about 200 KB.
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// Runs `work` (a report, an import: long, and heavy between its awaits) on a thread of its
/// own rather than on the async workers, which answer every request, acknowledgements
/// included; its reads and writes still go through the runtime.
pub fn off_the_workers<F>(work: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || runtime.block_on(work))
}

/// A query parameter, as the OpenAPI document describes it.
pub struct Param {
    pub name: &'static str,
    pub required: bool,
    /// `string` or `integer`.
    pub kind: &'static str,
    pub description: &'static str,
}

/// One route of the listener: how it is served and how it is documented.
pub struct RouteSpec {
    pub method: Method,
    /// axum's and OpenAPI's path syntax alike (`{id}`).
    pub path: &'static str,
    pub operation_id: &'static str,
    pub summary: &'static str,
    /// Served without a token.
    pub public: bool,
    pub query: &'static [Param],
    /// Schema (in `components/schemas`) of the JSON request body.
    pub request: Option<&'static str>,
    /// Success status, and its schema (`None`: Prometheus text).
    pub response: (u16, Option<&'static str>),
    handler: fn() -> MethodRouter<Arc<AdminState>>,
}

const PHONE: Param = Param {
    name: "phoneNumber",
    required: true,
    kind: "string",
    description: "a phone number: E.164 (e.g. +15551234567), or as people write it (+1 (555) 123-4567; a national number is read as American)",
};
const ORG: Param = Param {
    name: "organizationId",
    required: false,
    kind: "string",
    description: "Only this organization",
};

/// Every route the admin listener serves.
pub static ROUTES: &[RouteSpec] = &[
    RouteSpec {
        method: Method::GET,
        path: "/healthz",
        operation_id: "healthz",
        summary: "The process is up",
        public: true,
        query: &[],
        request: None,
        response: (200, Some("Health")),
        handler: || get(records::healthz),
    },
    RouteSpec {
        method: Method::GET,
        path: "/metrics",
        operation_id: "metrics",
        summary: "Prometheus metrics (text exposition format)",
        public: true,
        query: &[],
        request: None,
        response: (200, None),
        handler: || get(records::metrics),
    },
    RouteSpec {
        method: Method::GET,
        path: "/v1/consent",
        operation_id: "getConsent",
        summary: "Current consent of a number in each organization (empty items when unknown)",
        public: false,
        query: &[PHONE, ORG],
        request: None,
        response: (200, Some("ConsentItems")),
        handler: || get(consent::current),
    },
    RouteSpec {
        method: Method::POST,
        path: "/v1/consent",
        operation_id: "recordConsentChange",
        summary: "Record a local consent change and queue it for the service",
        public: false,
        query: &[],
        request: Some("LocalChange"),
        response: (202, Some("LocalChangeRecorded")),
        handler: || post(consent::record),
    },
    RouteSpec {
        method: Method::GET,
        path: "/v1/compliance",
        operation_id: "complianceReport",
        summary: "For every opt-out in the window: when the service and each subscriber had it against the legal deadline, and the messages sent after it",
        public: false,
        query: &[
            Param {
                name: "since",
                required: false,
                kind: "string",
                description: "First day (YYYY-MM-DD in compliance.timezone) or RFC 3339 time; default: 30 days before until",
            },
            Param {
                name: "until",
                required: false,
                kind: "string",
                description: "Last day, taken whole (YYYY-MM-DD), or RFC 3339 time; default: now",
            },
            ORG,
        ],
        request: None,
        response: (200, Some("ComplianceReport")),
        handler: || get(compliance::report),
    },
    RouteSpec {
        method: Method::POST,
        path: "/v1/consent/import",
        operation_id: "importOptOuts",
        summary: "Record an opt-out list (CSV body); a list with an invalid row is refused whole (400 naming the rows) unless skipInvalid",
        public: false,
        query: &[
            Param {
                name: "org",
                required: false,
                kind: "string",
                description: "Record the opt-outs in this organization (or account=true)",
            },
            Param {
                name: "account",
                required: false,
                kind: "boolean",
                description: "Opt the numbers out for the whole account, and suppress them for leads that appear later",
            },
            Param {
                name: "region",
                required: false,
                kind: "string",
                description: "Where national formats are read (ISO 3166, default US)",
            },
            Param {
                name: "reason",
                required: false,
                kind: "string",
                description: "Kept with every entry (at most 500 characters)",
            },
            Param {
                name: "skipInvalid",
                required: false,
                kind: "boolean",
                description: "Record the valid rows of a list that has invalid ones",
            },
            Param {
                name: "dryRun",
                required: false,
                kind: "boolean",
                description: "Say what would be recorded; record nothing",
            },
            Param {
                name: "phoneColumn",
                required: false,
                kind: "string",
                description: "The header of the numbers' column (found by name or content otherwise)",
            },
            Param {
                name: "file",
                required: false,
                kind: "string",
                description: "The list's name, kept in the evidence (default upload.csv)",
            },
        ],
        request: Some("CsvList"),
        response: (200, Some("ImportResult")),
        handler: || post(import::import),
    },
    RouteSpec {
        method: Method::POST,
        path: "/v1/consent/lookup",
        operation_id: "lookupConsent",
        summary: "Current consent of up to 10,000 numbers",
        public: false,
        query: &[],
        request: Some("LookupRequest"),
        response: (200, Some("LookupResult")),
        handler: || post(consent::lookup),
    },
    RouteSpec {
        method: Method::GET,
        path: "/v1/consent/changes",
        operation_id: "consentChanges",
        summary: "The ledger as a change feed: entries after `after`, in seq order",
        public: false,
        query: &[
            Param {
                name: "after",
                required: false,
                kind: "integer",
                description: "Last seq seen (default 0: from the start)",
            },
            Param {
                name: "limit",
                required: false,
                kind: "integer",
                description: "Entries per page, 1..=10000 (default 1000)",
            },
            Param {
                name: "wait",
                required: false,
                kind: "integer",
                description: "When nothing is newer than `after`, answer as soon as something is, or empty after this many seconds (0..=60, default 0)",
            },
        ],
        request: None,
        response: (200, Some("ChangePage")),
        handler: || get(consent::changes),
    },
    RouteSpec {
        method: Method::GET,
        path: "/v1/consent/evidence",
        operation_id: "consentEvidence",
        summary: "The evidence bundle of a number: each ledger entry with its hash and what it stands on (404 when unknown)",
        public: false,
        query: &[PHONE, ORG],
        request: None,
        response: (200, Some("EvidenceBundle")),
        handler: || get(evidence::bundle),
    },
    RouteSpec {
        method: Method::GET,
        path: "/v1/consent/stream",
        operation_id: "consentStream",
        summary: "The ledger as Server-Sent Events (`id: SEQ`, `event: consent`, `data:` a ledger entry), resuming after `Last-Event-ID` or `after`, with a comment heartbeat every 15 s",
        public: false,
        query: &[Param {
            name: "after",
            required: false,
            kind: "integer",
            description: "Last seq seen (default 0: from the start); the Last-Event-ID header wins",
        }],
        request: None,
        response: (200, Some("EventStream")),
        handler: || get(stream::consent),
    },
    RouteSpec {
        method: Method::GET,
        path: "/v1/subscribers",
        operation_id: "listSubscribers",
        summary: "The configured subscribers: cursor, lag, state and last error",
        public: false,
        query: &[],
        request: None,
        response: (200, Some("SubscriberItems")),
        handler: || get(subscribers::list),
    },
    RouteSpec {
        method: Method::POST,
        path: "/v1/subscribers/{name}/replay",
        operation_id: "replaySubscriber",
        summary: "Rewind a subscriber: entries from `fromSeq` on are sent again (a disabled subscriber is enabled)",
        public: false,
        query: &[],
        request: Some("ReplayRequest"),
        response: (200, Some("Subscriber")),
        handler: || post(subscribers::replay),
    },
    RouteSpec {
        method: Method::POST,
        path: "/v1/subscribers/{name}/retry",
        operation_id: "retrySubscriber",
        summary: "Try the next delivery to a subscriber now instead of at the end of its backoff",
        public: false,
        query: &[],
        request: None,
        response: (200, Some("Subscriber")),
        handler: || post(subscribers::retry),
    },
    RouteSpec {
        method: Method::GET,
        path: "/v1/leads",
        operation_id: "findLeads",
        summary: "Mirrored leads with a number",
        public: false,
        query: &[PHONE, ORG],
        request: None,
        response: (200, Some("LeadItems")),
        handler: || get(records::find_leads),
    },
    RouteSpec {
        method: Method::GET,
        path: "/v1/leads/{id}",
        operation_id: "getLead",
        summary: "One mirrored lead, as the service's v3 Lead resource",
        public: false,
        query: &[],
        request: None,
        response: (200, Some("Lead")),
        handler: || get(records::lead),
    },
    RouteSpec {
        method: Method::GET,
        path: "/v1/messages/{id}",
        operation_id: "getMessage",
        summary: "The tracked delivery status of one message",
        public: false,
        query: &[],
        request: None,
        response: (200, Some("Message")),
        handler: || get(records::message),
    },
    RouteSpec {
        method: Method::GET,
        path: "/v1/status",
        operation_id: "getStatus",
        summary: "Backlog, quarantine, reconciliation, pushes and the last error",
        public: false,
        query: &[],
        request: None,
        response: (200, Some("Status")),
        handler: || get(records::status),
    },
    RouteSpec {
        method: Method::GET,
        path: "/v1/openapi.json",
        operation_id: "openapi",
        summary: "This document",
        public: false,
        query: &[],
        request: None,
        response: (200, Some("OpenApi")),
        handler: || get(openapi::document),
    },
];

/// The admin router over `state`.
pub fn router(state: AdminState) -> Router {
    if state.tokens.current().is_empty() {
        tracing::warn!(
            "admin.tokens is empty: every /v1 request of the admin listener is refused (401)"
        );
    }
    let state = Arc::new(state);
    let routes = ROUTES.iter().fold(Router::new(), |router, spec| {
        router.route(spec.path, (spec.handler)())
    });
    let api = routes
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    // The console signs in with a token too, but keeps it in a session of its own.
    console::router()
        .merge(api)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// The OpenAPI 3 document of the listener.
pub fn openapi_document() -> serde_json::Value {
    openapi::build()
}
