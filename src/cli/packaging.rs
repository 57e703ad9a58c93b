//! `completions` and the hidden `man-pages`: what packages install beside the binary, made
//! from the command line's own definitions (the binary's commands included).

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;
use clap::{CommandFactory as _, Subcommand};

use super::{Cli, CliError};

/// The name the scripts complete and the pages document.
const BINARY: &str = "outreach-sync";

/// Prints the completion script of `shell` for the whole command line on stdout.
pub fn completions<T: Subcommand>(shell: clap_complete::Shell) -> Result<(), CliError> {
    let script = completion_script::<T>(shell);
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(script.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing the completion script")?;
    Ok(())
}

/// The completion script of `shell` for the whole command line.
fn completion_script<T: Subcommand>(shell: clap_complete::Shell) -> String {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::<T>::command(), BINARY, &mut script);
    let script = String::from_utf8_lossy(&script).into_owned();
    match shell {
        // clap_complete (up to 4.6.11 at least: clap-rs/clap#6421) names the bash script's
        // states of a hyphenated binary two ways: `outreach__sync__subcmd__webhooks` where it
        // walks the words typed, `outreach__subcmd__sync__subcmd__webhooks` where it completes
        // them, so nothing after a subcommand would complete. One spelling for both.
        clap_complete::Shell::Bash => script.replace(BASH_MISSPELLED_STATE, BASH_STATE),
        _ => script,
    }
}

/// How clap_complete's bash script spells the binary in a state's name, and how it should.
const BASH_MISSPELLED_STATE: &str = "outreach__subcmd__sync";
const BASH_STATE: &str = "outreach__sync";

/// Writes one manual page per command (`outreach-sync.1`, `outreach-sync-serve.1`, ...) into
/// `dir`, made if missing.
pub fn man_pages<T: Subcommand>(dir: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    clap_mangen::generate_to(Cli::<T>::command(), dir)
        .with_context(|| format!("writing the manual pages into {}", dir.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binary's own commands stand in for `demo` and `sandbox`.
    #[derive(Debug, clap::Subcommand)]
    enum Binary {
        /// A command of the binary's.
        Demo,
    }

    /// What bash completes after `words` (the last one being typed), through the script.
    fn bash_completes(words: &[&str]) -> Vec<String> {
        let script = completion_script::<Binary>(clap_complete::Shell::Bash);
        let typed = words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>();
        let current = words.len() - 1;
        let probe = format!(
            "{script}\nCOMP_WORDS=({words}); COMP_CWORD={current}; \
             _outreach__sync outreach-sync {cur} {prev}; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            words = typed.join(" "),
            cur = typed[current],
            prev = typed[current - 1],
        );
        let output = std::process::Command::new("bash")
            .arg("-c")
            .arg(probe)
            .output()
            .expect("bash runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn bash_completes_commands_subcommands_and_their_options() {
        assert_eq!(bash_completes(&["outreach-sync", "se"]), ["serve"]);
        assert_eq!(
            bash_completes(&["outreach-sync", "de"]),
            ["demo", "destinations"]
        );
        assert_eq!(
            bash_completes(&["outreach-sync", "webhooks", "r"]),
            ["register", "rotate"]
        );
        assert!(
            bash_completes(&["outreach-sync", "webhooks", "register", "--"])
                .contains(&"--dry-run".to_owned())
        );
        assert_eq!(
            bash_completes(&["outreach-sync", "completions", "f"]),
            ["fish"]
        );
    }

    #[test]
    fn the_manual_pages_cover_every_visible_command_and_none_hidden() {
        let dir = tempfile::tempdir().expect("temp dir");
        man_pages::<Binary>(dir.path()).expect("pages written");
        let page = |name: &str| dir.path().join(format!("{name}.1"));
        for name in [
            "outreach-sync",
            "outreach-sync-serve",
            "outreach-sync-webhooks-register",
            "outreach-sync-demo",
        ] {
            assert!(page(name).is_file(), "{name}.1");
        }
        assert!(!page("outreach-sync-man-pages").exists());
        let main = std::fs::read_to_string(page("outreach-sync")).expect("read");
        assert!(main.contains("outreach\\-sync\\-completions(1)"), "{main}");
    }
}
