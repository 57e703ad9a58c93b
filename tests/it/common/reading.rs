//! What a test reads from outside: the sandbox through the daemon's client, and a daemon's
//! `/metrics`.

use outreach_sync::client::ClientConfig;
use outreach_sync_sandbox::RunningSandbox;
use secrecy::SecretString;

/// A client of `sandbox`: its credentials, fast retries and no rate limit.
pub fn client_config(sandbox: &RunningSandbox) -> ClientConfig {
    let config = sandbox.config();
    ClientConfig::new(
        sandbox.base_url(),
        &config.client_id,
        SecretString::from(config.client_secret.clone()),
    )
    .for_tests()
}

/// A value of the sandbox as the client reads it: serialized with the sandbox's wire type,
/// deserialized as the client's model. Set beside what the client fetched, it checks each
/// side's wire types against the other's.
pub fn as_client<T: serde::de::DeserializeOwned>(sandbox_value: &impl serde::Serialize) -> T {
    let json = serde_json::to_value(sandbox_value).expect("the sandbox's value serializes");
    serde_json::from_value(json).expect("the client reads what the sandbox serves")
}

/// The `/metrics` text served at `url` (an admin listener's `/metrics`).
pub async fn metrics_text(http: &reqwest::Client, url: String) -> String {
    http.get(url)
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("the metrics text")
}

/// The value of `series` (its name and labels as exposed) in a `/metrics` text.
pub fn series_value(metrics: &str, series: &str) -> Option<String> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(str::to_owned)
}
