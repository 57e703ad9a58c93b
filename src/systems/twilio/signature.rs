//! Twilio's request signature, `X-Twilio-Signature`: base64 of the HMAC-SHA1, keyed with the
//! account's auth token, of the URL Twilio was given followed by each POST parameter's name
//! and value, parameters in order of name (Twilio's webhook security page). A name given twice
//! is signed once per distinct value, its values in order, as twilio-python's
//! `RequestValidator` computes it (`sorted(set(values))`); a signature over every value, the
//! same one repeated, is taken too. Values are signed decoded (`+14155550100`, not
//! `%2B14155550100`).
//!
//! The URL is the one configured at Twilio, exactly (`public_url`, query string and all):
//! what the daemon sees behind a proxy is not what Twilio signed. Tokens are taken as bytes
//! and never printed; a source with a second token (rotation) learns which one matched.

use crate::settings::{Algorithm, Encoding};
use crate::signature::{compute, decode, encode, verify_tag};

/// The header the signature comes in.
pub const HEADER: &str = "x-twilio-signature";

/// The parameters of an `application/x-www-form-urlencoded` body, decoded, in the order
/// given; a name given twice is kept twice. Bytes that are not UTF-8 read as U+FFFD.
pub fn form_params(body: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(body).into_owned().collect()
}

/// The signature Twilio sends with `params` posted to `url`, under `auth_token`.
pub fn expected(auth_token: &[u8], url: &str, params: &[(String, String)]) -> String {
    let tag = compute(Algorithm::Sha1, auth_token, &signed(url, params));
    encode(Encoding::Base64, &tag)
}

/// Which of `auth_tokens` (its index, the first that fits) `header` is the signature of
/// `params` posted to `url` under. `None` for none of them, and for a header that is not the
/// base64 of 20 bytes. Compared in constant time (`hmac`'s `verify_slice`, on `subtle`).
pub fn verify(
    auth_tokens: &[&[u8]],
    url: &str,
    params: &[(String, String)],
    header: &str,
) -> Option<usize> {
    let tag = decode(Encoding::Base64, header.trim())?;
    let content = signed(url, params);
    let found = auth_tokens
        .iter()
        .position(|token| verify_tag(Algorithm::Sha1, token, &content, &tag));
    if found.is_some() {
        return found;
    }
    // A value repeated under one name, signed each time it was given.
    let every = signed_every(url, params);
    if every.len() == content.len() {
        return None;
    }
    auth_tokens
        .iter()
        .position(|token| verify_tag(Algorithm::Sha1, token, &every, &tag))
}

/// What is signed, in parts: `url`, then each parameter's name and value, by name and then
/// by value (byte order, which is Unicode code point order, as Twilio's libraries sort), a
/// value given twice under one name once.
fn signed<'a>(url: &'a str, params: &'a [(String, String)]) -> Vec<&'a [u8]> {
    let mut parts = signed_every(url, params);
    // Each pair is two parts after the URL: equal pairs are adjacent once sorted.
    let mut kept: Vec<&[u8]> = Vec::with_capacity(parts.len());
    kept.extend(parts.drain(..1));
    for pair in parts.chunks(2) {
        if kept.len() < 3 || kept[kept.len() - 2..] != *pair {
            kept.extend_from_slice(pair);
        }
    }
    kept
}

/// [`signed`], every pair given signed however often it repeats.
fn signed_every<'a>(url: &'a str, params: &'a [(String, String)]) -> Vec<&'a [u8]> {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort_unstable();
    let pairs = sorted
        .into_iter()
        .flat_map(|(name, value)| [name.as_bytes(), value.as_bytes()]);
    std::iter::once(url.as_bytes()).chain(pairs).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    /// Twilio's published example and vectors computed apart from this code (how: in the file).
    const VECTORS: &str = include_str!("../../../tests/data/twilio-signature-vectors.json");

    const TOKEN: &[u8] = b"12345";
    const URL: &str = "https://mycompany.com/myapp.php?foo=1&bar=2";
    const SIGNATURE: &str = "GvWf1cFY/Q7PnoempGyD5oXAezc=";

    fn text<'a>(case: &'a Value, field: &str) -> &'a str {
        case[field].as_str().expect(field)
    }

    fn pairs(case: &Value) -> Vec<(String, String)> {
        let field = |p: &Value, i: usize| p[i].as_str().expect("a name and a value").to_owned();
        let pairs = case["params"].as_array().expect("params");
        pairs.iter().map(|p| (field(p, 0), field(p, 1))).collect()
    }

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// The example of Twilio's security page.
    fn example() -> Vec<(String, String)> {
        params(&[
            ("CallSid", "CA1234567890ABCDE"),
            ("Caller", "+14158675310"),
            ("Digits", "1234"),
            ("From", "+14158675310"),
            ("To", "+18005551212"),
        ])
    }

    #[test]
    fn the_vectors_read_sign_and_verify_as_computed_apart() {
        let vectors: Value = serde_json::from_str(VECTORS).expect("the vectors are JSON");
        let cases = vectors["cases"].as_array().expect("cases");
        assert_eq!(cases.len(), 6);
        for case in cases {
            let name = text(case, "name");
            let params = pairs(case);
            if let Some(form) = case["form"].as_str() {
                assert_eq!(form_params(form.as_bytes()), params, "{name}");
            }
            let (token, url) = (text(case, "auth_token").as_bytes(), text(case, "url"));
            let signature = text(case, "signature");
            assert_eq!(expected(token, url, &params), signature, "{name}");
            assert_eq!(verify(&[token], url, &params, signature), Some(0), "{name}");
            if let Some(every) = case["signature_every_value"].as_str() {
                assert_ne!(every, signature, "{name}");
                assert_eq!(verify(&[token], url, &params, every), Some(0), "{name}");
                let other = &params[..params.len() - 1];
                assert_eq!(verify(&[token], url, other, every), None, "{name}");
            }
        }
    }

    #[test]
    fn twilios_example_request_verifies_in_any_order_of_its_parameters() {
        let mut example = example();
        assert_eq!(expected(TOKEN, URL, &example), SIGNATURE);
        example.reverse();
        assert_eq!(verify(&[TOKEN], URL, &example, SIGNATURE), Some(0));
    }

    #[test]
    fn another_url_fails() {
        let example = example();
        for url in [
            "https://mycompany.com/myapp.php",
            "https://mycompany.com/myapp.php?bar=2&foo=1",
            "http://mycompany.com/myapp.php?foo=1&bar=2",
            "https://mycompany.com:443/myapp.php?foo=1&bar=2",
            "https://mycompany.com/myapp.php?foo=1&bar=2/",
            "https://MyCompany.com/myapp.php?foo=1&bar=2",
        ] {
            assert_eq!(verify(&[TOKEN], url, &example, SIGNATURE), None, "{url}");
        }
    }

    #[test]
    fn a_changed_added_dropped_or_moved_parameter_fails() {
        let changed_value = example()
            .into_iter()
            .map(|(n, v)| {
                if n == "Digits" {
                    (n, "1235".into())
                } else {
                    (n, v)
                }
            })
            .collect::<Vec<_>>();
        let mut added = example();
        added.push(("Body".into(), "STOP".into()));
        let mut dropped = example();
        dropped.pop();
        let mut empty_added = example();
        empty_added.push(("OptOutType".into(), String::new()));
        // The same bytes signed, but not the same parameters: "Digits" "1234" is "Digit" "s1234".
        let moved = example()
            .into_iter()
            .map(|(n, v)| {
                if n == "Digits" {
                    ("Digit".into(), format!("s{v}"))
                } else {
                    (n, v)
                }
            })
            .collect::<Vec<_>>();
        for (what, params) in [
            ("changed value", changed_value),
            ("added", added),
            ("dropped", dropped),
            ("empty added", empty_added),
        ] {
            assert_eq!(verify(&[TOKEN], URL, &params, SIGNATURE), None, "{what}");
        }
        // Twilio's scheme cannot tell these apart; what it signs is what is checked.
        assert_eq!(verify(&[TOKEN], URL, &moved, SIGNATURE), Some(0));
    }

    #[test]
    fn a_name_given_twice_is_signed_twice_by_value() {
        let both = params(&[("MediaUrl", "b"), ("Body", "hi"), ("MediaUrl", "a")]);
        let signature = expected(TOKEN, URL, &both);
        let sorted = params(&[("Body", "hi"), ("MediaUrl", "a"), ("MediaUrl", "b")]);
        assert_eq!(verify(&[TOKEN], URL, &sorted, &signature), Some(0));
        let once = params(&[("Body", "hi"), ("MediaUrl", "a")]);
        assert_eq!(verify(&[TOKEN], URL, &once, &signature), None);
        let form = form_params(b"MediaUrl=b&Body=hi&MediaUrl=a");
        assert_eq!(form, both);
    }

    #[test]
    fn a_second_token_is_accepted_and_named() {
        let example = example();
        let tokens: [&[u8]; 2] = [b"old token", TOKEN];
        assert_eq!(verify(&tokens, URL, &example, SIGNATURE), Some(1));
        let reversed: [&[u8]; 2] = [TOKEN, b"old token"];
        assert_eq!(verify(&reversed, URL, &example, SIGNATURE), Some(0));
        let neither: [&[u8]; 2] = [b"old token", b"54321"];
        assert_eq!(verify(&neither, URL, &example, SIGNATURE), None);
        assert_eq!(verify(&[], URL, &example, SIGNATURE), None);
    }

    #[test]
    fn a_header_of_the_wrong_length_or_not_base64_fails_without_panic() {
        let example = example();
        let short = encode(Encoding::Base64, &[0; 19]);
        let long = encode(Encoding::Base64, &[0; 21]);
        let sha256 = encode(Encoding::Base64, &[0; 32]);
        let zeros = encode(Encoding::Base64, &[0; 20]);
        let doubled = format!("{SIGNATURE}{SIGNATURE}");
        let cut = &SIGNATURE[..SIGNATURE.len() - 2];
        for header in [
            "",
            " ",
            "=",
            "not base64!",
            "HvWf1cFY/Q7PnoempGyD5oXAezc=",
            "GvWf1cFY/Q7PnoempGyD5oXAezd=",
            "sha1=GvWf1cFY/Q7PnoempGyD5oXAezc=",
            "\u{0}\u{ffff}",
            cut,
            &short,
            &long,
            &sha256,
            &zeros,
            &doubled,
        ] {
            assert_eq!(verify(&[TOKEN], URL, &example, header), None, "{header:?}");
        }
        // The same 20 bytes: around white space, without the padding.
        let spaced = format!(" {SIGNATURE}\t");
        assert_eq!(verify(&[TOKEN], URL, &example, &spaced), Some(0));
        let unpadded = SIGNATURE.trim_end_matches('=');
        assert_eq!(verify(&[TOKEN], URL, &example, unpadded), Some(0));
    }

    #[test]
    fn a_body_that_is_not_utf8_reads_without_panic() {
        let params = form_params(b"Body=%FF%FE&From=\xff+1&=&&novalue");
        assert_eq!(
            params,
            [
                ("Body", "\u{fffd}\u{fffd}"),
                ("From", "\u{fffd} 1"),
                ("", ""),
                ("novalue", "")
            ]
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
        );
        assert_eq!(verify(&[TOKEN], URL, &params, SIGNATURE), None);
    }
}
