//! outreach-sync: a durable, verified consent ledger fed by the outreach messaging service's
//! webhooks, reconciled against its API, served to the campaign's other tools, and written
//! into its systems of record.

/// The admin listener: the ledger, the mirror and the daemon's state over HTTP (API and
/// console), its router and OpenAPI document generated from the handlers.
pub mod admin;
/// The daemon: its listeners and tasks under one supervisor, stopped in order, reloaded on SIGHUP.
pub mod app;
/// The one apply path every writer calls: last-writer-wins, account sync, echoes,
/// suppression, imported lists, ledger entries.
pub mod apply;
/// The command line: parsing, exit codes, and one function per subcommand.
pub mod cli;
/// The typed client of the service's v3 and v2.1 APIs: tokens, rate limit, retries, paging.
pub mod client;
/// The compliance report: when each destination had each opt-out against its legal
/// deadline, and the messages sent after it.
pub mod compliance;
/// The accepted event envelope and its two event kinds.
pub mod events;
/// The evidence bundle of a number: each ledger entry with its hash and what it stands on.
pub mod evidence;
/// Streamed exports of the consent state and the ledger (CSV, JSON lines).
pub mod export;
/// Opt-out lists (CSV) read as a stream of E.164 numbers, and recorded a batch per transaction.
pub mod import;
/// The public ingest listener: each delivery verified on its exact bytes and committed before
/// the answer.
pub mod ingest;
/// Leases in the database: work that runs in one place at a time.
pub mod lease;
/// The read side of the ledger and the mirror, as JSON records.
pub mod ledger;
/// Serving a router with a connection cap and per-phase deadlines.
pub mod listener;
/// The daemon's metrics: a `prometheus-client` registry per `Application`, and the gauges read
/// from the database at scrape time.
pub mod metrics;
/// The records the daemon keeps and the typed values they are made of (times, E.164 numbers,
/// the hash chain's encoding, business days, backoff); no I/O.
pub mod model;
/// The outbox write path: group commit, applying at once when nothing waits.
pub mod outbox;
/// Local consent changes on their way to the service (v3 `PATCH /leads`, v2 `PUT`), retried
/// with a persisted backoff.
pub mod pusher;
/// The reconciler: scans the service's leads and stale messages on a schedule and repairs
/// each difference through the apply path.
pub mod reconcile;
/// The account's webhook registrations for this daemon: register, check, rotate.
pub mod registrations;
/// A bounded sample of the deliveries refused by signature verification.
pub mod rejections;
/// This process among the replicas of a database: heartbeat and the leader's lease.
pub mod replica;
/// Retention: applied deliveries and finished messages pruned once old enough; never the ledger.
pub mod retention;
/// The ledger pushed out to subscribers and destinations, each by the one sender with its
/// durable cursor, backoff and rate, knowing no kind of destination.
pub mod sender;
/// Typed configuration (accounts, subscribers, destinations), environment overrides, `_file`
/// secrets, validation, redaction, and what a reload replaces.
pub mod settings;
/// Opt-outs shared across accounts: each account's opt-outs recorded in every other one
/// served, following the ledger from a cursor.
pub mod share;
/// "The ledger grew": wakes the followers of the ledger on commit, on any replica.
pub mod signal;
/// Webhook signatures: verification, signing and format discovery.
pub mod signature;
/// Sources: opt-outs given in VAN and Action Network read back into the ledger, each record
/// once, behind a watermark that moves only once everything before it is recorded.
pub mod sources;
/// The storage layer: every SQL statement, one trait per concern written once, the dialects'
/// differences in a folder per backend; the only place a backend is chosen.
pub mod store;
/// The systems spoken to outside the service, one file each behind a trait: the signed
/// webhook subscribers get, and each kind of destination; the kind registry.
pub mod systems;
/// Logging: `tracing` to stderr as text or JSON lines.
pub mod telemetry;
/// An account's service client, with its token-request guard kept in the database.
pub mod upstream;
/// The worker: applies the outbox in receipt order, marking rows applied in the same
/// transaction.
pub mod worker;
