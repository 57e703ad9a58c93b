//! The sandbox: an in-memory implementation of the service's v3 API that delivers signed
//! webhooks with injected faults.

pub mod cli;
