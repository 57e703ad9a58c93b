//! `[ingest]` and `[webhook]`: the public listener and how its deliveries are verified.

use super::*;

/// `[ingest]`: the public listener the webhook registrations target.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngestSettings {
    pub bind: String,
    /// Path deliveries are posted to.
    pub path: String,
    /// Larger bodies are refused with 413 without being read further.
    pub max_body_bytes: usize,
    /// Unapplied events above which deliveries are refused with 503 + `Retry-After`.
    pub max_backlog: u64,
}

impl Default for IngestSettings {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:8080".into(),
            path: "/webhooks".into(),
            max_body_bytes: 1024 * 1024,
            max_backlog: 100_000,
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
