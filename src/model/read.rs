//! What a source reads or is posted, as the records the ledger takes: [`ReadRecord`] (what
//! makes it one record there, what it says, what it stands on) and [`Said`]; the ledger's
//! `event_ref` of an entry a source recorded ([`event_ref`], read back by
//! [`source_name_of`]: one format, written and read here alone); and [`ReadsPost`], how a
//! kind that posts to the daemon reads a post's bytes (pure: the write path reads a stored
//! post again through it without knowing the kind).

use chrono::{DateTime, Utc};

use super::Source;
use super::phone::Region;

/// One record a source read.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadRecord {
    /// What makes it one record there (VAN: VAN ID, phone and change time; Action
    /// Network: person, number and `modified_date`): recorded once.
    pub key: String,
    pub said: Said,
    /// What it stands on, kept as its entries' evidence.
    pub stands_on: serde_json::Value,
}

/// What a record says.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    /// A number opted out (or in), when the person did it there.
    Consent {
        /// E.164.
        phone_number: String,
        opted_out: bool,
        occurred_at: DateTime<Utc>,
    },
    /// A reply holding a revocation word among other words: no opt-out by itself, put to
    /// a person ([`crate::model::review`]).
    Review {
        /// E.164.
        phone_number: String,
        /// What the person wrote.
        text: String,
        /// The revocation words and phrases it holds.
        matched: Vec<String>,
        received_at: DateTime<Utc>,
    },
    /// Nothing the ledger takes (another change, no number it can read), and why.
    Nothing(String),
}

/// The `event_ref` of an entry source `name` (of `kind`) recorded as record `key`:
/// `KIND:NAME:KEY`. A reply posted to a source is kept in the outbox under it too.
pub fn event_ref(kind: Source, name: &str, key: &str) -> String {
    format!("{}:{name}:{key}", kind.as_str())
}

/// The `event_ref` of a post to source `name` (of `kind`) that is not one record: its exact
/// bytes' SHA-256 (such a post is kept and quarantined).
pub fn event_ref_of_bytes(kind: Source, name: &str, body: &[u8]) -> String {
    use sha2::Digest as _;
    let digest = hex::encode(sha2::Sha256::digest(body));
    event_ref(kind, name, &format!("sha256:{digest}"))
}

/// The source's name in an entry's `event_ref`, when a source of `kind` recorded it.
pub fn source_name_of(kind: Source, event_ref: &str) -> Option<&str> {
    let rest = event_ref.strip_prefix(kind.as_str())?.strip_prefix(':')?;
    rest.split(':').next().filter(|name| !name.is_empty())
}

/// The kind and source of a key of [`event_ref`], when it is one of a kind that posts to
/// the daemon ([`Source::posted`]).
pub fn posted_to(key: &str) -> Option<(Source, &str)> {
    let (kind, _) = key.split_once(':')?;
    let kind: Source = kind.parse().ok()?;
    kind.posted()
        .then(|| source_name_of(kind, key))
        .flatten()
        .map(|name| (kind, name))
}

/// How a source a system posts to reads a post: its exact bytes, received at
/// `received_at`, a number without its country code read in `region` (a reply's words
/// beside the source's own revocation words, which it holds). Pure; an `Err` is why the
/// post cannot be read one way (it is kept and quarantined, never guessed).
pub trait ReadsPost: std::fmt::Debug + Send + Sync {
    fn records(
        &self,
        body: &[u8],
        received_at: DateTime<Utc>,
        region: Region,
    ) -> Result<Vec<ReadRecord>, String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_ref_names_its_source_and_a_posted_one_its_kind() {
        let posted = *Source::ALL
            .iter()
            .find(|s| s.posted())
            .expect("a posted kind");
        let read = *Source::ALL
            .iter()
            .find(|s| s.read_back() && !s.posted())
            .expect("a kind read back");
        let key = event_ref(posted, "tw", "SM1");
        assert_eq!(key, format!("{}:tw:SM1", posted.as_str()));
        assert_eq!(source_name_of(posted, &key), Some("tw"));
        assert_eq!(source_name_of(read, &key), None);
        assert_eq!(posted_to(&key), Some((posted, "tw")));
        assert_eq!(
            posted_to(&event_ref(read, "main", "1")),
            None,
            "read, not posted"
        );
        assert_eq!(posted_to("event:abc"), None);
        assert_eq!(posted_to(&format!("{}::SM1", posted.as_str())), None);
        let bytes = event_ref_of_bytes(posted, "tw", b"x");
        assert!(
            bytes.starts_with(&format!("{}:tw:sha256:", posted.as_str())),
            "{bytes}"
        );
    }
}
