//! The posted side of a system: [`Posted`], what a `[[source]]` a system posts to
//! (`POST /sources/{name}` on the ingest listener) verifies and reads a post through. The
//! listener (`crate::ingest::posted`) keeps the caps, the deadlines, the sample of refusals,
//! the outbox and the order (verified, durable, then answered) and knows no kind; a kind
//! knows its wire alone: what verifies a post, what its records are, what it is answered.

use chrono::{DateTime, Utc};
use http::HeaderMap;

use crate::model::read::ReadsPost;

/// A system that posts to the daemon (a person's reply to a campaign's number): it
/// verifies a post on its exact bytes and headers against the secrets in force, reads its
/// records ([`ReadsPost`]: the write path reads a stored post again through it), and says
/// what the system is answered.
pub trait Posted: ReadsPost {
    /// The largest post it takes (the listener's `max_body_bytes`, when smaller, wins):
    /// anything larger is refused before a byte of it is verified.
    fn max_body_bytes(&self) -> usize;

    /// The header a post's verification rests on (lowercase): the value the evidence
    /// shows as verified, among the headers kept with the post.
    fn signature_header(&self) -> &'static str;

    /// Which secret in force (its index among them) `body` with `headers` verifies under,
    /// received at `received_at`; `Err` is why it does not, for the sample of refusals
    /// (never a secret). In constant time, wherever a secret is compared.
    fn verify(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        received_at: DateTime<Utc>,
    ) -> Result<usize, String>;

    /// What makes the post one record there, when it can be told from the post (Twilio: its
    /// `MessageSid`): the post is kept under that record's `event_ref`, so the same post
    /// twice is one. `None`: kept under its bytes' SHA-256.
    fn key(&self, body: &[u8]) -> Option<String>;

    /// What the system is answered once the post is durable: its content type and body.
    fn answer(&self) -> (&'static str, &'static str);

    /// What `sources` and `sources check` say of it: what is verified, and with what.
    fn describe(&self) -> Vec<String>;
    /// The `WWW-Authenticate` challenge a refused post is answered 401 with, for a system
    /// that sends credentials (HTTP Basic); `None`: refused with 403, as a post whose
    /// signature does not verify. A system with a challenge is verified by its headers
    /// alone ([`Posted::verify`] given no body), before a byte of the body is read.
    fn challenge(&self) -> Option<&'static str> {
        None
    }
}

/// A post's body as JSON, every value as given; refused (with where and why) when it is not
/// JSON, or when an object in it has a key twice, at any depth: which value was meant
/// cannot be told, and what a record rests on is never guessed. Nesting is bounded by the
/// JSON reader (128 levels).
pub fn strict_json(body: &[u8]) -> Result<serde_json::Value, String> {
    use serde::de::DeserializeSeed as _;
    let mut reader = serde_json::Deserializer::from_slice(body);
    Strict
        .deserialize(&mut reader)
        .and_then(|value| reader.end().map(|()| value))
        .map_err(|e| format!("not JSON as posted: {e}"))
}

/// Reads a JSON value as [`strict_json`] takes it.
struct Strict;

impl<'de> serde::de::DeserializeSeed<'de> for Strict {
    type Value = serde_json::Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        serde_json::Number::from_f64(v)
            .map(serde_json::Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Strict)? {
            items.push(item);
        }
        Ok(serde_json::Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "{} given twice: which was meant cannot be told",
                    crate::model::text::quoted(&key)
                )));
            }
            let value = map.next_value_seed(Strict)?;
            object.insert(key, value);
        }
        Ok(serde_json::Value::Object(object))
    }
}

/// The string at `path` (keys, from the top) of `value`: `None` when a key on the way is
/// not there or the value is `null`; an error naming the path when it is there but not a
/// string.
pub fn text_at<'v>(value: &'v serde_json::Value, path: &[&str]) -> Result<Option<&'v str>, String> {
    let mut at = value;
    for key in path {
        match at.get(key) {
            Some(next) => at = next,
            None => return Ok(None),
        }
    }
    match at {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(text) => Ok(Some(text)),
        other => Err(format!(
            "{} is {}, not a string",
            path.join("."),
            kind_of(other)
        )),
    }
}

/// What kind of JSON value `value` is, as an error names it.
pub fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A record's key as a system gives it (a message's or an event's id, named `name`): not
/// empty, and no `:`, which separates an `event_ref`'s parts (a key with one could pass for
/// another, as `sha256:...` is the key of a post kept by its bytes), nor a control
/// character.
pub fn record_key(name: &str, id: Option<&str>) -> Result<String, String> {
    match id {
        None | Some("") => Err(format!(
            "no {name}: what makes the record one cannot be told"
        )),
        Some(id) if id.contains(':') || id.chars().any(crate::model::text::is_unsafe_char) => {
            Err(format!(
                "{name} {} holds `:` or a control character, which no id of the system's does",
                crate::model::text::quoted(id)
            ))
        }
        Some(id) => Ok(id.to_owned()),
    }
}

/// A record of a post that is no person's reply (the campaign's own texts and their fates,
/// `what` of type `given`): one that says nothing, counted as ignored, under its id when it
/// has one; `None` when it has none (nothing to count it once by).
pub fn not_a_reply(
    what: &str,
    given: Option<&str>,
    key: Result<String, String>,
    stands_on: serde_json::Value,
) -> Option<crate::model::read::ReadRecord> {
    let of_type = given.map_or_else(
        || format!("no type given ({what})"),
        |t| format!("a {} {what}", crate::model::text::quoted(t)),
    );
    Some(crate::model::read::ReadRecord {
        key: key.ok()?,
        said: crate::model::read::Said::Nothing(format!("{of_type}: not a person's reply")),
        stands_on,
    })
}

/// A reply's number as E.164: `number` (at `name` in the post), a national one read in
/// `region`; an error naming it when there is none or it is not a number there.
pub fn from_number(
    name: &str,
    number: Option<&str>,
    region: crate::model::phone::Region,
) -> Result<String, String> {
    let number = number.ok_or_else(|| format!("no {name}: whose reply it is cannot be told"))?;
    crate::model::phone::normalize(number, region)
        .map(crate::model::phone::E164::into_string)
        .map_err(|e| format!("{name} {}: {e}", crate::model::text::bounded(number, 40)))
}

/// What a reply says, as the ledger takes it: `text` read by the shared classifier
/// ([`crate::model::revocation::read`]) with the carrier's own word (Twilio's
/// `OptOutType`) and the source's `words`; its number asked of `number` only when it
/// counts (a reply that says nothing needs none). An opt-out or opt-in holds from
/// `occurred_at`; a reply put to review waits from `received_at`.
pub fn reply_said(
    (text, carrier, words): (&str, Option<&str>, &[String]),
    number: impl FnOnce() -> Result<String, String>,
    received_at: DateTime<Utc>,
    occurred_at: DateTime<Utc>,
) -> Result<crate::model::read::Said, String> {
    use crate::model::read::Said;
    use crate::model::revocation::{Reply, read};
    let reading = read(text, carrier, words);
    Ok(match reading.reply {
        Reply::Nothing => {
            Said::Nothing("a reply that neither revokes nor gives consent".to_owned())
        }
        // Not an opt-out by itself: it waits for a person's decision, not for a guess.
        Reply::Review => Said::Review {
            phone_number: number()?,
            text: text.to_owned(),
            matched: reading.matched,
            received_at,
        },
        reply => Said::Consent {
            phone_number: number()?,
            opted_out: reply == Reply::OptOut,
            occurred_at,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_given_twice_at_any_depth_is_refused_and_named() {
        let error =
            strict_json(br#"[{"message":{"from":"+14155550100","from":"+1"}}]"#).unwrap_err();
        assert!(error.contains("`from` given twice"), "{error}");
        let error = strict_json(br#"{"a":1} x"#).unwrap_err();
        assert!(error.starts_with("not JSON as posted"), "{error}");
        let value = strict_json(br#"{"a":[1,-2,2.5,null,true,"\u00e9"]}"#).expect("JSON");
        assert_eq!(
            value,
            serde_json::json!({"a": [1, -2, 2.5, null, true, "é"]})
        );
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(strict_json(deep.as_bytes()).is_err(), "nesting is bounded");
    }

    #[test]
    fn a_text_is_read_by_its_path_and_a_key_refuses_what_could_pass_for_another() {
        let value = serde_json::json!({"data": {"id": "e1", "n": 5, "z": null}});
        assert_eq!(text_at(&value, &["data", "id"]), Ok(Some("e1")));
        assert_eq!(text_at(&value, &["data", "x"]), Ok(None));
        assert_eq!(text_at(&value, &["data", "z"]), Ok(None));
        assert_eq!(
            text_at(&value, &["data", "n"]),
            Err("data.n is a number, not a string".to_owned())
        );
        assert_eq!(record_key("data.id", Some("e1")), Ok("e1".to_owned()));
        assert!(record_key("data.id", Some("sha256:x")).is_err());
        assert!(
            record_key("data.id", Some(""))
                .unwrap_err()
                .starts_with("no data.id")
        );
        assert!(record_key("data.id", Some("a\u{7}")).is_err());
    }
}
