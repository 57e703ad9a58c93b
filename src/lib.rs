//! outreach-sync: a durable, verified consent ledger fed by the outreach messaging service's
//! webhooks, reconciled against its API, and served to the campaign's other tools.

/// The admin listener: the consent ledger over HTTP for the campaign's other tools.
pub mod admin;
/// The daemon: listeners and tasks under one supervisor.
pub mod app;
/// The one apply path every writer calls: last-writer-wins, account sync, echoes, ledger.
pub mod apply;
/// The command line.
pub mod cli;
/// The typed client of the service's API.
pub mod client;
/// The compliance report: each opt-out against its legal deadline, and messages after it.
pub mod compliance;
/// The accepted event envelope and its parser.
pub mod events;
/// The evidence bundle of a number: each ledger entry with its hash and what it stands on.
pub mod evidence;
/// Streamed exports of the consent state and the ledger (CSV, JSON lines).
pub mod export;
/// Opt-out lists (CSV) read into E.164 numbers as a stream, and recorded.
pub mod import;
/// The public ingest listener.
pub mod ingest;
/// Leases in the database: work that runs in one place at a time.
pub mod lease;
/// The read side of the ledger and the mirror, as JSON records.
pub mod ledger;
/// Serving a router with a connection cap and per-phase deadlines.
pub mod listener;
/// Process-wide counters and the Prometheus text rendering.
pub mod metrics;
/// The records the daemon keeps, typed once for the apply path and the storage layer.
pub mod model;
/// The outbox write path (group commit).
pub mod outbox;
/// Local consent changes, their push to the service, and the recognition of their echo.
pub mod pusher;
/// The scheduled reconciler.
pub mod reconcile;
/// The account's webhook registrations for this daemon: register, check, rotate.
pub mod registrations;
/// A bounded sample of the deliveries refused by signature verification.
pub mod rejections;
/// This process among the replicas of a database: heartbeat and the leader's lease.
pub mod replica;
/// Retention: stored deliveries pruned once applied and old enough; never the ledger.
pub mod retention;
/// Typed configuration, environment overrides, validation and redaction.
pub mod settings;
/// Opt-outs shared across the accounts served.
pub mod share;
/// "The ledger grew": wakes the followers of the ledger on commit, on any replica.
pub mod signal;
/// Webhook signatures: verification, signing and format discovery.
pub mod signature;
/// The storage layer: the apply path's statements, a folder per backend.
pub mod store;
/// Consent pushed to the campaign's other tools: a signed webhook sender per subscriber.
pub mod subscribers;
/// Logging.
pub mod telemetry;
/// The daemon's service client and its durable token guard.
pub mod upstream;
/// The worker that applies the outbox.
pub mod worker;
