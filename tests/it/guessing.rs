//! The attack suite's guessing of admin tokens (the console's sign-in is in `console.rs`):
//! as found, 7,437 wrong bearer tokens a second were each answered 401, unlimited.

use std::time::Duration;

use crate::common::{metrics_text, series_value};
use crate::daemon_process::Daemon;

const TOKEN: &str = "crm:the-right-token-8c1f";
const GUESS: &str = "guess-0f3a9e-LEAKED_IF_LOGGED";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_bearer_tokens_are_limited_per_address_logged_without_the_token_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("OUTREACH_SYNC__ADMIN__TOKENS".to_owned(), TOKEN.to_owned()),
        (
            "OUTREACH_SYNC__ADMIN__FAILED_AUTH_PER_MINUTE".to_owned(),
            "3".to_owned(),
        ),
    ];
    let daemon = Daemon::start(dir.path(), "guessing", &env).await;
    let from = |address: [u8; 4]| {
        reqwest::Client::builder()
            .local_address(std::net::IpAddr::from(address))
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap()
    };
    let (guesser, neighbour) = (from([127, 0, 0, 1]), from([127, 0, 0, 3]));
    let status = async |client: &reqwest::Client, token: &str| {
        let response = client
            .get(daemon.admin_url("/v1/status"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let retry = response
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        (response.status().as_u16(), retry)
    };
    // No token at all guesses nothing and is not counted.
    for _ in 0..5 {
        let response = guesser
            .get(daemon.admin_url("/v1/status"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401);
    }
    for _ in 0..3 {
        assert_eq!(status(&guesser, GUESS).await.0, 401);
    }
    for token in [GUESS, "the-right-token-8c1f"] {
        let (code, retry) = status(&guesser, token).await;
        assert_eq!(code, 429, "{token} from a guessing address");
        let retry: u64 = retry.expect("Retry-After").parse().unwrap();
        assert!((1..=30).contains(&retry), "Retry-After: {retry}");
    }
    // Another address is not held up by the guesser.
    assert_eq!(status(&neighbour, "the-right-token-8c1f").await.0, 200);

    let metrics = metrics_text(&neighbour, daemon.admin_url("/metrics")).await;
    let count = |labels: &str| {
        let series = format!("outreach_sync_admin_auth_failures_total{{{labels}}}");
        series_value(&metrics, &series).and_then(|v| v.parse::<u64>().ok())
    };
    assert_eq!(
        count("attempt=\"bearer\",outcome=\"refused\""),
        Some(3),
        "{metrics}"
    );
    assert_eq!(
        count("attempt=\"bearer\",outcome=\"limited\""),
        Some(2),
        "{metrics}"
    );
    let logs = daemon.logs();
    assert!(logs.contains("credentials refused"), "{logs}");
    assert!(
        logs.contains("too many failed credentials from this address"),
        "{logs}"
    );
    assert!(
        !logs.contains("LEAKED_IF_LOGGED"),
        "a token reached the log: {logs}"
    );
}
