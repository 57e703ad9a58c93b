//! What a sandbox simulates: credentials, account size, seed, and faults.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::signing::Signing;

/// Faults of webhook delivery.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeliveryFaults {
    /// Share of events never sent (the daemon's reconciliation must make up for them).
    pub drop_rate: f64,
    /// Share of events sent twice.
    pub duplicate_rate: f64,
    /// Events waiting together are sent in a shuffled order.
    pub reorder: bool,
    /// Each event waits a random time up to this before its first attempt.
    pub max_delay_ms: u64,
}

/// Faults of the API (resource endpoints only: the token endpoint is exempt from rate
/// limiting, as on the service).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ApiFaults {
    /// Share of requests answered 429.
    pub rate_429: f64,
    /// Share of requests answered 500 or 503.
    pub rate_5xx: f64,
    /// `Retry-After` seconds sent with a 429; the service sends none, so neither by default.
    pub retry_after_secs: Option<u64>,
}

/// A registration made at start, for both event kinds and the whole account.
#[derive(Clone, PartialEq, Eq)]
pub struct DeliverTo {
    pub url: String,
    pub secret: String,
}

impl std::fmt::Debug for DeliverTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { url, secret: _ } = self;
        f.debug_struct("DeliverTo")
            .field("url", url)
            .field("secret", &REDACTED)
            .finish()
    }
}

/// What `Debug` shows of a secret.
const REDACTED: &str = "[redacted]";

/// A committee of the fake VAN (`/van/v4`), reached with its own API key. Each committee
/// has its own ids for the same result code and contact type names.
#[derive(Clone, PartialEq, Eq)]
pub struct VanCommittee {
    pub name: String,
    /// The API key (the part of the Basic password before `|`).
    pub api_key: String,
    /// The committee has the contact type "SMS Text"; without it, a destination that looks
    /// it up finds it missing.
    pub sms_text: bool,
}

impl VanCommittee {
    pub fn new(name: &str, api_key: &str) -> Self {
        Self {
            name: name.into(),
            api_key: api_key.into(),
            sms_text: true,
        }
    }
}

impl std::fmt::Debug for VanCommittee {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self {
            name,
            api_key: _,
            sms_text,
        } = self;
        f.debug_struct("VanCommittee")
            .field("name", name)
            .field("api_key", &REDACTED)
            .field("sms_text", sms_text)
            .finish()
    }
}

/// The fake VAN's API keys unless told otherwise: one committee each.
pub const DEFAULT_VAN_KEY: &str = "sandbox-van-key";
/// The auth token `sandbox twilio-send` signs with unless told another.
pub const DEFAULT_TWILIO_AUTH_TOKEN: &str = "sandbox-twilio-auth-token";
pub const DEFAULT_VAN_KEY_2: &str = "sandbox-van-key-2";
/// The `OSDI-API-Token` the fake Action Network accepts unless told otherwise.
pub const DEFAULT_ACTION_NETWORK_KEY: &str = "sandbox-an-key";
/// The API key (`Authorization: Bearer KEY`) the fake Mobilize accepts unless told otherwise.
pub const DEFAULT_MOBILIZE_KEY: &str = "sandbox-mobilize-key";
/// The login email (the HTTP Basic user) the fake Mobile Commons accepts unless told otherwise.
pub const DEFAULT_MOBILE_COMMONS_USERNAME: &str = "sandbox-mc@example.org";
/// The password (HTTP Basic) the fake Mobile Commons accepts unless told otherwise.
pub const DEFAULT_MOBILE_COMMONS_PASSWORD: &str = "sandbox-mobile-commons-password";
/// The API token (`Authorization: Bearer TOKEN`, a company whose logins moved to Upland's
/// credential manager) the fake Mobile Commons accepts unless told otherwise.
pub const DEFAULT_MOBILE_COMMONS_TOKEN: &str = "sandbox-mobile-commons-token";
/// The Ed25519 private key seed (hexadecimal) `sandbox telnyx-send` signs with unless told
/// another: a published test key of the sandbox's own, never a real account's. It is the
/// SHA-256 of the text "outreach-sync sandbox telnyx test key".
pub const DEFAULT_TELNYX_SEED: &str =
    "cad29e0cf6784e246d963a8905d845dd4969a28f2e03543c8d509c8d2d5d410d";
/// The public key (base64 of its 32 bytes) of [`DEFAULT_TELNYX_SEED`]: what a daemon's
/// Telnyx source is given as the account's public key to take the sandbox's messages.
pub const DEFAULT_TELNYX_PUBLIC_KEY: &str = "RjltmtIRNXF88fF0gMNhvUctEq7AxCFSuiHYvb7o35s=";
/// The username of the callback credentials `sandbox bandwidth-send` sends unless told
/// another (set on a Bandwidth application, beside its inbound callback URL).
pub const DEFAULT_BANDWIDTH_USERNAME: &str = "sandbox-bandwidth";
/// The password of the callback credentials `sandbox bandwidth-send` sends unless told
/// another.
pub const DEFAULT_BANDWIDTH_PASSWORD: &str = "sandbox-bandwidth-password";

/// The two committees of a default sandbox.
pub fn default_van_committees() -> Vec<VanCommittee> {
    vec![
        VanCommittee::new("Sandbox Campaign", DEFAULT_VAN_KEY),
        VanCommittee::new("Sandbox Party", DEFAULT_VAN_KEY_2),
    ]
}

#[derive(Clone)]
pub struct SandboxConfig {
    /// Port 0 picks a free port (tests).
    pub bind: SocketAddr,
    pub client_id: String,
    pub client_secret: String,
    /// Returned by mock_event and expected in the ownership confirmation header.
    pub account_id: String,
    /// `expires_in` of minted tokens.
    pub token_lifetime: Duration,
    pub seed: u64,
    pub leads: usize,
    pub organizations: usize,
    /// Opt-out and opt-in reach every lead of the account with the same number.
    pub account_sync: bool,
    /// How deliveries are signed.
    pub signing: Signing,
    pub delivery_faults: DeliveryFaults,
    pub api_faults: ApiFaults,
    /// Attempts per delivery (the first included) before giving up on a non-2xx target.
    pub delivery_attempts: u32,
    /// First wait between delivery attempts; doubles each time, up to 10 s.
    pub delivery_backoff: Duration,
    /// v2 answers 422 to a page starting this deep (the service: 100,000).
    pub v2_cursor_depth: usize,
    /// Page size when `limit` is absent.
    pub default_page_size: usize,
    /// When set, mock_event passes validation only if the target answers with this header
    /// carrying `account_id`. Deliveries never require it.
    pub confirmation_header: Option<String>,
    pub deliver_to: Option<DeliverTo>,
    /// Background activity (messages sent and advanced, people texting STOP/START) at this
    /// interval; `None` leaves the sandbox still until told.
    pub activity_interval: Option<Duration>,
    /// The committees of the fake VAN, one per API key.
    pub van_committees: Vec<VanCommittee>,
    /// The key the fake Action Network accepts in `OSDI-API-Token`.
    pub action_network_key: String,
    /// The key the fake Mobilize accepts as `Authorization: Bearer KEY`.
    pub mobilize_key: String,
    /// The login email the fake Mobile Commons accepts as the HTTP Basic user.
    pub mobile_commons_username: String,
    /// The password the fake Mobile Commons accepts with it.
    pub mobile_commons_password: String,
    /// The API token the fake Mobile Commons accepts as `Authorization: Bearer TOKEN`
    /// (empty: none).
    pub mobile_commons_token: String,
}

/// The credentials a sandbox accepts unless told otherwise.
pub(crate) const DEFAULT_CLIENT_ID: &str = "sandbox@example.org";
pub(crate) const DEFAULT_CLIENT_SECRET: &str = "sandbox-secret";

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            client_id: DEFAULT_CLIENT_ID.into(),
            client_secret: DEFAULT_CLIENT_SECRET.into(),
            account_id: "acct_sandbox".into(),
            token_lifetime: Duration::from_secs(7200),
            seed: 1,
            leads: 20,
            organizations: 2,
            account_sync: true,
            signing: Signing::default(),
            delivery_faults: DeliveryFaults::default(),
            api_faults: ApiFaults::default(),
            delivery_attempts: 8,
            delivery_backoff: Duration::from_millis(200),
            v2_cursor_depth: 100_000,
            default_page_size: 100,
            confirmation_header: None,
            deliver_to: None,
            activity_interval: None,
            van_committees: default_van_committees(),
            action_network_key: DEFAULT_ACTION_NETWORK_KEY.into(),
            mobilize_key: DEFAULT_MOBILIZE_KEY.into(),
            mobile_commons_username: DEFAULT_MOBILE_COMMONS_USERNAME.into(),
            mobile_commons_password: DEFAULT_MOBILE_COMMONS_PASSWORD.into(),
            mobile_commons_token: DEFAULT_MOBILE_COMMONS_TOKEN.into(),
        }
    }
}

impl std::fmt::Debug for SandboxConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every field named, so a new one cannot slip past the redaction unnoticed.
        let Self {
            bind,
            client_id,
            client_secret: _,
            account_id,
            token_lifetime,
            seed,
            leads,
            organizations,
            account_sync,
            signing,
            delivery_faults,
            api_faults,
            delivery_attempts,
            delivery_backoff,
            v2_cursor_depth,
            default_page_size,
            confirmation_header,
            deliver_to,
            activity_interval,
            van_committees,
            action_network_key: _,
            mobilize_key: _,
            mobile_commons_username: _,
            mobile_commons_password: _,
            mobile_commons_token: _,
        } = self;
        f.debug_struct("SandboxConfig")
            .field("bind", bind)
            .field("client_id", client_id)
            .field("client_secret", &REDACTED)
            .field("account_id", account_id)
            .field("token_lifetime", token_lifetime)
            .field("seed", seed)
            .field("leads", leads)
            .field("organizations", organizations)
            .field("account_sync", account_sync)
            .field("signing", signing)
            .field("delivery_faults", delivery_faults)
            .field("api_faults", api_faults)
            .field("delivery_attempts", delivery_attempts)
            .field("delivery_backoff", delivery_backoff)
            .field("v2_cursor_depth", v2_cursor_depth)
            .field("default_page_size", default_page_size)
            .field("confirmation_header", confirmation_header)
            .field("deliver_to", deliver_to)
            .field("activity_interval", activity_interval)
            .field("van_committees", van_committees)
            .field("action_network_key", &REDACTED)
            .field("mobilize_key", &REDACTED)
            .field("mobile_commons_username", &REDACTED)
            .field("mobile_commons_password", &REDACTED)
            .field("mobile_commons_token", &REDACTED)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_secret() {
        let config = SandboxConfig {
            client_secret: "client-s3cret".into(),
            deliver_to: Some(DeliverTo {
                url: "http://127.0.0.1:9/hook".into(),
                secret: "delivery-s3cret".into(),
            }),
            van_committees: vec![VanCommittee::new("c", "van-s3cret")],
            action_network_key: "an-s3cret".into(),
            mobilize_key: "mobilize-s3cret".into(),
            mobile_commons_username: "mc-user-s3cret@example.org".into(),
            mobile_commons_password: "mc-s3cret".into(),
            mobile_commons_token: "mc-token-s3cret".into(),
            ..SandboxConfig::default()
        };
        let shown = format!("{config:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("http://127.0.0.1:9/hook"), "{shown}");
    }
}
