//! Twilio's messaging webhook, as a Twilio number sends it to a campaign's tool: an inbound
//! text's parameters, form-encoded, signed in `X-Twilio-Signature` (base64 HMAC-SHA1, keyed
//! by the account's auth token, of the URL followed by each parameter's name and value,
//! sorted by name). Written here with the `hmac` and `sha1` crates, apart from the
//! daemon's verifier, so that each checks the other.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};

/// The header Twilio signs its requests in.
pub const SIGNATURE_HEADER: &str = "X-Twilio-Signature";

/// The signature of a request to `url` with the form parameters `params`, as Twilio makes
/// it with `auth_token`.
pub fn signature(auth_token: &str, url: &str, params: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    // A name given twice with the same value is signed once, as twilio-python's
    // `RequestValidator` signs it (`sorted(set(values))`).
    sorted.dedup();
    let mut mac = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(auth_token.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(url.as_bytes());
    for (name, value) in sorted {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    STANDARD.encode(mac.finalize().into_bytes())
}

/// The parameters of an inbound text from `from` to the campaign's number `to`, as Twilio
/// posts them (the ones a messaging webhook always has).
pub fn inbound(message_sid: &str, from: &str, to: &str, body: &str) -> Vec<(String, String)> {
    [
        ("ToCountry", "US"),
        ("SmsMessageSid", message_sid),
        ("NumMedia", "0"),
        ("SmsSid", message_sid),
        ("SmsStatus", "received"),
        ("Body", body),
        ("To", to),
        ("NumSegments", "1"),
        ("MessageSid", message_sid),
        ("AccountSid", "ACsandbox0000000000000000000000000"),
        ("From", from),
        ("ApiVersion", "2010-04-01"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Where a message is posted and the URL it is signed for: the one given at Twilio, which a
/// proxy in front of the daemon may map to another (the same, without a proxy).
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub post_to: &'a str,
    pub signed_for: &'a str,
}

impl<'a> Target<'a> {
    /// Posted to the URL given at Twilio itself.
    pub fn direct(url: &'a str) -> Self {
        Self {
            post_to: url,
            signed_for: url,
        }
    }
}

/// Posts `params` as Twilio does, signed with `auth_token` for `target.signed_for`; the
/// answer's status and body.
pub async fn send(
    http: &reqwest::Client,
    target: Target<'_>,
    auth_token: &str,
    params: &[(String, String)],
) -> Result<(u16, String), reqwest::Error> {
    let answer = http
        .post(target.post_to)
        .header(
            SIGNATURE_HEADER,
            signature(auth_token, target.signed_for, params),
        )
        .form(params)
        .send()
        .await?;
    let status = answer.status().as_u16();
    Ok((status, answer.text().await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn twilios_example_request_has_its_published_signature() {
        let params = pairs(&[
            ("CallSid", "CA1234567890ABCDE"),
            ("Caller", "+14158675310"),
            ("Digits", "1234"),
            ("From", "+14158675310"),
            ("To", "+18005551212"),
        ]);
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        assert_eq!(
            signature("12345", url, &params),
            "GvWf1cFY/Q7PnoempGyD5oXAezc="
        );
        let mut reordered = params.clone();
        reordered.reverse();
        assert_eq!(
            signature("12345", url, &reordered),
            "GvWf1cFY/Q7PnoempGyD5oXAezc="
        );
        assert_ne!(
            signature("12345", "https://mycompany.com/myapp.php", &params),
            "GvWf1cFY/Q7PnoempGyD5oXAezc="
        );
    }
}
