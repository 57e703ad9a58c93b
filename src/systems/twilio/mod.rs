//! Twilio: a person's reply to a campaign's Twilio number, as Twilio's messaging webhook
//! posts it to a `[[source]]` of kind `twilio` (`POST /sources/{name}` on the ingest
//! listener, form-encoded, signed with `X-Twilio-Signature`: [`signature`]). Nothing is read
//! from Twilio and nothing is sent to it: the daemon never texts the person (the one
//! confirmation the FCC allows is the texting tool's to send). Its settings are
//! `settings.rs` here, compiled into the settings layer (`crate::settings::kinds::twilio`).
//!
//! What a reply is: one record, its `MessageSid` (Twilio posts a reply again when its
//! answer does not come: the same sid twice is one record), its number `From`, what it says
//! read by [`crate::model::revocation::read`] from `Body` and `OptOutType`, at the time
//! the daemon received it. A parameter the record rests on given twice is a form that cannot
//! be read one way: it is kept and quarantined, never guessed.

use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret as _, SecretString};

use super::posted::Posted;
use crate::model::read::{ReadRecord, ReadsPost};
use crate::settings::kinds::twilio::TwilioSettings;

pub mod signature;

/// The largest form a Twilio source takes. Twilio's messaging webhook posts a few dozen
/// parameters: a text of 1,600 characters and ten media URLs come to well under 16 KiB.
pub const MAX_FORM_BYTES: usize = 64 * 1024;

/// The answer to a post taken: TwiML that asks Twilio to send nothing.
pub const EMPTY_TWIML: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response/>";

/// A Twilio source as configured now: the tokens its posts are signed with, the URL set at
/// Twilio, and its own revocation words.
#[derive(Debug, Clone)]
pub struct Twilio {
    tokens: Vec<SecretString>,
    public_url: String,
    words: Vec<String>,
}

impl Twilio {
    pub fn new(settings: &TwilioSettings, words: &[String]) -> Self {
        Self {
            tokens: settings.accepted(),
            public_url: settings.public_url.clone(),
            words: words.to_vec(),
        }
    }
}

impl ReadsPost for Twilio {
    fn records(
        &self,
        body: &[u8],
        received_at: DateTime<Utc>,
        region: crate::model::phone::Region,
    ) -> Result<Vec<ReadRecord>, String> {
        let params = signature::form_params(body);
        record(&params, received_at, (region, &self.words)).map(|record| vec![record])
    }
}

impl Posted for Twilio {
    fn max_body_bytes(&self) -> usize {
        MAX_FORM_BYTES
    }

    fn signature_header(&self) -> &'static str {
        signature::HEADER
    }

    fn verify(
        &self,
        headers: &http::HeaderMap,
        body: &[u8],
        _received_at: DateTime<Utc>,
    ) -> Result<usize, String> {
        let mut signatures = headers.get_all(signature::HEADER).iter();
        let value = match (signatures.next(), signatures.next()) {
            (Some(value), None) => value.to_str().ok(),
            _ => None,
        };
        let tokens: Vec<&[u8]> = self
            .tokens
            .iter()
            .map(|t| t.expose_secret().as_bytes())
            .collect();
        value
            .and_then(|value| {
                signature::verify(
                    &tokens,
                    &self.public_url,
                    &signature::form_params(body),
                    value,
                )
            })
            .ok_or_else(|| {
                "X-Twilio-Signature is missing, given twice, or not the signature of this form \
                 for its public_url under any of its tokens"
                    .to_owned()
            })
    }

    fn key(&self, body: &[u8]) -> Option<String> {
        let params = signature::form_params(body);
        match one(&params, "MessageSid") {
            Ok(Some(sid)) if !sid.is_empty() && !sid.contains(':') => Some(sid.to_owned()),
            _ => None,
        }
    }

    fn answer(&self) -> (&'static str, &'static str) {
        ("text/xml", EMPTY_TWIML)
    }

    fn describe(&self) -> Vec<String> {
        vec![
            format!("signed for {}", self.public_url),
            format!("{} token(s) accepted", self.tokens.len()),
        ]
    }
}

/// The parameters a record rests on: each may be given once at most.
const ONCE: [&str; 4] = ["MessageSid", "From", "Body", "OptOutType"];

/// The reply in `params`, received at `received_at`, as the record it is; why it cannot be
/// read one way, when it cannot.
pub fn record(
    params: &[(String, String)],
    received_at: DateTime<Utc>,
    (region, words): (crate::model::phone::Region, &[String]),
) -> Result<ReadRecord, String> {
    for name in ONCE {
        one(params, name)?;
    }
    let sid = match one(params, "MessageSid")? {
        None | Some("") => return Err("no MessageSid: Twilio sends one with every message".into()),
        // The key of a reply is `twilio:NAME:SID`; a sid with `:` could pass for another
        // key (`sha256:...`), and Twilio's sids are letters and digits.
        Some(sid) if sid.contains(':') => {
            return Err(format!(
                "MessageSid {} holds `:`, which no sid of Twilio's does (letters and digits)",
                crate::model::text::quoted(sid)
            ));
        }
        Some(sid) => sid,
    };
    let body = one(params, "Body")?.unwrap_or_default();
    let carrier = one(params, "OptOutType")?;
    let number = || super::posted::from_number("From", one(params, "From")?, region);
    let said = super::posted::reply_said((body, carrier, words), number, received_at, received_at)?;
    Ok(ReadRecord {
        key: sid.to_owned(),
        said,
        stands_on: stands_on(params),
    })
}

/// What the record stands on: the form as received, every parameter in order, and the
/// signature beside the delivery it came in (the evidence shows both).
fn stands_on(params: &[(String, String)]) -> serde_json::Value {
    serde_json::json!({ "form": params })
}

/// The value of parameter `name`: `None` when it is not given; an error when it is given
/// twice (which value was meant cannot be told).
fn one<'p>(params: &'p [(String, String)], name: &str) -> Result<Option<&'p str>, String> {
    let mut values = params
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str());
    let first = values.next();
    if values.next().is_some() {
        return Err(format!(
            "{name} given twice: which was meant cannot be told"
        ));
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::read::Said;

    const US: crate::model::phone::Region = crate::model::phone::Region::US;

    fn twilio() -> Twilio {
        Twilio::new(&TwilioSettings::default(), &[])
    }

    fn form(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn an_opt_out_reply_is_its_senders_opt_out_at_receipt() {
        let at = Utc::now();
        let params = form(&[
            ("MessageSid", "SM1"),
            ("From", "+14155550100"),
            ("Body", " Opt out! "),
        ]);
        let record = record(&params, at, (US, &[])).expect("a record");
        assert_eq!(record.key, "SM1");
        assert_eq!(
            record.said,
            Said::Consent {
                phone_number: "+14155550100".to_owned(),
                opted_out: true,
                occurred_at: at
            }
        );
        assert_eq!(record.stands_on["form"][2][1], " Opt out! ");
        assert_eq!(
            twilio().key(b"MessageSid=SM1&Body=STOP").as_deref(),
            Some("SM1")
        );
    }

    #[test]
    fn a_sentence_says_nothing_and_needs_no_number() {
        let params = form(&[("MessageSid", "SM2"), ("Body", "hello there")]);
        let nothing = record(&params, Utc::now(), (US, &[])).expect("a record");
        assert!(matches!(nothing.said, Said::Nothing(_)), "{nothing:?}");
        let params = form(&[
            ("MessageSid", "SM3"),
            ("From", "+14155550100"),
            ("Body", "stop by at 5?"),
        ]);
        let review = record(&params, Utc::now(), (US, &[])).expect("a record");
        let Said::Review { matched, text, .. } = review.said else {
            panic!("put to a person: {review:?}");
        };
        assert_eq!(
            (matched, text.as_str()),
            (vec!["stop".to_owned()], "stop by at 5?")
        );
        let params = form(&[("MessageSid", "SM7"), ("Body", "Stop texting me 🛑")]);
        let read = super::record(&params, Utc::now(), (US, &[]));
        assert!(read.is_err(), "an opt-out needs its From: {read:?}");
    }

    #[test]
    fn a_parameter_given_twice_or_a_missing_sid_is_not_read() {
        let twice = form(&[
            ("MessageSid", "SM3"),
            ("From", "+14155550100"),
            ("From", "+14155550101"),
            ("Body", "STOP"),
        ]);
        assert!(
            record(&twice, Utc::now(), (US, &[]))
                .unwrap_err()
                .contains("From given twice")
        );
        let no_sid = form(&[("From", "+14155550100"), ("Body", "STOP")]);
        assert!(
            record(&no_sid, Utc::now(), (US, &[]))
                .unwrap_err()
                .contains("MessageSid")
        );
        assert_eq!(twilio().key(b"From=%2B14155550100&Body=STOP"), None);
        let bad_from = form(&[
            ("MessageSid", "SM4"),
            ("From", "whatsapp:nobody"),
            ("Body", "STOP"),
        ]);
        assert!(
            record(&bad_from, Utc::now(), (US, &[]))
                .unwrap_err()
                .starts_with("From")
        );
    }

    #[test]
    fn a_sid_with_a_colon_is_named_as_such_not_as_missing() {
        let colon = form(&[
            ("MessageSid", "sha256:SM5"),
            ("From", "+14155550100"),
            ("Body", "STOP"),
        ]);
        let error = record(&colon, Utc::now(), (US, &[])).unwrap_err();
        assert!(
            error.starts_with("MessageSid `sha256:SM5` holds `:`"),
            "{error}"
        );
        assert_eq!(twilio().key(b"MessageSid=sha256%3ASM5&Body=STOP"), None);
        let empty = form(&[("MessageSid", ""), ("From", "+14155550100")]);
        assert!(
            record(&empty, Utc::now(), (US, &[]))
                .unwrap_err()
                .starts_with("no MessageSid")
        );
    }

    #[test]
    fn a_from_without_its_country_code_is_read_in_the_configured_region() {
        let national = form(&[
            ("MessageSid", "SM6"),
            ("From", "020 7946 0958"),
            ("Body", "STOP"),
        ]);
        let gb = "GB".parse().unwrap();
        let record = record(&national, Utc::now(), (gb, &[])).expect("a record");
        let Said::Consent { phone_number, .. } = record.said else {
            panic!("an opt-out");
        };
        assert_eq!(phone_number, "+442079460958");
        let error = super::record(&national, Utc::now(), (US, &[])).unwrap_err();
        assert!(
            error.starts_with("From `020 7946 0958`") || error.starts_with("From "),
            "{error}"
        );
    }
}
