//! `serve` reloads its webhook secrets, admin tokens and sources on SIGHUP, without a restart: the
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

/// Posts `body` texted from `from` to the daemon's Twilio source `twilio`, signed as Twilio
/// signs; the status answered.
async fn text(daemon: &Daemon, sid: &str, from: &str, body: &str) -> u16 {
    use outreach_sync_sandbox::twilio as twilio_sender;
    let params = twilio_sender::inbound(sid, from, "+15005550006", body);
    let url = daemon.url("/sources/twilio");
    let target = twilio_sender::Target {
        post_to: &url,
        signed_for: TWILIO_PUBLIC_URL,
    };
    twilio_sender::send(&reqwest::Client::new(), target, TWILIO_TOKEN, &params)
        .await
        .expect("an answer")
        .0
}

const TWILIO_TOKEN: &str = "reload-twilio-token-0123";
const TWILIO_PUBLIC_URL: &str = "https://sync.example.org/sources/twilio";

fn twilio_config(words: &str) -> String {
    format!(
        "[webhook]\nsecrets = [\"{SECRET_A}\"]\n\n[admin]\ntokens = [\"one:{TOKEN_ONE}\"]\n\n\
         [[source]]\nname = \"twilio\"\nkind = \"twilio\"\nauth_token = \"{TWILIO_TOKEN}\"\n\
         public_url = \"{TWILIO_PUBLIC_URL}\"\n{words}"
    )
}

/// The admin API's view of `path`, read with the token `one`.
async fn admin_json(http: &reqwest::Client, daemon: &Daemon, path: &str) -> serde_json::Value {
    http.get(daemon.admin_url(path))
        .bearer_auth(TOKEN_ONE)
        .send()
        .await
        .expect("admin request")
        .json()
        .await
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hangup_puts_a_sources_new_opt_out_words_in_force_at_once() {
    let dir = tempfile::tempdir().expect("dir");
    write_config(dir.path(), &twilio_config(""));
    let mut daemon = Daemon::start(dir.path(), "reload-words", &[]).await;
    let http = reqwest::Client::new();
    // "halt" is no revocation word of the rules: a reply of it alone records nothing.
    assert_eq!(text(&daemon, "SMhalt0", "+15550130000", "HALT").await, 200);
    let read = within(RELOAD_WITHIN, async || {
        let sources = admin_json(&http, &daemon, "/v1/sources").await;
        (sources["items"][0]["read"] == 1).then_some(sources)
    })
    .await
    .unwrap_or_else(|| panic!("the reply read: {}", daemon.logs()));
    assert_eq!(read["items"][0]["optOuts"], 0, "{read}");

    write_config(dir.path(), &twilio_config("opt_out_words = [\"halt\"]\n"));
    daemon.signal(libc::SIGHUP);
    let mut attempt = 0;
    let recorded = within(RELOAD_WITHIN, async || {
        attempt += 1;
        let sid = format!("SMhalt{attempt}");
        assert_eq!(text(&daemon, &sid, "+15550130001", "HALT").await, 200);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let sources = admin_json(&http, &daemon, "/v1/sources").await;
        (sources["items"][0]["optOuts"] == 1).then_some(())
    })
    .await;
    assert!(
        recorded.is_some(),
        "HALT is an opt-out once reloaded: {}",
        daemon.logs()
    );

    daemon.signal(libc::SIGTERM);
    let exit = daemon.exit_within(Duration::from_secs(15)).await;
    assert!(exit.is_some_and(|s| s.success()), "{}", daemon.logs());
}

/// Two accounts, and `callers` (TOML) after them.
fn accounts_config(callers: &str) -> String {
    let mut text = format!("[admin]\ntokens = [\"one:{TOKEN_ONE}\"]\n");
    for name in ["party", "candidate"] {
        text.push_str(&format!(
            "\n[[account]]\nname = \"{name}\"\nbase_url = \"https://api.example.org\"\n\
             client_id = \"{name}@example.org\"\nclient_secret = \"secret-{name}\"\n\n\
             [account.webhook]\nsecrets = [\"whsec-{name}\"]\n"
        ));
    }
    text.push_str(callers);
    text
}

#[test]
fn a_reload_adds_changes_and_removes_callers() {
    use outreach_sync::settings::{Live, Settings};
    let dir = tempfile::tempdir().expect("dir");
    let path = config_file(dir.path());
    write_config(dir.path(), &accounts_config(""));
    let running = Settings::load(Some(&path)).expect("valid");
    let callers = Live::new(running.callers().expect("callers"));
    let reloader = outreach_sync::app::Reloader::new(
        Some(path.clone()),
        running.clone(),
        Vec::new(),
        Live::new(running.admin.named_tokens()),
    )
    .with_callers(callers.clone());
    assert!(callers.current().is_empty());

    let senate = "\n[[caller]]\nname = \"senate\"\nmembers = [\"party\", \"candidate\"]\n";
    write_config(dir.path(), &accounts_config(senate));
    reloader.reload().expect("reloaded");
    let now = callers.current();
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].name.as_deref(), Some("senate"));
    assert_eq!(now[0].members.len(), 2);

    // The date moved, as a later FCC order would move it.
    write_config(
        dir.path(),
        &format!(
            "[consent]\nrevoke_all_from = \"2027-07-31\"\n{}",
            accounts_config(senate)
        ),
    );
    reloader.reload().expect("reloaded");
    let moved = callers.current();
    assert!(!moved[0].in_force_at("2027-03-01T00:00:00Z".parse().expect("a time")));
    assert!(moved[0].in_force_at("2027-08-01T00:00:00Z".parse().expect("a time")));

    // A member no account has: refused whole, the running callers stay.
    write_config(
        dir.path(),
        &accounts_config("\n[[caller]]\nname = \"senate\"\nmembers = [\"party\", \"union\"]\n"),
    );
    let refused = reloader.reload().expect_err("refused").to_string();
    assert!(refused.contains("caller.members"), "{refused}");
    assert_eq!(callers.current(), moved);

    write_config(dir.path(), &accounts_config(""));
    reloader.reload().expect("reloaded");
    assert!(callers.current().is_empty(), "removed");
}
