//! PostgreSQL, for replicas: any number of processes on one database. Statements take
//! whole batches as arrays (`unnest`), conflicts are settled by `ON CONFLICT`, workers
//! claim rows with `FOR UPDATE SKIP LOCKED`, and writers of the same numbers queue on
//! transaction-scoped advisory locks.

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
