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
pub use digest::{compute, digest_len, first_match, verify_tag};

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
    /// The header value that verified.
    pub signature: SignatureHeader,
}

/// Which header value carried the signature that verified: a sender may repeat the header,
/// and every value is tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeader {
    /// The header's name, in lowercase.
    pub name: String,
    /// Its place among the values of that name, in the order received (from 0).
    pub position: usize,
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
        let candidates = self.hmac_candidates(headers)?;
        let timestamp = if f.timestamp_header.is_empty() {
            None
        } else {
            let ts = header(headers, &f.timestamp_header)?;
            self.check_timestamp(&f.timestamp_header, ts, now)?;
            Some(ts)
        };
        let with_timestamp: [&[u8]; 3];
        let content: &[&[u8]] = match timestamp {
            Some(ts) => {
                with_timestamp = [ts.as_bytes(), b".", body];
                &with_timestamp
            }
            None => std::slice::from_ref(&body),
        };
        let tags: Vec<&[u8]> = candidates.iter().map(|(_, tag)| tag.as_slice()).collect();
        self.first_key(f.algorithm, content, &tags)
            .map(|(secret_index, matched)| Verified {
                secret_index,
                webhook_id: None,
                signature: SignatureHeader {
                    name: f.header.clone(),
                    position: candidates[matched].0,
                },
            })
            .ok_or(Rejection::Mismatch)
    }

    /// Every value of the signature header that is well formed (prefix, encoding, length),
    /// decoded, with its place among the header's values.
    fn hmac_candidates(&self, headers: &HeaderMap) -> Result<Vec<(usize, Vec<u8>)>, Rejection> {
        let f = &self.format;
        let mut values = headers.get_all(f.header.as_str()).iter().peekable();
        if values.peek().is_none() {
            return Err(Rejection::MissingHeader(f.header.clone()));
        }
        let candidates: Vec<(usize, Vec<u8>)> = values
            .enumerate()
            .filter_map(|(position, value)| {
                let digest = value
                    .to_str()
                    .ok()?
                    .trim()
                    .strip_prefix(f.prefix.as_str())?;
                let tag = decode(f.encoding, digest)?;
                (tag.len() == digest_len(f.algorithm)).then_some((position, tag))
            })
            .collect();
        if candidates.is_empty() {
            return Err(Rejection::Malformed(f.header.clone()));
        }
        Ok(candidates)
    }

    /// The first configured key (its index) under which one of `tags` (its index) is the
    /// HMAC of `content`.
    fn first_key(
        &self,
        algorithm: Algorithm,
        content: &[&[u8]],
        tags: &[&[u8]],
    ) -> Option<(usize, usize)> {
        self.keys
            .iter()
            .enumerate()
            .find_map(|(secret_index, key)| {
                first_match(algorithm, key.bytes(), content, tags).map(|tag| (secret_index, tag))
            })
    }

    fn verify_standard(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        now: i64,
    ) -> Result<Verified, Rejection> {
        let id = header(headers, WEBHOOK_ID)?;
        let ts = header(headers, WEBHOOK_TIMESTAMP)?;
        let values: Vec<Option<&str>> = headers
            .get_all(WEBHOOK_SIGNATURE)
            .iter()
            .map(|v| v.to_str().ok())
            .collect();
        if values.is_empty() {
            return Err(Rejection::MissingHeader(WEBHOOK_SIGNATURE.to_owned()));
        }
        if values.iter().all(Option::is_none) {
            return Err(Rejection::Malformed(WEBHOOK_SIGNATURE.to_owned()));
        }
        self.check_timestamp(WEBHOOK_TIMESTAMP, ts, now)?;
        // Each value is a space-separated list of `v1,{base64}`; other versions are skipped.
        let candidates: Vec<(usize, Vec<u8>)> = values
            .iter()
            .enumerate()
            .flat_map(|(position, value)| {
                value
                    .unwrap_or_default()
                    .split_whitespace()
                    .filter_map(move |entry| {
                        let Some(("v1", b64)) = entry.split_once(',') else {
                            return None;
                        };
                        let tag = decode(Encoding::Base64, b64)?;
                        (tag.len() == digest_len(Algorithm::Sha256)).then_some((position, tag))
                    })
            })
            .collect();
        let tags: Vec<&[u8]> = candidates.iter().map(|(_, tag)| tag.as_slice()).collect();
        let content: [&[u8]; 5] = [id.as_bytes(), b".", ts.as_bytes(), b".", body];
        self.first_key(Algorithm::Sha256, &content, &tags)
            .map(|(secret_index, matched)| Verified {
                secret_index,
                webhook_id: Some(id.to_owned()),
                signature: SignatureHeader {
                    name: WEBHOOK_SIGNATURE.to_owned(),
                    position: candidates[matched].0,
                },
            })
            .ok_or(Rejection::Mismatch)
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

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::SecretString;

    const NOW: i64 = 1_800_000_000;

    fn verifier(scheme: Scheme, secrets: &[&str]) -> Verifier {
        let settings = WebhookSettings {
            scheme,
            secrets: secrets.iter().map(|s| SecretString::from(*s)).collect(),
            ..WebhookSettings::default()
        };
        Verifier::new(&settings)
    }

    /// The headers `sign` gives for `body` under `secret`, with `extra` values appended
    /// after (`after`) or before them.
    fn signed(
        verifier: &Verifier,
        secret: &str,
        body: &[u8],
        extra: &[(&str, &str)],
        after: bool,
    ) -> HeaderMap {
        let key = Key::for_scheme(verifier.format().scheme, secret).unwrap();
        let signed = sign(verifier.format(), &key, body, NOW, Some("msg_1"));
        let extra = extra
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()));
        let pairs: Vec<(String, String)> = if after {
            signed.into_iter().chain(extra).collect()
        } else {
            extra.chain(signed).collect()
        };
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                http::HeaderName::try_from(name).unwrap(),
                value.parse().unwrap(),
            );
        }
        headers
    }

    #[test]
    fn a_repeated_signature_header_verifies_by_whichever_value_is_right_and_says_which() {
        let v = verifier(Scheme::Hmac, &["old", "new"]);
        let body = br#"{"id":"evt_1"}"#;
        let bogus = ("x-signature", "00".repeat(32));
        let first = signed(&v, "new", body, &[(bogus.0, &bogus.1)], true);
        let verified = v.verify(&first, body, NOW).unwrap();
        assert_eq!(verified.secret_index, 1);
        assert_eq!(
            verified.signature,
            SignatureHeader {
                name: "x-signature".into(),
                position: 0
            }
        );
        let second = signed(
            &v,
            "old",
            body,
            &[(bogus.0, &bogus.1), ("x-signature", "zz")],
            false,
        );
        let verified = v.verify(&second, body, NOW).unwrap();
        assert_eq!((verified.secret_index, verified.signature.position), (0, 2));
        let none = signed(&v, "another", body, &[(bogus.0, &bogus.1)], true);
        assert_eq!(v.verify(&none, body, NOW), Err(Rejection::Mismatch));
        let mut malformed = signed(&v, "old", b"", &[], true);
        malformed.insert("x-signature", "zz".parse().unwrap());
        assert_eq!(
            v.verify(&malformed, body, NOW),
            Err(Rejection::Malformed("x-signature".into()))
        );
    }

    #[test]
    fn a_repeated_standard_webhooks_signature_header_verifies_by_its_right_value() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let v = verifier(Scheme::StandardWebhooks, &[secret]);
        let body = br#"{"id":"evt_1"}"#;
        let bogus = format!("v1,{} v2,abc", encode(Encoding::Base64, &[0; 32]));
        let headers = signed(&v, secret, body, &[(WEBHOOK_SIGNATURE, &bogus)], false);
        let verified = v.verify(&headers, body, NOW).unwrap();
        assert_eq!(verified.webhook_id.as_deref(), Some("msg_1"));
        assert_eq!(
            verified.signature,
            SignatureHeader {
                name: WEBHOOK_SIGNATURE.into(),
                position: 1
            }
        );
    }
}
