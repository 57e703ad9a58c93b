//! `serve` reloads its webhook secrets and admin tokens on SIGHUP, without a restart: the
//! daemon as a child process, its configuration file rewritten between signals.

use std::path::Path;
use std::time::Duration;

use crate::common::within;
use crate::daemon_process::{Daemon, Signer, config_file};

const SECRET_A: &str = "reload-secret-A-0123";
const SECRET_B: &str = "reload-secret-B-4567";
const SECRET_C: &str = "reload-secret-C-89ab";
const TOKEN_ONE: &str = "reload-token-one-0123";
const TOKEN_TWO: &str = "reload-token-two-4567";
/// Longest wait for the daemon to act on a signal.
const RELOAD_WITHIN: Duration = Duration::from_secs(10);

fn event(id: &str) -> String {
    crate::common::consent_event(id, "+15550004242", true)
}

/// What the ingest listener answers to `id`'s event signed with `secret`.
async fn deliver(http: &reqwest::Client, daemon: &Daemon, secret: &str, id: &str) -> u16 {
    let body = event(id);
    let mut request = http.post(daemon.url("/webhooks")).body(body.clone());
    for (name, value) in Signer::new(secret).headers(body.as_bytes()) {
        request = request.header(name, value);
    }
    request.send().await.expect("delivery").status().as_u16()
}

/// What `GET /v1/status` on the admin listener answers with `token`.
async fn status_with(http: &reqwest::Client, daemon: &Daemon, token: &str) -> u16 {
    http.get(daemon.admin_url("/v1/status"))
        .bearer_auth(token)
        .send()
        .await
        .expect("admin request")
        .status()
        .as_u16()
}

fn write_config(dir: &Path, text: &str) {
    std::fs::write(config_file(dir), text).expect("write the configuration");
}

/// A daemon whose configuration file holds `SECRET_A` and the token `one`.
async fn start_with_secret_a_and_token_one(
    label: &str,
) -> (tempfile::TempDir, reqwest::Client, Daemon) {
    let dir = tempfile::tempdir().expect("dir");
    write_config(
        dir.path(),
        &format!(
            "[webhook]\nsecrets = [\"{SECRET_A}\"]\n\n[admin]\ntokens = [\"one:{TOKEN_ONE}\"]\n"
        ),
    );
    let daemon = Daemon::start(dir.path(), label, &[]).await;
    (dir, reqwest::Client::new(), daemon)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hangup_puts_new_secrets_and_tokens_in_force_and_an_invalid_file_changes_nothing() {
    let (dir, http, mut daemon) = start_with_secret_a_and_token_one("reload").await;
    assert_eq!(deliver(&http, &daemon, SECRET_A, "evt_a1").await, 200);
    assert_eq!(deliver(&http, &daemon, SECRET_B, "evt_b1").await, 401);
    assert_eq!(status_with(&http, &daemon, TOKEN_ONE).await, 200);
    assert_eq!(status_with(&http, &daemon, TOKEN_TWO).await, 401);

    // The rotation's first step: the new secret first, the old one after it; the tokens
    // now from a file of their own, where the first token is gone.
    let tokens = dir.path().join("admin-tokens");
    std::fs::write(&tokens, format!("two:{TOKEN_TWO}\n")).expect("tokens file");
    write_config(
        dir.path(),
        &format!(
            "[webhook]\nsecrets = [\"{SECRET_B}\", \"{SECRET_A}\"]\n\n[admin]\ntokens_file = \"{}\"\n",
            tokens.display()
        ),
    );
    daemon.signal(libc::SIGHUP);
    let reloaded = within(RELOAD_WITHIN, async || {
        deliver(&http, &daemon, SECRET_B, "evt_b2").await == 200
    })
    .await;
    assert!(
        reloaded.is_some(),
        "B is accepted after SIGHUP: {}",
        daemon.logs()
    );
    assert_eq!(deliver(&http, &daemon, SECRET_A, "evt_a2").await, 200);
    assert_eq!(status_with(&http, &daemon, TOKEN_TWO).await, 200);
    assert_eq!(status_with(&http, &daemon, TOKEN_ONE).await, 401);

    // An invalid file: refused whole, the running secrets and tokens stay.
    write_config(
        dir.path(),
        &format!("[webhook]\nsecrets = [\"{SECRET_C}\"]\nheader = \"not a header\"\n"),
    );
    daemon.signal(libc::SIGHUP);
    let logged = within(RELOAD_WITHIN, async || {
        daemon.logs().contains("webhook.header")
    })
    .await;
    let logs = daemon.logs();
    assert!(logged.is_some(), "the refusal names the key: {logs}");
    assert!(logs.contains("configuration reload refused"), "{logs}");
    assert!(logs.contains("configuration reloaded"), "{logs}");
    for secret in [SECRET_A, SECRET_B, SECRET_C, TOKEN_ONE, TOKEN_TWO] {
        assert!(!logs.contains(secret), "{secret} in the log: {logs}");
    }
    assert_eq!(deliver(&http, &daemon, SECRET_B, "evt_b3").await, 200);
    assert_eq!(deliver(&http, &daemon, SECRET_C, "evt_c1").await, 401);
    assert_eq!(status_with(&http, &daemon, TOKEN_TWO).await, 200);

    daemon.signal(libc::SIGTERM);
    let exit = daemon.exit_within(Duration::from_secs(15)).await;
    assert!(exit.is_some_and(|s| s.success()), "{}", daemon.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hangup_that_would_leave_no_admin_token_is_refused_and_the_running_tokens_stay() {
    let (dir, http, mut daemon) = start_with_secret_a_and_token_one("reload-empty-tokens").await;
    assert_eq!(status_with(&http, &daemon, TOKEN_ONE).await, 200);

    // The tokens now from a file that is empty (emptied by mistake, or not yet written),
    // and a new secret beside: the whole file is refused.
    let tokens = dir.path().join("admin-tokens");
    std::fs::write(&tokens, "").expect("tokens file");
    write_config(
        dir.path(),
        &format!(
            "[webhook]\nsecrets = [\"{SECRET_B}\", \"{SECRET_A}\"]\n\n[admin]\ntokens_file = \"{}\"\n",
            tokens.display()
        ),
    );
    daemon.signal(libc::SIGHUP);
    let answered = within(RELOAD_WITHIN, async || {
        daemon.logs().contains("configuration reload")
    })
    .await;

    let logs = daemon.logs();
    assert!(answered.is_some(), "the reload is answered: {logs}");
    let refusal = logs
        .lines()
        .find(|l| l.contains("configuration reload refused"))
        .unwrap_or_else(|| panic!("the reload is refused: {logs}"));
    assert!(refusal.contains("admin.tokens"), "{refusal}");
    assert!(
        refusal.contains("ERROR") || refusal.contains("WARN"),
        "{refusal}"
    );
    assert_eq!(status_with(&http, &daemon, TOKEN_ONE).await, 200);
    assert_eq!(deliver(&http, &daemon, SECRET_B, "evt_b1").await, 401);
    assert_eq!(deliver(&http, &daemon, SECRET_A, "evt_a1").await, 200);

    daemon.signal(libc::SIGTERM);
    let exit = daemon.exit_within(Duration::from_secs(15)).await;
    assert!(exit.is_some_and(|s| s.success()), "{}", daemon.logs());
}
