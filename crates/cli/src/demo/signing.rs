//! The daemon's `[webhook]` settings as the sandbox's signing scheme, so the demo's sandbox
//! signs what the daemon verifies.

use outreach_sync_sandbox as sandbox;

use outreach_sync::settings::{Algorithm, Encoding, Scheme, WebhookSettings};

/// How a sandbox must sign for a daemon verifying with `webhook` (its secrets aside).
pub(super) fn sandbox_signing(webhook: &WebhookSettings) -> sandbox::Signing {
    match webhook.scheme {
        Scheme::StandardWebhooks => sandbox::Signing::StandardWebhooks,
        Scheme::Hmac => sandbox::Signing::Hmac(sandbox::HmacSigning {
            header: webhook.header.clone(),
            algorithm: match webhook.algorithm {
                Algorithm::Sha1 => sandbox::Algorithm::Sha1,
                Algorithm::Sha256 => sandbox::Algorithm::Sha256,
                Algorithm::Sha512 => sandbox::Algorithm::Sha512,
            },
            encoding: match webhook.encoding {
                Encoding::Hex => sandbox::Encoding::Hex,
                Encoding::Base64 => sandbox::Encoding::Base64,
            },
            prefix: webhook.prefix.clone(),
            timestamp_header: Some(webhook.timestamp_header.clone()).filter(|h| !h.is_empty()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderName, HeaderValue};
    use secrecy::SecretString;

    use super::*;
    use outreach_sync::signature::Verifier;

    const NOW: i64 = 1_790_000_000;

    fn verifies(webhook: WebhookSettings, secret: &str) -> bool {
        let body = br#"{"type":"consentUpdate-v1","id":"evt_1","data":{}}"#;
        let signed = sandbox_signing(&webhook)
            .headers(secret, "evt_1", NOW, body)
            .expect("the secret is a key");
        let mut headers = HeaderMap::new();
        for (name, value) in signed {
            let name = HeaderName::try_from(name).expect("a header name");
            headers.insert(name, HeaderValue::try_from(value).expect("a header value"));
        }
        let verifier = Verifier::new(&WebhookSettings {
            secrets: vec![SecretString::from(secret.to_owned())],
            ..webhook
        });
        verifier.verify(&headers, body, NOW).is_ok()
    }

    #[test]
    fn what_the_sandbox_signs_the_daemon_verifies_under_every_scheme() {
        let hmac = WebhookSettings::default();
        assert!(verifies(hmac.clone(), "s3cret"));
        for algorithm in [Algorithm::Sha1, Algorithm::Sha256, Algorithm::Sha512] {
            for encoding in [Encoding::Hex, Encoding::Base64] {
                let webhook = WebhookSettings {
                    header: "X-Vendor-Signature".into(),
                    algorithm,
                    encoding,
                    prefix: "v=".into(),
                    timestamp_header: "X-Vendor-Timestamp".into(),
                    ..hmac.clone()
                };
                assert!(verifies(webhook, "s3cret"), "{algorithm:?} {encoding:?}");
            }
        }
        let standard = WebhookSettings {
            scheme: Scheme::StandardWebhooks,
            ..hmac
        };
        assert!(verifies(standard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"));
    }
}
