//! The headers kept with a delivery, as the evidence shows them: every value as received,
//! in order, but the credentials ([`NOT_KEPT`]), encoded once into the text kept.

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::signature::SignatureHeader;

/// Headers never kept with a delivery.
const NOT_KEPT: &[&str] = &["authorization", "cookie", "proxy-authorization"];

/// The headers kept with a delivery: all but [`NOT_KEPT`], in the header map's order.
fn kept_headers(headers: &HeaderMap) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
    headers
        .iter()
        .filter(|(name, _)| !NOT_KEPT.contains(&name.as_str()))
}

/// As `[[name, value], ...]`, every value of a repeated name in order.
pub(super) fn headers_as_pairs(headers: &HeaderMap) -> String {
    kept_as_json(headers, None).0
}

/// As [`headers_as_pairs`] (the header map's order: names by first appearance, the values
/// of a name in the order received), and the place among those pairs of the value that
/// verified; `None` when that header is not kept. One encoding, into one buffer, on every
/// delivery's path.
pub(super) fn headers_as_received(
    headers: &HeaderMap,
    verified: &SignatureHeader,
) -> (String, Option<usize>) {
    kept_as_json(headers, Some(verified))
}

/// The kept headers as JSON text, `[[name, value], ...]`, written into one buffer sized for
/// them: the text `serde_json::to_string` makes of the pairs, a value that is not UTF-8
/// read as `String::from_utf8_lossy` reads it. And the place among the pairs of the value
/// `verified` names, when given and kept.
fn kept_as_json(
    headers: &HeaderMap,
    verified: Option<&SignatureHeader>,
) -> (String, Option<usize>) {
    // `["name","value"],` for each pair, and the brackets: enough unless a value needs escapes.
    let size = kept_headers(headers)
        .map(|(name, value)| name.as_str().len() + value.len() + 8)
        .sum::<usize>()
        + 2;
    let mut text = Vec::with_capacity(size);
    let mut at = None;
    let mut named = 0;
    text.push(b'[');
    for (place, (name, value)) in kept_headers(headers).enumerate() {
        if place > 0 {
            text.push(b',');
        }
        // A header name is lowercase ASCII letters, digits and token punctuation, none of
        // which JSON escapes.
        text.extend_from_slice(b"[\"");
        text.extend_from_slice(name.as_str().as_bytes());
        text.extend_from_slice(b"\",");
        push_json_string(&mut text, value.as_bytes());
        text.push(b']');
        if let Some(verified) = verified.filter(|v| v.name == name.as_str()) {
            if named == verified.position {
                at = Some(place);
            }
            named += 1;
        }
    }
    text.push(b']');
    // ASCII, and serde_json's text of strings: UTF-8, checked once.
    let text = String::from_utf8(text).expect("JSON text is UTF-8");
    (text, at)
}

/// Appends the JSON string serde_json writes of `String::from_utf8_lossy(bytes)`. serde_json
/// escapes a quote, a backslash and the control characters, and nothing else: ASCII without
/// them is written as it is, anything else by serde_json.
fn push_json_string(text: &mut Vec<u8>, bytes: &[u8]) {
    // A fold, not `any`: with no early exit, the bytes are checked many at once.
    let special = bytes.iter().fold(false, |seen, &byte| {
        seen | (byte < 0x20) | (byte == b'"') | (byte == b'\\') | (byte >= 0x80)
    });
    if special {
        let lossy = String::from_utf8_lossy(bytes);
        serde_json::to_writer(&mut *text, &lossy).expect("a string always encodes");
    } else {
        text.push(b'"');
        text.extend_from_slice(bytes);
        text.push(b'"');
    }
}
