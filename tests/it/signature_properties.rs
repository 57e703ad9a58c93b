//! Property tests of the signature headers, the outside input verified before anything else
//! of a delivery is read: whatever bytes arrive in them, verification ends in a verdict, a
//! refusal says which header is at fault without a secret or an expected value, and a
//! signature made for other bytes never verifies. (The other parsers of outside input have
//! theirs beside them: deliveries in `events`, `next` in the console's sign-in, configuration
//! files in `settings::load`.)

use http::{HeaderMap, HeaderName, HeaderValue};
use outreach_sync::settings::{Algorithm, Encoding, Scheme, WebhookSettings};
use outreach_sync::signature::{Key, SignatureFormat, Verifier, sign};
use proptest::prelude::*;
use secrecy::SecretString;

const SECRET: &str = "property-secret-SHOULD-NEVER-SHOW";
/// The Standard Webhooks form of a secret: `whsec_` and base64.
const SW_SECRET: &str = "whsec_cHJvcGVydHktc2VjcmV0LVNIT1VMRC1ORVZFUi1TSE9X";
const NOW: i64 = 1_790_000_000;

/// Every way `[webhook]` can carry a signature.
fn formats() -> Vec<WebhookSettings> {
    let hmac = |algorithm, encoding, prefix: &str, timestamp_header: &str| WebhookSettings {
        scheme: Scheme::Hmac,
        secrets: vec![SecretString::from(SECRET)],
        header: "X-Signature".into(),
        algorithm,
        encoding,
        prefix: prefix.into(),
        timestamp_header: timestamp_header.into(),
        ..WebhookSettings::default()
    };
    vec![
        hmac(Algorithm::Sha256, Encoding::Hex, "", ""),
        hmac(Algorithm::Sha1, Encoding::Base64, "sha1=", "X-Timestamp"),
        hmac(Algorithm::Sha512, Encoding::Hex, "v1=", "X-Timestamp"),
        WebhookSettings {
            scheme: Scheme::StandardWebhooks,
            secrets: vec![SecretString::from(SW_SECRET)],
            ..WebhookSettings::default()
        },
    ]
}

/// The headers a format reads.
fn read_headers(settings: &WebhookSettings) -> Vec<&'static str> {
    match settings.scheme {
        Scheme::Hmac if settings.timestamp_header.is_empty() => vec!["x-signature"],
        Scheme::Hmac => vec!["x-signature", "x-timestamp"],
        Scheme::StandardWebhooks => vec!["webhook-id", "webhook-timestamp", "webhook-signature"],
    }
}

fn secret_of(settings: &WebhookSettings) -> &'static str {
    match settings.scheme {
        Scheme::Hmac => SECRET,
        Scheme::StandardWebhooks => SW_SECRET,
    }
}

/// Arbitrary bytes that HTTP lets through in a header value (no CR, LF or NUL).
fn header_value() -> impl Strategy<Value = HeaderValue> {
    prop::collection::vec(any::<u8>(), 0..120).prop_filter_map("not a header value", |bytes| {
        HeaderValue::from_bytes(&bytes).ok()
    })
}

/// A refusal must say what is wrong and name nothing secret.
fn check_refusal(text: &str) -> Result<(), TestCaseError> {
    prop_assert!(!text.is_empty());
    prop_assert!(!text.contains("SHOULD-NEVER-SHOW"), "{text}");
    prop_assert!(!text.contains(SW_SECRET), "{text}");
    Ok(())
}

proptest! {
    /// Up to three values of each header the format reads, each any bytes.
    #[test]
    fn any_header_values_are_refused_with_a_reason_that_names_no_secret(
        format in 0usize..4,
        values in prop::collection::vec(prop::collection::vec(header_value(), 0..3), 3),
        body in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let settings = &formats()[format];
        let verifier = Verifier::new(settings);
        let mut headers = HeaderMap::new();
        for (name, values) in read_headers(settings).into_iter().zip(&values) {
            for value in values {
                headers.append(HeaderName::from_static(name), value.clone());
            }
        }
        match verifier.verify(&headers, &body, NOW) {
            Ok(verified) => prop_assert!(false, "random headers verified: {verified:?}"),
            Err(rejection) => check_refusal(&rejection.to_string())?,
        }
    }

    /// A signature made for the body verifies; for a body differing in one byte, or with one
    /// header value changed to other bytes, it does not.
    #[test]
    fn a_signature_verifies_its_own_bytes_only(
        format in 0usize..4,
        body in prop::collection::vec(any::<u8>(), 1..64),
        flip in any::<prop::sample::Index>(),
        replaced in any::<prop::sample::Index>(),
        replacement in header_value(),
    ) {
        let settings = &formats()[format];
        let verifier = Verifier::new(settings);
        let format_of = SignatureFormat::from(settings);
        let key = Key::for_scheme(settings.scheme, secret_of(settings)).expect("a key");
        let signed = sign(&format_of, &key, &body, NOW, Some("msg_property"));
        let headers_of = |pairs: &[(String, String)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.append(
                    HeaderName::from_bytes(name.as_bytes()).expect("a name"),
                    HeaderValue::from_str(value).expect("a value"),
                );
            }
            headers
        };
        prop_assert!(verifier.verify(&headers_of(&signed), &body, NOW).is_ok());

        let mut other = body.clone();
        let at = flip.index(other.len());
        other[at] ^= 0x01;
        match verifier.verify(&headers_of(&signed), &other, NOW) {
            Ok(_) => prop_assert!(false, "verified a body it was not made for"),
            Err(rejection) => check_refusal(&rejection.to_string())?,
        }

        let mut changed = headers_of(&signed);
        let names: Vec<HeaderName> = changed.keys().cloned().collect();
        let name = &names[replaced.index(names.len())];
        let original = changed.get(name).cloned();
        prop_assume!(original.as_ref() != Some(&replacement));
        changed.insert(name.clone(), replacement);
        if let Err(rejection) = verifier.verify(&changed, &body, NOW) {
            check_refusal(&rejection.to_string())?;
        } else {
            // Only a value that means the same can still verify: the same timestamp or
            // digest written with other white space.
            let same = |v: &HeaderValue| v.to_str().map(|t| t.trim().to_owned()).ok();
            prop_assert_eq!(same(&changed[name]), original.as_ref().and_then(same));
        }
    }
}
