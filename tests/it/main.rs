//! The integration suite, one binary: the daemon in-process or as a child process, the
//! sandbox as the upstream, real HTTP on loopback and a fresh SQLite file per test.
//!
//! It is a target of the binary's package (crates/cli/Cargo.toml), so that Cargo builds
//! `outreach-sync` before it runs and names it (`CARGO_BIN_EXE_outreach-sync`); its working
//! directory is that package's, hence [`repository`] for the files it reads.

mod common;
mod daemon_process;
mod receiver;

mod accounts;
mod admin;
mod admin_feed;
mod alerts;
mod apply;
mod architecture;
mod browser;
mod callers;
mod chain;
mod cli;
mod client_manners;
mod client_v2;
mod client_v3;
mod compliance;
pub(crate) mod console;
mod container;
mod crash;
mod demo;
mod destinations;
mod disk_full;
mod evidence;
mod export;
mod floods;
mod guessing;
mod hold;
mod hostile;
mod import;
mod import_hostile;
mod ingest;
mod logs;
mod migrations;
mod output_safety;
mod postgres;
mod postgres_apply;
mod postgres_read;
mod push;
mod reconcile;
mod reconcile_lease;
mod redirects;
mod registrations;
mod reload;
mod replica_crash;
mod replicas;
mod retention;
mod sandbox_rules;
mod sandbox_webhooks;
mod sharing;
mod shutdown;
mod signature_properties;
mod signature_vectors;
mod sources;
mod stream;
mod subscribers;
mod supervise;
mod v2;
mod v2_push;
mod warehouses;

/// `path` in the repository (the suite runs in crates/cli, the binary's package).
fn repository(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}
