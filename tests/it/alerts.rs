//! The Prometheus alert rules (config/prometheus/alerts.yml): promtool checks them and runs
//! their unit tests (alerts.test.yml), and every metric they name is one the daemon exposes;
//! and promtool checks the exposition the daemon serves (`promtool check metrics`).
//!
//! promtool is `OUTREACH_SYNC_TEST_PROMTOOL`, else `promtool` on the PATH (Debian's
//! `prometheus`; `.ci/run` installs it); without either the promtool test says so on the
//! terminal and passes without running (as the browser tests do). With the variable set, a
//! promtool that does not run fails the test.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const PROMTOOL_VARIABLE: &str = "OUTREACH_SYNC_TEST_PROMTOOL";
const RULES: &str = "config/prometheus/alerts.yml";
const RULE_TESTS: &str = "config/prometheus/alerts.test.yml";
/// Every metric name starts with this (`PREFIX` in src/metrics.rs).
const PREFIX: &str = "outreach_sync_";

/// promtool, and whether it was asked for (then it must run).
fn promtool_path() -> Option<(PathBuf, bool)> {
    if let Ok(path) = std::env::var(PROMTOOL_VARIABLE) {
        return Some((PathBuf::from(path), true));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("promtool"))
            .find(|path| path.is_file())
            .map(|path| (path, false))
    })
}

fn skipped(why: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "\nAlert rule tests SKIPPED: {why}; {RULES} was not run through promtool (its metric \
         names are checked all the same).\n"
    );
}

/// Runs `promtool ARGS FILE` and asserts it succeeds, its output in the failure; false (said
/// on the terminal) when it cannot start and was not asked for.
fn promtool(path: &Path, required: bool, args: &[&str], file: &str) -> bool {
    let output = match Command::new(path)
        .args(args)
        .arg(crate::repository(file))
        .output()
    {
        Ok(output) => output,
        Err(e) if !required => {
            skipped(&format!("{} does not start: {e}", path.display()));
            return false;
        }
        Err(e) => panic!(
            "{PROMTOOL_VARIABLE} is set but {} does not start: {e}",
            path.display()
        ),
    };
    assert!(
        output.status.success(),
        "promtool {} {file} failed ({}):\n{}{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    true
}

#[test]
fn the_alert_rules_pass_their_promtool_tests() {
    let Some((path, required)) = promtool_path() else {
        skipped(&format!(
            "no promtool on the PATH and {PROMTOOL_VARIABLE} is not set (apt-get install \
             --no-install-recommends prometheus)"
        ));
        return;
    };
    if !promtool(&path, required, &["check", "rules"], RULES) {
        return;
    }
    promtool(&path, required, &["test", "rules"], RULE_TESTS);
}

/// An exposition with every family and a sample of each kind of label: what `/metrics`
/// serves after some work.
fn exposition() -> String {
    use outreach_sync::metrics::{
        AuthAttempt, AuthOutcome, Closed, Delivery, Gauges, Listener, Metrics, Push,
        SubscriberOutcome,
    };
    let metrics = Metrics::new();
    let party = crate::common::account("party");
    metrics.serving(std::slice::from_ref(&party));
    metrics.delivery(Some(&party), Delivery::Accepted);
    metrics.delivery(None, Delivery::UnknownPath);
    metrics.applied(1, 1);
    metrics.upstream_status(&party, 200);
    metrics.upstream_transport_error(&party);
    metrics.push(&party, Push::Retry);
    metrics.subscriber_request("crm", SubscriberOutcome::Delivered);
    metrics.auth_failure(AuthAttempt::Bearer, AuthOutcome::Refused);
    metrics.connection_closed(Listener::Ingest, Closed::Idle);
    metrics.record_reconcile_pass(&party, 3, 1, 0, 0);
    metrics.render(Gauges {
        outbox_backlog: 1,
        apply_lag_seconds: 0.25,
        subscriber_lag: vec![("crm".into(), 2)],
        registration_ok: Some(true),
        destination_lag: vec![("van-main".into(), 3)],
        destination_error: vec![("van-main".into(), 1)],
        optout_oldest_pending: vec![("service".into(), 1.5), ("crm".into(), 0.0)],
        ..Gauges::default()
    })
}

#[test]
fn the_exposition_passes_promtool_check_metrics() {
    let Some((path, required)) = promtool_path() else {
        skipped(&format!(
            "no promtool on the PATH and {PROMTOOL_VARIABLE} is not set"
        ));
        return;
    };
    let text = exposition();
    let child = Command::new(&path)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if !required => return skipped(&format!("{} does not start: {e}", path.display())),
        Err(e) => panic!(
            "{PROMTOOL_VARIABLE} is set but {} does not start: {e}",
            path.display()
        ),
    };
    child
        .stdin
        .take()
        .expect("promtool's stdin")
        .write_all(text.as_bytes())
        .expect("the exposition to promtool");
    let output = child.wait_with_output().expect("promtool's answer");
    assert!(
        output.status.success() && output.stdout.is_empty() && output.stderr.is_empty(),
        "promtool check metrics ({}):\n{}{}\n{text}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

/// Every `outreach_sync_...` name in `text`, in order of appearance, once each.
fn metric_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let before = rest[..at].chars().next_back();
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let starts_a_word = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if starts_a_word && !names.iter().any(|n| n == &tail[..end]) {
            names.push(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// The source of the metrics module: src/metrics.rs and the files of src/metrics/.
fn metrics_source() -> String {
    let mut source = std::fs::read_to_string(crate::repository("src/metrics.rs")).unwrap();
    let dir = crate::repository("src/metrics");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    for file in files {
        source.push_str(&std::fs::read_to_string(file).unwrap());
    }
    source
}

#[test]
fn the_alert_rules_name_only_metrics_the_daemon_exposes() {
    let rules = std::fs::read_to_string(crate::repository(RULES)).expect("the alert rules");
    let source = metrics_source();
    assert!(
        source.contains("const PREFIX: &str = \"outreach_sync\";"),
        "src/metrics.rs no longer names its metrics outreach_sync_*: update {RULES}"
    );
    let names = metric_names(&rules);
    assert!(!names.is_empty(), "no metric names found in {RULES}");
    // The metrics module declares a family by its name without the prefix, quoted; a
    // counter without the `_total` that prometheus-client appends.
    let unknown: Vec<&String> = names
        .iter()
        .filter(|name| {
            let name = &name[PREFIX.len()..];
            let declared = |n: &str| source.contains(&format!("\"{n}\""));
            !declared(name) && !name.strip_suffix("_total").is_some_and(declared)
        })
        .collect();
    assert!(
        unknown.is_empty(),
        "{RULES} uses metrics src/metrics.rs does not expose: {unknown:?}"
    );
}

#[test]
fn every_alert_rule_has_cases_in_the_unit_tests() {
    let rules = std::fs::read_to_string(crate::repository(RULES)).expect("the alert rules");
    let tests = std::fs::read_to_string(crate::repository(RULE_TESTS)).expect("the rule tests");
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- alert:"))
        .map(str::trim)
        .collect();
    assert!(!alerts.is_empty(), "no alert found in {RULES}");
    for alert in alerts {
        let cases = tests
            .lines()
            .filter(|line| line.trim() == format!("alertname: {alert}"))
            .count();
        assert!(
            cases >= 2,
            "{alert} has {cases} case(s) in {RULE_TESTS}: one where it fires and one where \
             it does not, at least"
        );
    }
}
