//! The accepted event envelope and its two event kinds. The delivered shape is not
//! published, so every assumption about it lives here: a new shape is one change.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use outline::{Data, Node, Outline};

use crate::model::phone::{self, Region};
use crate::model::read::{ReadRecord, ReadsPost};
use crate::model::{Lead, MessageStatus};

mod outline;

pub const CONSENT_UPDATE: &str = "consentUpdate-v1";
pub const MESSAGE_STATUS: &str = "messageStatus-v1";

/// A parsed delivery.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Consent(ConsentEvent),
    MessageStatus(MessageStatusEvent),
    /// A post a `[[source]]` was given (a person's reply), as the records it is: recorded
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

/// A post a source was given: its records, as the system's kind read them.
#[derive(Debug, Clone, PartialEq)]
pub struct HeardEvent {
    /// The source's name.
    pub source: String,
    pub received_at: DateTime<Utc>,
    pub records: Vec<ReadRecord>,
}

/// The event of a stored outbox row: the service's delivery, or a post a source was given
/// (its key says which: [`crate::model::read::posted_to`]), read by what reads that
/// source's posts as configured now.
pub fn parse_stored(
    dedup_key: &str,
    body: &[u8],
    received_at: DateTime<Utc>,
    (region, reader_of): (Region, ReaderOf<'_>),
) -> Result<Event, ParseError> {
    match crate::model::read::posted_to(dedup_key) {
        Some((_, source)) => match reader_of(source) {
            Some(reader) => heard(source, reader.as_ref(), body, received_at, region),
            None => Err(ParseError::NotConfigured(source.to_owned())),
        },
        None => parse(body, received_at),
    }
}

/// What reads the posts of a source, by its name, as configured now.
pub type ReaderOf<'a> = &'a dyn Fn(&str) -> Option<std::sync::Arc<dyn ReadsPost>>;

/// The records of the post `body` given to `source` at `received_at`, read by `reader`, a
/// number without its country code read in `region`.
pub fn heard(
    source: &str,
    reader: &dyn ReadsPost,
    body: &[u8],
    received_at: DateTime<Utc>,
    region: Region,
) -> Result<Event, ParseError> {
    reader
        .records(body, received_at, region)
        .map(|records| {
            Event::Heard(HeardEvent {
                source: source.to_owned(),
                received_at,
                records,
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
    /// A post to a source, verified, that cannot be read one way.
    #[error("form: {0}")]
    Form(String),
    /// A post to a source no longer configured: what reads it is not there.
    #[error("source {0:?} is not configured (a reload removed it?): requeue the row once it is")]
    NotConfigured(String),
}

/// The envelope's fields as serde reads them from the whole value, which words a refusal
/// (see [`reread`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(rename = "type")]
    kind: Option<String>,
    event_type: Option<String>,
    created_at: Option<String>,
}

/// Parses a delivery's body; `received_at` stands in for a missing event time.
pub fn parse(body: &[u8], received_at: DateTime<Utc>) -> Result<Event, ParseError> {
    event_of(outline::read(body)?, body, received_at)
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
    match outline::read(body) {
        Ok(mut outline) => Ok(Received {
            id: outline.id.take().and_then(id_of),
            event: event_of(outline, body, received_at),
        }),
        // A key twice, or a number past a double's range, ended the parse: the id and
        // whether the body is JSON text at all come from a second, lenient pass.
        Err(unusable) => Ok(Received {
            id: lenient_id(body)?,
            event: Err(unusable),
        }),
    }
}

/// The text of a top-level `id`: a non-empty string, or a number as written.
fn id_of(id: Node<'_>) -> Option<String> {
    match id {
        Node::Str(id) if !id.is_empty() => Some(id.into_owned()),
        Node::Number(n) => Some(n.to_string()),
        _ => None,
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

/// The event of a body read by [`outline::read`] (`body` is its bytes, read again only for
/// a typed resource or to word a refusal).
fn event_of(
    outline: Outline<'_>,
    body: &[u8],
    received_at: DateTime<Utc>,
) -> Result<Event, ParseError> {
    if let Some(kind) = outline.not_an_object {
        return Err(ParseError::NotAnObject(kind));
    }
    let strings = (
        optional_string(outline.kind),
        optional_string(outline.event_type),
        optional_string(outline.created_at),
    );
    let (kind, event_type, created_at) = match strings {
        (Ok(kind), Ok(event_type), Ok(created_at)) => (kind, event_type, created_at),
        // One is neither a string nor null: refused as serde refuses the whole value.
        _ => {
            let envelope = reread::<Envelope>(body, |value| value)
                .map_err(|e| ParseError::BadEnvelope(e.to_string()))?;
            (
                envelope.kind.map(Cow::Owned),
                envelope.event_type.map(Cow::Owned),
                envelope.created_at.map(Cow::Owned),
            )
        }
    };
    let kind = kind.or(event_type).ok_or(ParseError::NoType)?;
    let occurred_at = match created_at {
        Some(text) => DateTime::parse_from_rfc3339(&text)
            .map_err(|_| ParseError::BadTime)?
            .with_timezone(&Utc),
        None => received_at,
    };
    let data = match outline.data {
        Some(Node::Object) => outline.data_fields,
        _ => return Err(ParseError::NoData),
    };
    match &*kind {
        CONSENT_UPDATE => consent(data, body, occurred_at).map(Event::Consent),
        MESSAGE_STATUS => message_status(data, body, occurred_at).map(Event::MessageStatus),
        _ => Err(ParseError::UnknownType(kind.into_owned())),
    }
}

/// An envelope field as an `Option<String>` takes it: absent or null is none, and anything
/// but a string is refused (`Err`).
fn optional_string(value: Option<Node<'_>>) -> Result<Option<Cow<'_, str>>, ()> {
    match value {
        None | Some(Node::Null) => Ok(None),
        Some(Node::Str(text)) => Ok(Some(text)),
        Some(_) => Err(()),
    }
}

/// `T` as [`serde_json::from_value`] reads it from what `pick` takes of `body`'s value. Only
/// a refused delivery costs this second reading, which builds the whole value: serde words
/// the refusal, and chooses among several problems (the first in key order), as it does on
/// a value.
fn reread<T: DeserializeOwned>(
    body: &[u8],
    pick: impl FnOnce(Value) -> Value,
) -> Result<T, serde_json::Error> {
    serde_json::from_slice(body)
        .map(pick)
        .and_then(serde_json::from_value)
}

/// The event's `data` as a `T`, read from the bytes again by its typed deserializer (which
/// passes over every other top-level key). A body [`outline::read`] took has no key twice
/// and nothing out of range, so this takes exactly what `from_value` takes, and makes the
/// same `T` of it; when it refuses, [`reread`] says why as `from_value` would.
fn data_as<T: DeserializeOwned>(body: &[u8]) -> Result<T, serde_json::Error> {
    #[derive(Deserialize)]
    struct Wrapped<T> {
        data: T,
    }
    serde_json::from_slice::<Wrapped<T>>(body)
        .map(|wrapped| wrapped.data)
        .or_else(|_| {
            reread(body, |mut value| {
                value.get_mut("data").map(Value::take).unwrap_or_default()
            })
        })
}

fn bad(kind: &'static str, message: impl Into<String>) -> ParseError {
    ParseError::BadData {
        kind,
        message: message.into(),
    }
}

/// A `data` key's value when it is a string.
fn text(value: Option<Node<'_>>) -> Option<String> {
    value.and_then(Node::into_str).map(Cow::into_owned)
}

/// Fields every full Lead resource has, beyond those a consent subset needs.
const FULL_LEAD_FIELDS: &[&str] = &[
    "activeGroupIds",
    "inactiveGroupIds",
    "customFields",
    "tagIds",
];

fn consent(
    data: Data<'_>,
    body: &[u8],
    occurred_at: DateTime<Utc>,
) -> Result<ConsentEvent, ParseError> {
    let opted_out = data
        .global_opted_out
        .as_ref()
        .and_then(Node::as_bool)
        .ok_or_else(|| bad(CONSENT_UPDATE, "`globalOptedOut` (boolean) is required"))?;
    let full_lead_fields = data.has_full_lead_fields();
    let lead_id = text(data.id);
    let organization_id = text(data.organization_id);
    let phone_number = data
        .phone_number
        .and_then(Node::into_str)
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
    let tag_id = text(data.tag_id);
    let full = lead_id.is_some()
        && organization_id.is_some()
        && phone_number.is_some()
        && full_lead_fields;
    let lead = if full {
        let mut lead = data_as::<Lead>(body)
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
    data: Data<'_>,
    body: &[u8],
    occurred_at: DateTime<Utc>,
) -> Result<MessageStatusEvent, ParseError> {
    let lead_id = text(data.lead_id);
    let organization_id = text(data.organization_id);
    let message: MessageStatus = data_as(body).map_err(|e| bad(MESSAGE_STATUS, e.to_string()))?;
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
mod tests;
