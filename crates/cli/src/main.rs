//! The `outreach-sync` binary: everything lives in the libraries.

fn main() -> std::process::ExitCode {
    outreach_sync_cli::main()
}
