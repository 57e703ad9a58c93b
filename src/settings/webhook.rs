//! `[ingest]` and `[webhook]`: the public listener and how its deliveries are verified.

use super::*;

/// `[ingest]`: the public listener the webhook registrations target.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngestSettings {
    pub bind: String,
    /// Path deliveries are posted to.
    pub path: String,
    /// The URL the service calls (`https://hooks.example.org/webhooks`): the target of the
    /// webhook registrations `webhooks register` makes. Empty: not known here, and those
    /// commands need `--target-url`.
    pub public_url: String,
    /// Larger bodies are refused with 413 without being read further.
    pub max_body_bytes: usize,
    /// Unapplied events above which deliveries are refused with 503 + `Retry-After`.
    pub max_backlog: u64,
    /// Open connections at most; at the cap a new one takes the place of the one longest
    /// without a request in progress (see [`crate::listener`]).
    pub max_connections: usize,
    /// A request's head must be complete this long after its first byte.
    pub header_timeout_secs: u64,
    /// A request's body must be complete this long after its head.
    pub body_timeout_secs: u64,
    /// A connection with no request in progress is closed after this.
    pub idle_timeout_secs: u64,
}

impl IngestSettings {
    /// The listener's limits.
    pub fn limits(&self) -> crate::listener::Limits {
        crate::listener::Limits::from_settings(
            self.max_connections,
            self.header_timeout_secs,
            self.body_timeout_secs,
            self.idle_timeout_secs,
        )
    }
}

impl Default for IngestSettings {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:8080".into(),
            path: "/webhooks".into(),
            public_url: String::new(),
            max_body_bytes: 1024 * 1024,
            max_backlog: 100_000,
            max_connections: 4096,
            header_timeout_secs: 10,
            body_timeout_secs: 30,
            idle_timeout_secs: 30,
        }
    }
}

/// `[webhook]`: how deliveries are verified.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookSettings {
    pub scheme: Scheme,
    /// Every secret accepted; during a rotation the old and the new stand side by side.
    #[serde(serialize_with = "redact_list")]
    pub secrets: Vec<SecretString>,
    /// A file with one secret per line, added to `secrets`.
    pub secrets_file: Option<PathBuf>,
    /// hmac: the header carrying the signature.
    pub header: String,
    pub algorithm: Algorithm,
    pub encoding: Encoding,
    /// hmac: text before the digest in the header, e.g. `sha256=`.
    pub prefix: String,
    /// hmac: when set, the signed content is `{timestamp}.{body}`.
    pub timestamp_header: String,
    /// Largest accepted distance, either way, between a signed timestamp and now.
    pub tolerance_secs: u64,
    /// Ownership validation: every ingest response carries this header ...
    pub confirmation_header: String,
    /// ... with this value.
    pub account_id: String,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            scheme: Scheme::Hmac,
            secrets: Vec::new(),
            secrets_file: None,
            header: "X-Signature".into(),
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
            prefix: String::new(),
            timestamp_header: String::new(),
            tolerance_secs: 300,
            confirmation_header: String::new(),
            account_id: String::new(),
        }
    }
}

/// Signature schemes understood by the ingest endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    Hmac,
    StandardWebhooks,
}

/// HMAC hash functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    Sha1,
    Sha256,
    Sha512,
}

impl Algorithm {
    pub const ALL: [Algorithm; 3] = [Algorithm::Sha256, Algorithm::Sha1, Algorithm::Sha512];

    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Sha1 => "sha1",
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }
}

/// Text encodings of a digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    Hex,
    Base64,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Hex => "hex",
            Encoding::Base64 => "base64",
        }
    }
}
