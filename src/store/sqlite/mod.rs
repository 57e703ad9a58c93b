//! SQLite, the embedded default: one file, one writer at a time (taken with `BEGIN
//! IMMEDIATE`), statements tuned so that a batch costs a handful of hand-overs to SQLite's
//! thread.

mod apply;
pub mod chain;
pub mod compliance;
pub mod console;
pub mod destinations;
pub mod evidence;
pub mod ingest;
pub mod leases;
pub mod outbox;
pub mod pushes;
pub mod read;
pub mod reconcile;
pub mod retention;
pub mod state;
pub mod subscribers;
