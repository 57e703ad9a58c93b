//! The accepted event envelope and its two event kinds. The delivered shape is not
//! published, so every assumption about it lives here: a new shape is one change.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::model::phone::{self, Region};
use crate::model::{Lead, MessageStatus};

pub const CONSENT_UPDATE: &str = "consentUpdate-v1";
pub const MESSAGE_STATUS: &str = "messageStatus-v1";

/// A parsed delivery.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Consent(ConsentEvent),
    MessageStatus(MessageStatusEvent),
    /// A person's reply posted to a `[[source]]` (Twilio), as the record it is: recorded
    /// as that source's records are.
    Heard(HeardEvent),
}

impl Event {
    pub fn occurred_at(&self) -> DateTime<Utc> {
        match self {
            Event::Consent(e) => e.occurred_at,
            Event::MessageStatus(e) => e.occurred_at,
            Event::Heard(e) => e.received_at,
        }
    }
}

/// A reply a source was posted.
#[derive(Debug, Clone, PartialEq)]
pub struct HeardEvent {
    /// The source's name.
    pub source: String,
    pub received_at: DateTime<Utc>,
    pub record: crate::systems::source::ReadRecord,
}

/// The event of a stored outbox row: the service's delivery, or a reply a source was
/// posted (its key says which: [`crate::systems::twilio::key`]).
pub fn parse_stored(
    dedup_key: &str,
    body: &[u8],
    received_at: DateTime<Utc>,
) -> Result<Event, ParseError> {
    match crate::systems::twilio::posted_to(dedup_key) {
        Some(source) => heard(source, body, received_at),
        None => parse(body, received_at),
    }
}

/// The reply in form `body` posted to `source` at `received_at`.
pub fn heard(source: &str, body: &[u8], received_at: DateTime<Utc>) -> Result<Event, ParseError> {
    let params = crate::signature::twilio::form_params(body);
    crate::systems::twilio::record(&params, received_at)
        .map(|record| {
            Event::Heard(HeardEvent {
                source: source.to_owned(),
                received_at,
                record,
            })
        })
        .map_err(ParseError::Form)
}

/// A consent change of one lead (and, with account sync, of its number).
#[derive(Debug, Clone, PartialEq)]
pub struct ConsentEvent {
    pub occurred_at: DateTime<Utc>,
    pub lead_id: Option<String>,
    pub organization_id: Option<String>,
    pub phone_number: Option<String>,
    pub opted_out: bool,
    pub tag_id: Option<String>,
    /// The whole Lead resource, when the payload carries one.
    pub lead: Option<Box<Lead>>,
}

/// A message status change.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageStatusEvent {
    pub occurred_at: DateTime<Utc>,
    pub message: MessageStatus,
    pub lead_id: Option<String>,
    pub organization_id: Option<String>,
}

/// Why a verified delivery cannot be applied; kept with the quarantined row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not a JSON object: {0}")]
    NotAnObject(&'static str),
    /// A key twice in one object: which value was meant cannot be told, and a consent
    /// change must not be guessed.
    #[error("ambiguous: duplicate key {0}")]
    DuplicateKey(String),
    #[error("`type`, `eventType` and `createdAt` must be strings: {0}")]
    BadEnvelope(String),
    #[error("no `type` or `eventType`")]
    NoType,
    #[error("unknown event type `{0}`")]
    UnknownType(String),
    #[error("`createdAt` is not an RFC 3339 time")]
    BadTime,
    #[error("no `data` object")]
    NoData,
    #[error("{kind}: {message}")]
    BadData { kind: &'static str, message: String },
    #[error("the stored body cannot be read back: {0}")]
    Stored(String),
    /// A reply posted to a source, verified, that cannot be read one way.
    #[error("form: {0}")]
    Form(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(rename = "type")]
    kind: Option<String>,
    event_type: Option<String>,
    created_at: Option<String>,
    data: Option<Value>,
}

/// Parses a delivery's body; `received_at` stands in for a missing event time.
pub fn parse(body: &[u8], received_at: DateTime<Utc>) -> Result<Event, ParseError> {
    event_of(json_without_duplicates(body)?, received_at)
}

/// What the ingest listener learns from a delivery's body in one pass: the event's own `id`
/// (what makes a redelivery a duplicate) and the event, or why it cannot be applied. The
/// event travels to the outbox writer with the bytes, so the body is parsed once.
#[derive(Debug)]
pub struct Received {
    /// The top-level `id`: a non-empty string, or a number as written.
    pub id: Option<String>,
    pub event: Result<Event, ParseError>,
}

/// The body is not JSON at all (refused with 400; anything else is kept and quarantined).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("body is not JSON")]
pub struct NotJson;

/// Reads a delivery as it arrives (see [`Received`]).
pub fn receive(body: &[u8], received_at: DateTime<Utc>) -> Result<Received, NotJson> {
    match json_without_duplicates(body) {
        Ok(value) => Ok(Received {
            id: value.get("id").and_then(id_text),
            event: event_of(value, received_at),
        }),
        // A key twice, or a number past a double's range, ended the parse: the id and
        // whether the body is JSON text at all come from a second, lenient pass.
        Err(unusable) => Ok(Received {
            id: lenient_id(body)?,
            event: Err(unusable),
        }),
    }
}

fn id_text(id: &Value) -> Option<String> {
    match id {
        Value::String(id) if !id.is_empty() => Some(id.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The top-level `id` of a body that is JSON text though not one value (a key repeated, a
/// number out of range; none when `id` itself is repeated), or [`NotJson`].
fn lenient_id(body: &[u8]) -> Result<Option<String>, NotJson> {
    #[derive(Deserialize)]
    struct Probe {
        id: Option<Value>,
    }
    match serde_json::from_slice::<Probe>(body) {
        Ok(Probe { id }) => Ok(id.as_ref().and_then(id_text)),
        Err(_) => serde_json::from_slice::<serde::de::IgnoredAny>(body)
            .map(|_| None)
            .map_err(|_| NotJson),
    }
}

fn event_of(value: Value, received_at: DateTime<Utc>) -> Result<Event, ParseError> {
    let envelope: Envelope = match &value {
        Value::Object(_) => {
            serde_json::from_value(value).map_err(|e| ParseError::BadEnvelope(e.to_string()))?
        }
        other => return Err(ParseError::NotAnObject(json_kind(other))),
    };
    let kind = envelope
        .kind
        .or(envelope.event_type)
        .ok_or(ParseError::NoType)?;
    let occurred_at = match envelope.created_at {
        Some(text) => DateTime::parse_from_rfc3339(&text)
            .map_err(|_| ParseError::BadTime)?
            .with_timezone(&Utc),
        None => received_at,
    };
    let data = match envelope.data {
        Some(Value::Object(map)) => map,
        _ => return Err(ParseError::NoData),
    };
    match kind.as_str() {
        CONSENT_UPDATE => consent(data, occurred_at).map(Event::Consent),
        MESSAGE_STATUS => message_status(data, occurred_at).map(Event::MessageStatus),
        _ => Err(ParseError::UnknownType(kind)),
    }
}

/// `body` as JSON, refused when it is not JSON (saying where and why) or when an object in
/// it has a key twice (serde_json would keep the last value silently). One pass builds the
/// value and checks the keys.
fn json_without_duplicates(body: &[u8]) -> Result<Value, ParseError> {
    let duplicate = std::cell::RefCell::new(None);
    let mut reader = serde_json::Deserializer::from_slice(body);
    let parsed = serde::de::DeserializeSeed::deserialize(Unique(&duplicate), &mut reader)
        .and_then(|value| reader.end().map(|()| value));
    if let Some(key) = duplicate.into_inner() {
        return Err(ParseError::DuplicateKey(key));
    }
    parsed.map_err(|e| ParseError::NotJson(e.to_string()))
}

/// What kind of JSON value stands where an object was expected.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Builds a JSON value, and records the first key found twice in one object (which ends
/// the parse).
struct Unique<'a>(&'a std::cell::RefCell<Option<String>>);

impl<'de> serde::de::DeserializeSeed<'de> for Unique<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Unique<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        // JSON text has no NaN or infinity: every double it gives is a number.
        Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Unique(self.0))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                *self.0.borrow_mut() = Some(key);
                return Err(serde::de::Error::custom("duplicate key"));
            }
            let value = map.next_value_seed(Unique(self.0))?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

fn bad(kind: &'static str, message: impl Into<String>) -> ParseError {
    ParseError::BadData {
        kind,
        message: message.into(),
    }
}

fn text(data: &Map<String, Value>, key: &str) -> Option<String> {
    data.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Fields every full Lead resource has, beyond those a consent subset needs.
const FULL_LEAD_FIELDS: &[&str] = &[
    "activeGroupIds",
    "inactiveGroupIds",
    "customFields",
    "tagIds",
];

fn consent(
    data: Map<String, Value>,
    occurred_at: DateTime<Utc>,
) -> Result<ConsentEvent, ParseError> {
    let opted_out = data
        .get("globalOptedOut")
        .and_then(Value::as_bool)
        .ok_or_else(|| bad(CONSENT_UPDATE, "`globalOptedOut` (boolean) is required"))?;
    let lead_id = text(&data, "id");
    let organization_id = text(&data, "organizationId");
    let phone_number = text(&data, "phoneNumber")
        .map(|raw| phone::normalize(&raw, Region::default()))
        .transpose()
        .map_err(|e| bad(CONSENT_UPDATE, format!("`phoneNumber`: {e}")))?
        .map(phone::E164::into_string);
    if lead_id.is_none() && (organization_id.is_none() || phone_number.is_none()) {
        return Err(bad(
            CONSENT_UPDATE,
            "needs `id` or both `organizationId` and `phoneNumber`",
        ));
    }
    let tag_id = text(&data, "tagId");
    let full = lead_id.is_some()
        && organization_id.is_some()
        && phone_number.is_some()
        && FULL_LEAD_FIELDS.iter().all(|k| data.contains_key(*k));
    let lead = if full {
        let mut lead = serde_json::from_value::<Lead>(Value::Object(data))
            .map_err(|e| bad(CONSENT_UPDATE, format!("lead resource: {e}")))?;
        // The mirror keeps the number as the ledger does.
        if let Some(phone) = &phone_number {
            lead.phone_number.clone_from(phone);
        }
        Some(Box::new(lead))
    } else {
        None
    };
    Ok(ConsentEvent {
        occurred_at,
        lead_id,
        organization_id,
        phone_number,
        opted_out,
        tag_id,
        lead,
    })
}

fn message_status(
    data: Map<String, Value>,
    occurred_at: DateTime<Utc>,
) -> Result<MessageStatusEvent, ParseError> {
    let lead_id = text(&data, "leadId");
    let organization_id = text(&data, "organizationId");
    let message: MessageStatus = serde_json::from_value(Value::Object(data))
        .map_err(|e| bad(MESSAGE_STATUS, e.to_string()))?;
    if message.id.is_empty() || message.status.is_empty() {
        return Err(bad(MESSAGE_STATUS, "`id` and `status` must not be empty"));
    }
    Ok(MessageStatusEvent {
        occurred_at,
        message,
        lead_id,
        organization_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-21T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn a_consent_subset_parses_with_the_event_time() {
        let body = br#"{"eventType":"consentUpdate-v1","createdAt":"2026-11-21T10:00:00Z",
            "data":{"organizationId":"o1","phoneNumber":"+15550001111","globalOptedOut":true,"tagId":"t1"}}"#;
        let Event::Consent(e) = parse(body, at()).unwrap() else {
            panic!()
        };
        assert!(e.opted_out && e.lead.is_none());
        assert_eq!(e.tag_id.as_deref(), Some("t1"));
        assert_eq!(e.occurred_at.to_rfc3339(), "2026-11-21T10:00:00+00:00");
    }

    #[test]
    fn a_full_lead_resource_is_kept_and_a_missing_time_is_the_receipt_time() {
        let body = br#"{"type":"consentUpdate-v1","data":{"id":"l1","type":"lead","organizationId":"o1",
            "phoneNumber":"+15550001111","activeGroupIds":["g1"],"inactiveGroupIds":[],"customFields":{"a":"b"},
            "tagIds":[],"globalOptedOut":false,"createdAt":"2026-01-01T00:00:00Z","firstName":"Ada"}}"#;
        let Event::Consent(e) = parse(body, at()).unwrap() else {
            panic!()
        };
        assert_eq!(e.lead.unwrap().first_name.as_deref(), Some("Ada"));
        assert_eq!(e.occurred_at, at());
    }

    #[test]
    fn the_number_is_normalized_and_an_impossible_one_is_refused_saying_what_is_wrong() {
        let event = |phone: &str| {
            let data = serde_json::json!({"id": "l1", "type": "lead", "organizationId": "o1",
                "phoneNumber": phone, "activeGroupIds": [], "inactiveGroupIds": [],
                "customFields": {}, "tagIds": [], "globalOptedOut": true});
            let body = serde_json::json!({"type": "consentUpdate-v1", "data": data});
            parse(body.to_string().as_bytes(), at())
        };
        let Event::Consent(e) = event("+1 (555) 010-0001").unwrap() else {
            panic!()
        };
        assert_eq!(e.phone_number.as_deref(), Some("+15550100001"));
        assert_eq!(e.lead.unwrap().phone_number, "+15550100001");
        let error = event("+1555\u{202E}0100001").unwrap_err().to_string();
        assert_eq!(
            error,
            "consentUpdate-v1: `phoneNumber`: invalid character U+202E at position 6: only ASCII digits, a leading +, spaces and ( ) - . / are taken"
        );
        let error = event(&"1".repeat(301)).unwrap_err().to_string();
        assert_eq!(
            error,
            "consentUpdate-v1: `phoneNumber`: not a possible number: too long (301 digits)"
        );
    }

    #[test]
    fn shapes_that_cannot_be_applied_say_why() {
        let cases: [(&[u8], &str); 5] = [
            (b"[1]", "not a JSON object"),
            (br#"{"data":{}}"#, "no `type`"),
            (
                br#"{"type":"leadCreated-v9","data":{}}"#,
                "unknown event type",
            ),
            (
                br#"{"type":"consentUpdate-v1","data":{"id":"l1"}}"#,
                "globalOptedOut",
            ),
            (
                br#"{"type":"messageStatus-v1","data":{"id":"m1"}}"#,
                "status",
            ),
        ];
        for (body, expected) in cases {
            let error = parse(body, at()).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }

    #[test]
    fn an_ambiguous_or_malformed_delivery_says_exactly_what_is_wrong() {
        let cases: [(&[u8], &str); 6] = [
            (
                br#"{"type":"consentUpdate-v1","data":{"id":"l1","globalOptedOut":true,"phoneNumber":"+15550000001","globalOptedOut":false}}"#,
                "ambiguous: duplicate key globalOptedOut",
            ),
            (
                br#"{"type":"consentUpdate-v1","type":"messageStatus-v1","data":{}}"#,
                "ambiguous: duplicate key type",
            ),
            (b"1e999", "not JSON: number out of range"),
            (b"{\"type\":", "not JSON: EOF while parsing"),
            (b"\"consentUpdate-v1\"", "not a JSON object: a string"),
            (br#"{"type":5,"data":{}}"#, "must be strings"),
        ];
        for (body, expected) in cases {
            let error = parse(body, at()).unwrap_err().to_string();
            assert!(error.contains(expected), "{error}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_parse_or_give_a_reason(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            if let Err(error) = parse(&body, at()) {
                proptest::prop_assert!(!error.to_string().is_empty());
            }
        }

        #[test]
        fn any_json_text_parses_or_gives_a_reason(body in r#"\{("[a-zA-Z]{0,8}":("[a-z+0-9]{0,6}"|true|false|[0-9e.-]{1,6}|\{\}|\[\]|null),?){0,6}\}"#) {
            if let Err(error) = parse(body.as_bytes(), at()) {
                proptest::prop_assert!(!error.to_string().is_empty());
            }
        }
    }
}
