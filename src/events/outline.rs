//! One pass over a delivery's bytes: every value is checked as JSON (a number past a
//! double's range refused, nesting bounded) and every object for a key given twice, at any
//! depth, while only what the event needs is kept, borrowed from the bytes where it can be.
//! Nothing else is built: the values of other keys are read and passed over.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

use super::{FULL_LEAD_FIELDS, ParseError};

/// Where the pass leaves the first key found twice in one object (which ends it).
type Repeated = Cell<Option<String>>;

/// `body` as JSON text, as far as the event needs it: refused when it is not JSON (saying
/// where and why) or when an object in it has a key twice, the first such key found.
pub(super) fn read(body: &[u8]) -> Result<Outline<'_>, ParseError> {
    let repeated = Repeated::default();
    let mut outline = Outline::default();
    let mut reader = serde_json::Deserializer::from_slice(body);
    let parsed = NodeSeed::new(&repeated, &mut outline)
        .deserialize(&mut reader)
        .and_then(|node| reader.end().map(|()| node));
    if let Some(key) = repeated.take() {
        return Err(ParseError::DuplicateKey(key));
    }
    match parsed.map_err(|e| ParseError::NotJson(e.to_string()))? {
        Node::Object => {}
        other => outline.not_an_object = Some(other.kind()),
    }
    Ok(outline)
}

/// A JSON value as far as it is kept: a string, a boolean or a number, or only what kind
/// of value it is (an object's keys, when kept, are kept beside it).
#[derive(Debug)]
pub(super) enum Node<'de> {
    Null,
    Bool(bool),
    Number(Number),
    Str(Cow<'de, str>),
    Array,
    Object,
}

impl<'de> Node<'de> {
    /// What kind of JSON value it is, as a refusal names it.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Number(_) => "a number",
            Node::Str(_) => "a string",
            Node::Array => "an array",
            Node::Object => "an object",
        }
    }

    /// The text of a string.
    pub(super) fn into_str(self) -> Option<Cow<'de, str>> {
        match self {
            Node::Str(text) => Some(text),
            _ => None,
        }
    }

    /// The value of a boolean.
    pub(super) fn as_bool(&self) -> Option<bool> {
        match self {
            Node::Bool(value) => Some(*value),
            _ => None,
        }
    }
}

/// The top-level object's keys the event is read from; other keys are passed over.
#[derive(Debug, Default)]
pub(super) struct Outline<'de> {
    /// What kind of value the body is, when it is not an object (and nothing is kept).
    pub not_an_object: Option<&'static str>,
    pub id: Option<Node<'de>>,
    /// `type`.
    pub kind: Option<Node<'de>>,
    pub event_type: Option<Node<'de>>,
    pub created_at: Option<Node<'de>>,
    pub data: Option<Node<'de>>,
    /// The keys kept of `data`, when it is an object.
    pub data_fields: Data<'de>,
}

/// The keys of `data` either event kind reads as they are (a string, a boolean), and
/// whether it has every key of a full Lead resource ([`FULL_LEAD_FIELDS`]). The typed
/// resource itself, when wanted, is read from the bytes again.
#[derive(Debug, Default)]
pub(super) struct Data<'de> {
    pub id: Option<Node<'de>>,
    pub organization_id: Option<Node<'de>>,
    pub phone_number: Option<Node<'de>>,
    pub global_opted_out: Option<Node<'de>>,
    pub tag_id: Option<Node<'de>>,
    pub lead_id: Option<Node<'de>>,
    /// How many of [`FULL_LEAD_FIELDS`] it has.
    lead_fields: usize,
}

impl Data<'_> {
    pub(super) fn has_full_lead_fields(&self) -> bool {
        self.lead_fields == FULL_LEAD_FIELDS.len()
    }
}

/// Where an object's keys are kept as it is read: nowhere (`()`), or the outline's fields.
trait Object<'de> {
    fn read<A: MapAccess<'de>>(self, map: &mut A, repeated: &Repeated) -> Result<(), A::Error>;
}

impl<'de> Object<'de> for () {
    fn read<A: MapAccess<'de>>(self, map: &mut A, repeated: &Repeated) -> Result<(), A::Error> {
        entries(map, repeated, |_, map| map.next_value_seed(Skip(repeated)))
    }
}

impl<'de> Object<'de> for &mut Outline<'de> {
    fn read<A: MapAccess<'de>>(self, map: &mut A, repeated: &Repeated) -> Result<(), A::Error> {
        entries(map, repeated, |key, map| {
            let (kept, seed) = match key {
                "id" => (&mut self.id, NodeSeed::new(repeated, ())),
                "type" => (&mut self.kind, NodeSeed::new(repeated, ())),
                "eventType" => (&mut self.event_type, NodeSeed::new(repeated, ())),
                "createdAt" => (&mut self.created_at, NodeSeed::new(repeated, ())),
                "data" => {
                    let seed = NodeSeed::new(repeated, &mut self.data_fields);
                    self.data = Some(map.next_value_seed(seed)?);
                    return Ok(());
                }
                _ => return map.next_value_seed(Skip(repeated)),
            };
            *kept = Some(map.next_value_seed(seed)?);
            Ok(())
        })
    }
}

impl<'de> Object<'de> for &mut Data<'de> {
    fn read<A: MapAccess<'de>>(self, map: &mut A, repeated: &Repeated) -> Result<(), A::Error> {
        entries(map, repeated, |key, map| {
            let kept = match key {
                "id" => &mut self.id,
                "organizationId" => &mut self.organization_id,
                "phoneNumber" => &mut self.phone_number,
                "globalOptedOut" => &mut self.global_opted_out,
                "tagId" => &mut self.tag_id,
                "leadId" => &mut self.lead_id,
                _ => {
                    // No key is counted twice: a repeated one has ended the pass.
                    if FULL_LEAD_FIELDS.contains(&key) {
                        self.lead_fields += 1;
                    }
                    return map.next_value_seed(Skip(repeated));
                }
            };
            *kept = Some(map.next_value_seed(NodeSeed::new(repeated, ()))?);
            Ok(())
        })
    }
}

/// Reads every entry of an object, `value` reading each key's value; a key the object
/// already has ends the read before its value is, left in `repeated`.
fn entries<'de, A: MapAccess<'de>>(
    map: &mut A,
    repeated: &Repeated,
    mut value: impl FnMut(&str, &mut A) -> Result<(), A::Error>,
) -> Result<(), A::Error> {
    let mut keys = Keys::default();
    while let Some(key) = map.next_key_seed(Key)? {
        // A borrowed key's copy is a pointer's: only a key with escapes is copied whole.
        if !keys.insert(key.clone()) {
            repeated.set(Some(key.into_owned()));
            return Err(de::Error::custom("duplicate key"));
        }
        value(&key, map)?;
    }
    Ok(())
}

/// How many keys of one object are kept inline before a hash set takes the rest.
const FEW: usize = 16;

/// The keys of one object read so far: up to [`FEW`] borrowed from the bytes in place,
/// compared one by one, and the rest (and any key with escapes, which is not borrowed) in a
/// hash set, so that an object of many keys costs linear time.
struct Keys<'de> {
    few: [&'de str; FEW],
    len: usize,
    more: Option<HashSet<Cow<'de, str>>>,
}

impl Default for Keys<'_> {
    fn default() -> Self {
        Keys {
            few: [""; FEW],
            len: 0,
            more: None,
        }
    }
}

impl<'de> Keys<'de> {
    /// Takes `key`; false when the object already has it.
    fn insert(&mut self, key: Cow<'de, str>) -> bool {
        let text: &str = &key;
        let few = &self.few[..self.len];
        if few.contains(&text) || self.more.as_ref().is_some_and(|more| more.contains(text)) {
            return false;
        }
        match key {
            Cow::Borrowed(borrowed) if self.len < FEW => {
                self.few[self.len] = borrowed;
                self.len += 1;
            }
            key => {
                self.more.get_or_insert_default().insert(key);
            }
        }
        true
    }
}

/// An object's key, borrowed from the bytes unless it has escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object's key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key.to_owned()))
    }

    fn visit_string<E>(self, key: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key))
    }
}

/// Reads a value whatever it is as a [`Node`], the keys of an object kept in `object`.
struct NodeSeed<'a, O> {
    repeated: &'a Repeated,
    object: O,
}

impl<'a, O> NodeSeed<'a, O> {
    fn new(repeated: &'a Repeated, object: O) -> Self {
        NodeSeed { repeated, object }
    }
}

impl<'de, O: Object<'de>> DeserializeSeed<'de> for NodeSeed<'_, O> {
    type Value = Node<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Node<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, O: Object<'de>> Visitor<'de> for NodeSeed<'_, O> {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Node<'de>, E> {
        Ok(Node::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Node<'de>, E> {
        Ok(Node::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Node<'de>, E> {
        // JSON text has no NaN or infinity: every double it gives is a number.
        Ok(Number::from_f64(value).map_or(Node::Null, Node::Number))
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Borrowed(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E>(self, value: String) -> Result<Node<'de>, E> {
        Ok(Node::Str(Cow::Owned(value)))
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Node<'de>, A::Error> {
        Skip(self.repeated).visit_seq(seq).map(|()| Node::Array)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        self.object
            .read(&mut map, self.repeated)
            .map(|()| Node::Object)
    }
}

/// Reads a value and keeps nothing of it, its objects' keys checked all the same.
struct Skip<'a>(&'a Repeated);

impl<'de> DeserializeSeed<'de> for Skip<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        // Any, not `deserialize_ignored_any`: that one passes over a number unread, and a
        // number past a double's range would not be refused.
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skip(self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        ().read(&mut map, self.0)
    }
}
