//! How the sandbox signs its deliveries. The service's own scheme is not published
//! (`beyond-the-docs.md`), so it is configurable, as on the daemon's side: an HMAC in one
//! header (hash, encoding, prefix, and an optional timestamp header), or Standard Webhooks.
//! Written here with the `hmac` and `sha*` crates, apart from the daemon's verifier, so that
//! each checks the other.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};

/// Header names of Standard Webhooks.
const WEBHOOK_ID: &str = "webhook-id";
const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
const WEBHOOK_SIGNATURE: &str = "webhook-signature";

/// A signature scheme. The default is what the daemon expects out of the box: HMAC-SHA256
/// of the body, hex, in `x-signature`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signing {
    /// An HMAC of the body, or of `{timestamp}.{body}` when a timestamp header is named;
    /// the secret's text is the key.
    Hmac(HmacSigning),
    /// `webhook-id`, `webhook-timestamp` and `webhook-signature: v1,{base64}`, the HMAC-SHA256
    /// of `{id}.{timestamp}.{body}`; the key is the secret after `whsec_`, base64-decoded.
    StandardWebhooks,
}

impl Default for Signing {
    fn default() -> Self {
        Self::Hmac(HmacSigning::default())
    }
}

/// The parts of an HMAC signature header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HmacSigning {
    /// The header carrying the signature.
    pub header: String,
    pub algorithm: Algorithm,
    pub encoding: Encoding,
    /// Text before the digest, e.g. `sha256=`.
    pub prefix: String,
    /// When set, this header carries the unix time and the signed content is
    /// `{timestamp}.{body}`.
    pub timestamp_header: Option<String>,
}

impl Default for HmacSigning {
    fn default() -> Self {
        Self {
            header: "x-signature".into(),
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
            prefix: String::new(),
            timestamp_header: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Sha256,
    Sha1,
    Sha512,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Hex,
    Base64,
}

impl Signing {
    /// The headers of a delivery of `body` (event `id`) signed with `secret` at unix time
    /// `timestamp`. `None` when the secret is no key under this scheme (a Standard Webhooks
    /// secret that is not base64): the delivery then goes unsigned.
    pub fn headers(
        &self,
        secret: &str,
        id: &str,
        timestamp: i64,
        body: &[u8],
    ) -> Option<Vec<(String, String)>> {
        let ts = timestamp.to_string();
        match self {
            Self::Hmac(h) => {
                let key = secret.as_bytes();
                let (digest, timestamp_header) = match &h.timestamp_header {
                    Some(name) => (
                        mac(h.algorithm, key, &[ts.as_bytes(), b".", body])?,
                        Some((name.clone(), ts)),
                    ),
                    None => (mac(h.algorithm, key, &[body])?, None),
                };
                let value = format!("{}{}", h.prefix, encode(h.encoding, &digest));
                Some(
                    std::iter::once((h.header.clone(), value))
                        .chain(timestamp_header)
                        .collect(),
                )
            }
            Self::StandardWebhooks => {
                let key = standard_webhooks_key(secret)?;
                let content: [&[u8]; 5] = [id.as_bytes(), b".", ts.as_bytes(), b".", body];
                let digest = mac(Algorithm::Sha256, &key, &content)?;
                Some(vec![
                    (WEBHOOK_ID.to_owned(), id.to_owned()),
                    (WEBHOOK_TIMESTAMP.to_owned(), ts),
                    (
                        WEBHOOK_SIGNATURE.to_owned(),
                        format!("v1,{}", STANDARD.encode(digest)),
                    ),
                ])
            }
        }
    }
}

/// `whsec_` (optional) and base64, padded or not; an empty key is no key.
fn standard_webhooks_key(secret: &str) -> Option<Vec<u8>> {
    let text = secret.strip_prefix("whsec_").unwrap_or(secret);
    let key = STANDARD
        .decode(text)
        .or_else(|_| STANDARD_NO_PAD.decode(text))
        .ok()?;
    (!key.is_empty()).then_some(key)
}

/// The HMAC of the concatenated `parts`.
fn mac(algorithm: Algorithm, key: &[u8], parts: &[&[u8]]) -> Option<Vec<u8>> {
    fn run<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]]) -> Option<Vec<u8>> {
        let mut mac = <M as KeyInit>::new_from_slice(key).ok()?;
        for part in parts {
            mac.update(part);
        }
        Some(mac.finalize().into_bytes().to_vec())
    }
    match algorithm {
        Algorithm::Sha256 => run::<Hmac<sha2::Sha256>>(key, parts),
        Algorithm::Sha1 => run::<Hmac<sha1::Sha1>>(key, parts),
        Algorithm::Sha512 => run::<Hmac<sha2::Sha512>>(key, parts),
    }
}

fn encode(encoding: Encoding, digest: &[u8]) -> String {
    match encoding {
        Encoding::Hex => hex::encode(digest),
        Encoding::Base64 => STANDARD.encode(digest),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// The published vectors, shared with the daemon's tests.
    const VECTORS: &str = include_str!("../../../tests/data/signature-vectors.json");

    fn vectors() -> Value {
        serde_json::from_str(VECTORS).expect("the vectors are JSON")
    }

    fn text<'a>(case: &'a Value, field: &str) -> &'a str {
        case[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field} in {case}"))
    }

    fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{name} in {headers:?}"))
    }

    fn hmac_sha256(prefix: &str, timestamp_header: Option<&str>) -> Signing {
        Signing::Hmac(HmacSigning {
            prefix: prefix.into(),
            timestamp_header: timestamp_header.map(str::to_owned),
            ..HmacSigning::default()
        })
    }

    #[test]
    fn standard_webhooks_signatures_are_the_published_ones() {
        let vectors = vectors();
        let cases = vectors["standard_webhooks"].as_array().expect("cases");
        assert!(!cases.is_empty());
        for case in cases {
            let timestamp: i64 = text(case, "webhook_timestamp").parse().expect("a number");
            let id = text(case, "webhook_id");
            let headers = Signing::StandardWebhooks
                .headers(
                    text(case, "secret"),
                    id,
                    timestamp,
                    text(case, "payload").as_bytes(),
                )
                .expect("a base64 secret is a key");
            assert_eq!(header(&headers, WEBHOOK_ID), id);
            assert_eq!(
                header(&headers, WEBHOOK_TIMESTAMP),
                text(case, "webhook_timestamp")
            );
            let signature = header(&headers, WEBHOOK_SIGNATURE);
            assert_eq!(Some(signature), case["valid"][0].as_str(), "{case}");
            for other in ["invalid", "valid_when_listed_with_the_valid_one"] {
                for wrong in case[other].as_array().into_iter().flatten() {
                    assert_ne!(Some(signature), wrong.as_str(), "{other} in {case}");
                }
            }
        }
    }

    #[test]
    fn hmac_signatures_over_the_body_are_the_published_ones() {
        let vectors = vectors();
        for case in vectors["hmac_hex_over_body"].as_array().expect("cases") {
            assert_eq!(text(case, "algorithm"), "sha256");
            let signing = hmac_sha256(text(case, "prefix"), None);
            let headers = signing
                .headers(
                    text(case, "secret"),
                    "evt_1",
                    0,
                    text(case, "payload").as_bytes(),
                )
                .expect("any text is an HMAC key");
            assert_eq!(
                headers,
                vec![("x-signature".into(), text(case, "expected").into())]
            );
        }
    }

    #[test]
    fn hmac_signatures_over_timestamp_and_body_are_the_published_ones() {
        let vectors = vectors();
        for case in vectors["hmac_hex_over_timestamp_dot_body"]
            .as_array()
            .expect("cases")
        {
            assert_eq!(text(case, "algorithm"), "sha256");
            let timestamp: i64 = text(case, "timestamp").parse().expect("a number");
            let signing = hmac_sha256("", Some("x-timestamp"));
            let headers = signing
                .headers(
                    text(case, "secret"),
                    "evt_1",
                    timestamp,
                    text(case, "payload").as_bytes(),
                )
                .expect("any text is an HMAC key");
            assert_eq!(header(&headers, "x-signature"), text(case, "expected"));
            assert_eq!(header(&headers, "x-timestamp"), text(case, "timestamp"));
        }
    }

    #[test]
    fn each_hash_and_encoding_gives_a_digest_of_its_length() {
        for (algorithm, bytes) in [
            (Algorithm::Sha1, 20),
            (Algorithm::Sha256, 32),
            (Algorithm::Sha512, 64),
        ] {
            for encoding in [Encoding::Hex, Encoding::Base64] {
                let signing = Signing::Hmac(HmacSigning {
                    algorithm,
                    encoding,
                    ..HmacSigning::default()
                });
                let headers = signing.headers("k", "evt_1", 0, b"{}").expect("signed");
                let value = header(&headers, "x-signature");
                let decoded = match encoding {
                    Encoding::Hex => hex::decode(value).expect("hex"),
                    Encoding::Base64 => STANDARD.decode(value).expect("base64"),
                };
                assert_eq!(decoded.len(), bytes, "{algorithm:?} {encoding:?}");
            }
        }
    }

    #[test]
    fn a_standard_webhooks_secret_that_is_not_base64_signs_nothing() {
        assert_eq!(
            Signing::StandardWebhooks.headers("whsec_***", "evt_1", 0, b"{}"),
            None
        );
        assert_eq!(
            Signing::StandardWebhooks.headers("whsec_", "evt_1", 0, b"{}"),
            None
        );
    }
}
