//! Webhook signatures: verifying a delivery on its exact bytes, and signing one (for `sign`).
//! Both schemes of the configuration contract are verified here and nowhere else; the
//! sandbox signs with its own implementation, so each checks the other.

pub mod diagnose;
mod digest;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use http::HeaderMap;
use secrecy::{ExposeSecret, SecretSlice};

use crate::settings::{Algorithm, Encoding, Scheme, WebhookSettings, standard_webhooks_key};
pub use digest::{compute, digest_len, verify_tag};

/// Header names of the Standard Webhooks scheme.
pub const WEBHOOK_ID: &str = "webhook-id";
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";

/// How a signature is carried and computed: everything of `[webhook]` but the secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureFormat {
    pub scheme: Scheme,
    /// hmac: header carrying the signature.
    pub header: String,
    pub algorithm: Algorithm,
    pub encoding: Encoding,
    pub prefix: String,
    /// hmac: when not empty, the signed content is `{timestamp}.{body}`.
    pub timestamp_header: String,
}

impl Default for SignatureFormat {
    fn default() -> Self {
        SignatureFormat::from(&WebhookSettings::default())
    }
}

impl From<&WebhookSettings> for SignatureFormat {
    fn from(w: &WebhookSettings) -> Self {
        Self {
            scheme: w.scheme,
            header: w.header.to_ascii_lowercase(),
            algorithm: w.algorithm,
            encoding: w.encoding,
            prefix: w.prefix.clone(),
            timestamp_header: w.timestamp_header.to_ascii_lowercase(),
        }
    }
}

/// A signing key, as bytes, that never prints itself.
pub struct Key(SecretSlice<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key([redacted])")
    }
}

impl Key {
    /// The key of a configured secret under a scheme: the text's bytes for `hmac`, the
    /// base64-decoded text (after an optional `whsec_`) for Standard Webhooks.
    pub fn for_scheme(scheme: Scheme, secret: &str) -> Option<Key> {
        let bytes = match scheme {
            Scheme::Hmac => secret.as_bytes().to_vec(),
            Scheme::StandardWebhooks => standard_webhooks_key(secret)?,
        };
        Some(Key(bytes.into()))
    }

    pub fn bytes(&self) -> &[u8] {
        self.0.expose_secret()
    }
}

/// Why a delivery was refused. The text is safe to show a client: it names headers, never
/// secrets or expected values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("missing header {0}")]
    MissingHeader(String),
    #[error("malformed header {0}")]
    Malformed(String),
    #[error("signature does not match")]
    Mismatch,
    #[error("timestamp outside the tolerance")]
    OutsideTolerance,
}

/// What verification learnt about a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Position of the matching secret in the configured list.
    pub secret_index: usize,
    /// The `webhook-id` header, for the Standard Webhooks scheme.
    pub webhook_id: Option<String>,
}

/// Verifies deliveries against every configured secret.
#[derive(Debug)]
pub struct Verifier {
    format: SignatureFormat,
    keys: Vec<Key>,
    tolerance_secs: i64,
}

impl Verifier {
    /// Builds the verifier of a validated `[webhook]` section; secrets that do not decode
    /// under the scheme are skipped (validation refuses them first).
    pub fn new(settings: &WebhookSettings) -> Self {
        Self {
            format: SignatureFormat::from(settings),
            keys: settings
                .secrets
                .iter()
                .filter_map(|s| Key::for_scheme(settings.scheme, s.expose_secret()))
                .collect(),
            tolerance_secs: i64::try_from(settings.tolerance_secs).unwrap_or(i64::MAX),
        }
    }

    pub fn format(&self) -> &SignatureFormat {
        &self.format
    }

    /// Verifies `body`, exactly as received, at unix time `now`.
    pub fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<Verified, Rejection> {
        match self.format.scheme {
            Scheme::Hmac => self.verify_hmac(headers, body, now),
            Scheme::StandardWebhooks => self.verify_standard(headers, body, now),
        }
    }

    fn check_timestamp(&self, name: &str, value: &str, now: i64) -> Result<(), Rejection> {
        let ts: i64 = value
            .trim()
            .parse()
            .map_err(|_| Rejection::Malformed(name.to_owned()))?;
        if now.abs_diff(ts) > self.tolerance_secs.unsigned_abs() {
            return Err(Rejection::OutsideTolerance);
        }
        Ok(())
    }

    fn verify_hmac(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<Verified, Rejection> {
        let f = &self.format;
        let value = header(headers, &f.header)?;
        let digest = value
            .trim()
            .strip_prefix(f.prefix.as_str())
            .ok_or_else(|| Rejection::Malformed(f.header.clone()))?;
        let tag =
            decode(f.encoding, digest).ok_or_else(|| Rejection::Malformed(f.header.clone()))?;
        if tag.len() != digest_len(f.algorithm) {
            return Err(Rejection::Malformed(f.header.clone()));
        }
        let timestamp = if f.timestamp_header.is_empty() {
            None
        } else {
            let ts = header(headers, &f.timestamp_header)?;
            self.check_timestamp(&f.timestamp_header, ts, now)?;
            Some(ts)
        };
        let matched = self.keys.iter().position(|key| match timestamp {
            Some(ts) => verify_tag(f.algorithm, key.bytes(), &[ts.as_bytes(), b".", body], &tag),
            None => verify_tag(f.algorithm, key.bytes(), &[body], &tag),
        });
        matched
            .map(|secret_index| Verified {
                secret_index,
                webhook_id: None,
            })
            .ok_or(Rejection::Mismatch)
    }

    fn verify_standard(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<Verified, Rejection> {
        let id = header(headers, WEBHOOK_ID)?;
        let ts = header(headers, WEBHOOK_TIMESTAMP)?;
        let signatures = header(headers, WEBHOOK_SIGNATURE)?;
        self.check_timestamp(WEBHOOK_TIMESTAMP, ts, now)?;
        let content: [&[u8]; 5] = [id.as_bytes(), b".", ts.as_bytes(), b".", body];
        for entry in signatures.split_whitespace() {
            let Some(("v1", b64)) = entry.split_once(',') else {
                continue;
            };
            let Some(tag) = decode(Encoding::Base64, b64) else {
                continue;
            };
            if tag.len() != digest_len(Algorithm::Sha256) {
                continue;
            }
            if let Some(secret_index) = self
                .keys
                .iter()
                .position(|key| verify_tag(Algorithm::Sha256, key.bytes(), &content, &tag))
            {
                return Ok(Verified {
                    secret_index,
                    webhook_id: Some(id.to_owned()),
                });
            }
        }
        Err(Rejection::Mismatch)
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<&'a str, Rejection> {
    let value = headers
        .get(name)
        .ok_or_else(|| Rejection::MissingHeader(name.to_owned()))?;
    value
        .to_str()
        .map_err(|_| Rejection::Malformed(name.to_owned()))
}

/// Decodes a digest written in `encoding`; base64 with or without padding.
pub fn decode(encoding: Encoding, text: &str) -> Option<Vec<u8>> {
    match encoding {
        Encoding::Hex => hex::decode(text).ok(),
        Encoding::Base64 => STANDARD
            .decode(text)
            .or_else(|_| STANDARD_NO_PAD.decode(text))
            .ok(),
    }
}

/// Encodes a digest in `encoding`.
pub fn encode(encoding: Encoding, tag: &[u8]) -> String {
    match encoding {
        Encoding::Hex => hex::encode(tag),
        Encoding::Base64 => STANDARD.encode(tag),
    }
}

/// The headers a sender attaches to `body` at unix time `now`. `webhook_id` is used by the
/// Standard Webhooks scheme (a fresh one is made when absent).
pub fn sign(
    format: &SignatureFormat,
    key: &Key,
    body: &[u8],
    now: i64,
    webhook_id: Option<&str>,
) -> Vec<(String, String)> {
    let ts = now.to_string();
    match format.scheme {
        Scheme::Hmac => {
            let mut headers = Vec::with_capacity(2);
            let tag = if format.timestamp_header.is_empty() {
                compute(format.algorithm, key.bytes(), &[body])
            } else {
                headers.push((format.timestamp_header.clone(), ts.clone()));
                compute(format.algorithm, key.bytes(), &[ts.as_bytes(), b".", body])
            };
            let value = format!("{}{}", format.prefix, encode(format.encoding, &tag));
            headers.insert(0, (format.header.clone(), value));
            headers
        }
        Scheme::StandardWebhooks => {
            let id = webhook_id.map(str::to_owned).unwrap_or_else(|| {
                // Stable for one body and second, so a resend of the same signing is a duplicate.
                let hash = compute(Algorithm::Sha256, ts.as_bytes(), &[body]);
                format!("msg_{}", hex::encode(&hash[..12]))
            });
            let tag = compute(
                Algorithm::Sha256,
                key.bytes(),
                &[id.as_bytes(), b".", ts.as_bytes(), b".", body],
            );
            vec![
                (WEBHOOK_ID.to_owned(), id),
                (WEBHOOK_TIMESTAMP.to_owned(), ts),
                (
                    WEBHOOK_SIGNATURE.to_owned(),
                    format!("v1,{}", encode(Encoding::Base64, &tag)),
                ),
            ]
        }
    }
}
