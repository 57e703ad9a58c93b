//! The `outreach-sync` binary: everything lives in the library.

fn main() -> std::process::ExitCode {
    outreach_sync::cli::main()
}
