//! The `outreach-sync` binary's package: the daemon's command line (in the daemon's library,
//! `outreach_sync::cli`) and the two commands that drive the simulated service, `sandbox`
//! and `demo`. They live here so that the daemon's library does not depend on the sandbox:
//! a change to the sandbox rebuilds this package, never the daemon.

/// `demo`: sandbox, daemon and generated activity in one process.
pub mod demo;

use std::process::ExitCode;

/// The commands of the binary beside the daemon's (listed among them, where the daemon's
/// command line puts them).
#[derive(Debug, clap::Subcommand)]
enum Binary {
    /// Sandbox, daemon and generated activity with faults in one process, with a live view.
    Demo(demo::DemoArgs),
    /// Run the built-in simulated service.
    Sandbox(Box<outreach_sync_sandbox::cli::SandboxArgs>),
}

/// Parses the command line, runs the command, and maps its outcome to an exit code.
pub fn main() -> ExitCode {
    outreach_sync::cli::main(async |command: Binary| match command {
        Binary::Demo(args) => demo::run(args).await,
        Binary::Sandbox(args) => outreach_sync_sandbox::cli::run(*args).await,
    })
}
