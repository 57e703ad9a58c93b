//! Signature discovery: given a delivery that failed verification and the configured secrets,
//! find which header, hash, encoding, prefix and signed content would have matched.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use secrecy::{ExposeSecret, SecretString};

use super::{
    WEBHOOK_ID, WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP, decode, digest_len, standard_webhooks_key,
    verify_tag,
};
use crate::settings::{Algorithm, Encoding, Scheme};

/// Headers that never carry a signature or a timestamp.
const NOT_SIGNATURES: &[&str] = &[
    "host",
    "content-type",
    "content-length",
    "user-agent",
    "accept",
    "accept-encoding",
    "connection",
    "transfer-encoding",
];

/// A format that verifies a delivery with one of the configured secrets.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    pub scheme: Scheme,
    pub header: String,
    pub algorithm: Algorithm,
    pub encoding: Encoding,
    pub prefix: String,
    /// The header whose value is signed as `{timestamp}.{body}`, if any.
    pub timestamp_header: Option<String>,
    /// Position of the matching secret in the configured list.
    pub secret_index: usize,
}

/// Every format under which `body` with `headers` verifies with one of `secrets`.
pub fn diagnose(
    headers: &[(String, String)],
    body: &[u8],
    secrets: &[SecretString],
) -> Vec<Finding> {
    let mut found = BTreeSet::new();
    let lookup = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    if let (Some(id), Some(ts), Some(sigs)) = (
        lookup(WEBHOOK_ID),
        lookup(WEBHOOK_TIMESTAMP),
        lookup(WEBHOOK_SIGNATURE),
    ) {
        standard_webhooks(id, ts, sigs, body, secrets, &mut found);
    }
    let timestamps: Vec<(&str, &str)> = headers
        .iter()
        .filter(|(_, v)| looks_like_unix_time(v))
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    for (name, value) in headers {
        let name_lc = name.to_ascii_lowercase();
        if NOT_SIGNATURES.contains(&name_lc.as_str()) || name_lc == WEBHOOK_SIGNATURE {
            continue;
        }
        for (prefix, digest) in prefix_splits(value.trim()) {
            for encoding in [Encoding::Hex, Encoding::Base64] {
                let Some(tag) = decode(encoding, digest) else {
                    continue;
                };
                for algorithm in Algorithm::ALL {
                    if tag.len() != digest_len(algorithm) {
                        continue;
                    }
                    for (index, secret) in secrets.iter().enumerate() {
                        let key = secret.expose_secret().as_bytes();
                        let mut hit = |timestamp_header: Option<&str>| {
                            found.insert(Finding {
                                scheme: Scheme::Hmac,
                                header: name_lc.clone(),
                                algorithm,
                                encoding,
                                prefix: prefix.to_owned(),
                                timestamp_header: timestamp_header.map(str::to_ascii_lowercase),
                                secret_index: index,
                            });
                        };
                        if verify_tag(algorithm, key, &[body], &tag) {
                            hit(None);
                        }
                        for (ts_name, ts) in &timestamps {
                            if verify_tag(algorithm, key, &[ts.as_bytes(), b".", body], &tag) {
                                hit(Some(ts_name));
                            }
                        }
                    }
                }
            }
        }
    }
    found.into_iter().collect()
}

fn standard_webhooks(
    id: &str,
    ts: &str,
    signatures: &str,
    body: &[u8],
    secrets: &[SecretString],
    found: &mut BTreeSet<Finding>,
) {
    let content: [&[u8]; 5] = [id.as_bytes(), b".", ts.as_bytes(), b".", body];
    for entry in signatures.split_whitespace() {
        let Some(tag) = entry
            .split_once(',')
            .and_then(|(_, b64)| decode(Encoding::Base64, b64))
        else {
            continue;
        };
        for (index, secret) in secrets.iter().enumerate() {
            let Some(key) = standard_webhooks_key(secret.expose_secret()) else {
                continue;
            };
            if verify_tag(Algorithm::Sha256, &key, &content, &tag) {
                found.insert(Finding {
                    scheme: Scheme::StandardWebhooks,
                    header: WEBHOOK_SIGNATURE.to_owned(),
                    algorithm: Algorithm::Sha256,
                    encoding: Encoding::Base64,
                    prefix: String::new(),
                    timestamp_header: Some(WEBHOOK_TIMESTAMP.to_owned()),
                    secret_index: index,
                });
            }
        }
    }
}

/// Seconds since the epoch from 2001 to 2286, as a header value.
fn looks_like_unix_time(value: &str) -> bool {
    let v = value.trim();
    v.len() == 10 && v.bytes().all(|b| b.is_ascii_digit())
}

/// The value whole, and split after each short leading label ending in `=`, `,` or `:`
/// (`sha256=…`, `v1,…`), so that a prefix is found without knowing it.
fn prefix_splits(value: &str) -> Vec<(&str, &str)> {
    let mut splits = vec![("", value)];
    for (i, c) in value.char_indices().take(24) {
        if matches!(c, '=' | ',' | ':') {
            let label = &value[..i];
            if !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                splits.push((&value[..=i], value[i + 1..].trim_start()));
            }
        }
    }
    splits
}

/// The `[webhook]` section that configures a finding.
pub fn config_snippet(finding: &Finding) -> String {
    let mut out = String::from("[webhook]\n");
    match finding.scheme {
        Scheme::StandardWebhooks => out.push_str("scheme = \"standard-webhooks\"\n"),
        Scheme::Hmac => {
            let _ = writeln!(out, "scheme = \"hmac\"");
            let _ = writeln!(out, "header = \"{}\"", finding.header);
            let _ = writeln!(out, "algorithm = \"{}\"", finding.algorithm.as_str());
            let _ = writeln!(out, "encoding = \"{}\"", finding.encoding.as_str());
            let _ = writeln!(out, "prefix = \"{}\"", finding.prefix);
            let _ = writeln!(
                out,
                "timestamp_header = \"{}\"",
                finding.timestamp_header.as_deref().unwrap_or("")
            );
        }
    }
    let _ = writeln!(
        out,
        "# matched with webhook.secrets[{}]",
        finding.secret_index
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::{Key, SignatureFormat, sign};

    fn headers_for(format: &SignatureFormat, secret: &str, body: &[u8]) -> Vec<(String, String)> {
        let key = Key::for_scheme(format.scheme, secret).expect("key");
        let mut headers = sign(format, &key, body, 1_700_000_000, None);
        headers.push(("content-type".into(), "application/json".into()));
        headers
    }

    #[test]
    fn finds_a_prefixed_base64_sha1_over_timestamp_and_body() {
        let format = SignatureFormat {
            scheme: Scheme::Hmac,
            header: "x-vendor-signature".into(),
            algorithm: Algorithm::Sha1,
            encoding: Encoding::Base64,
            prefix: "sha1=".into(),
            timestamp_header: "x-vendor-timestamp".into(),
        };
        let body = br#"{"type":"consentUpdate-v1"}"#;
        let headers = headers_for(&format, "s3cret", body);
        let secrets = vec![SecretString::from("other"), SecretString::from("s3cret")];
        let findings = diagnose(&headers, body, &secrets);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!(
            (
                f.header.as_str(),
                f.algorithm,
                f.encoding,
                f.prefix.as_str()
            ),
            (
                "x-vendor-signature",
                Algorithm::Sha1,
                Encoding::Base64,
                "sha1="
            )
        );
        assert_eq!(f.timestamp_header.as_deref(), Some("x-vendor-timestamp"));
        assert_eq!(f.secret_index, 1);
        assert!(config_snippet(f).contains("timestamp_header = \"x-vendor-timestamp\""));
    }

    #[test]
    fn a_wrong_secret_finds_nothing() {
        let body = b"{}";
        let headers = headers_for(&SignatureFormat::default(), "right", body);
        assert!(diagnose(&headers, body, &[SecretString::from("wrong")]).is_empty());
    }
}
