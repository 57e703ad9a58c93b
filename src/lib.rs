//! outreach-sync: a durable, verified consent ledger fed by the outreach messaging service's
//! webhooks, reconciled against its API, and served to the campaign's other tools.

/// Typed configuration, environment overrides, validation and redaction.
pub mod settings;
/// Webhook signatures: verification, signing and format discovery.
pub mod signature;
/// The typed client of the service's API.
pub mod client;
/// The in-memory service used by tests, `demo` and users' own code.
pub mod sandbox;
