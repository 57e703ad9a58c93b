//! The hash chain over the consent ledger: what an entry's `hash` is, and the pure walk
//! that checks entries fed to it in order (reading them is the store's, in `ledger::chain`).
//!
//! # The canonical encoding
//!
//! An entry's `hash` is the lowercase hex SHA-256 of the UTF-8 bytes of one compact JSON
//! array (no whitespace between tokens):
//!
//! ```text
//! [prevHash, seq, organizationId, leadId, phoneNumber, optedOut, occurredAt, recordedAt,
//!  source, eventRef, superseded, tagId, reason]
//! ```
//!
//! followed, for an entry of an account other than `default`, by a 14th element: its
//! `accountId` (a string). This is the encoding's one version step, taken when the ledger
//! came to hold several accounts: every entry recorded before it is of the account
//! `default` and keeps the 13-element encoding it was hashed with, and the encodings of the
//! same fields in two accounts never coincide.
//!
//! - `prevHash`: the `hash` of the entry before it in `seq` order; 64 zeros (`"000…0"`) for
//!   the first entry.
//! - `seq`: a JSON integer; `optedOut`, `superseded`: `true`/`false`; `leadId`, `tagId`,
//!   `reason`: a string or `null`; every other field a string.
//! - Times as the ledger shows them: RFC 3339, UTC, milliseconds, `Z`
//!   (`2026-11-21T10:00:00.000Z`).
//! - Strings as JSON strings: `"` and `\` escaped with a backslash; U+0008, U+000C, U+000A,
//!   U+000D, U+0009 as `\b \f \n \r \t`; other characters below U+0020 as `\u00xx` (lowercase
//!   hex); everything else as itself, in UTF-8 (no `\u` escapes, `/` not escaped).
//!
//! That is what `json.dumps(array, ensure_ascii=False, separators=(",", ":"))` gives in
//! Python and `to_json(text)::text` in PostgreSQL (whose migration computes the chain of the
//! entries recorded before it existed with the SQL function `ledger_entry_hash`), so the
//! chain can be checked without this code.

use sha2::{Digest, Sha256};

use super::{DEFAULT_ACCOUNT, LedgerEntry, Source, Timestamp};

/// The `prevHash` of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The fields of one ledger entry the hash covers, as the ledger shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields<'a> {
    pub seq: i64,
    pub organization_id: &'a str,
    pub lead_id: Option<&'a str>,
    pub phone_number: &'a str,
    pub opted_out: bool,
    /// Encoded as the ledger shows it: RFC 3339, UTC, milliseconds.
    pub occurred_at: Timestamp,
    pub recorded_at: Timestamp,
    pub source: Source,
    pub event_ref: &'a str,
    pub superseded: bool,
    pub tag_id: Option<&'a str>,
    pub reason: Option<&'a str>,
    /// Encoded only when it is not [`DEFAULT_ACCOUNT`].
    pub account_id: &'a str,
}

impl Fields<'_> {
    /// The canonical encoding of the entry after `prev` (see the module's documentation),
    /// written field by field: every field is a string, an integer, a boolean or null, so
    /// the encoding cannot fail.
    pub fn canonical(&self, prev: &str) -> String {
        let mut out = String::with_capacity(256 + self.reason.map_or(0, str::len));
        out.push('[');
        push_str(&mut out, prev);
        out.push(',');
        out.push_str(&self.seq.to_string());
        for field in [
            Some(self.organization_id),
            self.lead_id,
            Some(self.phone_number),
        ] {
            out.push(',');
            push_opt(&mut out, field);
        }
        out.push(',');
        out.push_str(if self.opted_out { "true" } else { "false" });
        for field in [
            &*self.occurred_at.text(),
            &self.recorded_at.text(),
            self.source.as_str(),
            self.event_ref,
        ] {
            out.push(',');
            push_str(&mut out, field);
        }
        out.push(',');
        out.push_str(if self.superseded { "true" } else { "false" });
        for field in [self.tag_id, self.reason] {
            out.push(',');
            push_opt(&mut out, field);
        }
        if self.account_id != DEFAULT_ACCOUNT {
            out.push(',');
            push_str(&mut out, self.account_id);
        }
        out.push(']');
        out
    }

    /// The entry's `hash`, following the entry whose hash is `prev`.
    pub fn hash_after(&self, prev: &str) -> String {
        lower_hex(&Sha256::digest(self.canonical(prev).as_bytes()))
    }
}

/// `bytes` as lowercase hex, as `hex::encode` writes them, into a string sized once (every
/// entry the daemon records is hashed on its writer's path).
fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for &byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

/// `value` as a JSON string, escaped as the module's documentation says. Every byte that
/// needs an escape is ASCII, so the runs between them are copied whole.
fn push_str(out: &mut String, value: &str) {
    out.push('"');
    let mut run = 0;
    for (i, byte) in value.bytes().enumerate() {
        let escaped = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            0x0c => "\\f",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..0x20 => "",
            _ => continue,
        };
        out.push_str(&value[run..i]);
        if escaped.is_empty() {
            out.push_str(&format!("\\u{byte:04x}"));
        } else {
            out.push_str(escaped);
        }
        run = i + 1;
    }
    out.push_str(&value[run..]);
    out.push('"');
}

/// A string or `null`.
fn push_opt(out: &mut String, value: Option<&str>) {
    match value {
        Some(value) => push_str(out, value),
        None => out.push_str("null"),
    }
}

/// One stored ledger entry, as the chain walk reads it: the contract's entry (without its
/// pushes, which the hash does not cover) and the stored fields the hash covers besides.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ChainRow {
    #[sqlx(flatten)]
    pub entry: LedgerEntry,
    pub tag_id: Option<String>,
    pub reason: Option<String>,
    /// `None` only for an entry recorded before the chain whose hash is not computed yet.
    pub hash: Option<String>,
}

impl ChainRow {
    pub fn fields(&self) -> Fields<'_> {
        let e = &self.entry;
        Fields {
            seq: e.seq,
            organization_id: &e.organization_id,
            lead_id: e.lead_id.as_deref(),
            phone_number: &e.phone_number,
            opted_out: e.opted_out,
            occurred_at: e.occurred_at,
            recorded_at: e.recorded_at,
            source: e.source,
            event_ref: &e.event_ref,
            superseded: e.superseded,
            tag_id: self.tag_id.as_deref(),
            reason: self.reason.as_deref(),
            account_id: &e.account_id,
        }
    }
}

/// The last entry of the chain: what to keep elsewhere to notice a rewrite later.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChainHead {
    /// 0 for an empty ledger.
    pub seq: i64,
    pub hash: String,
}

impl ChainHead {
    pub fn empty() -> Self {
        Self {
            seq: 0,
            hash: GENESIS.to_owned(),
        }
    }
}

/// Why the chain breaks at an entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Break {
    /// The first entry whose stored hash is not the one its fields give.
    pub seq: i64,
    pub stored: Option<String>,
    pub expected: String,
}

impl std::fmt::Display for Break {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ledger entry seq {} does not match its hash: stored {}, its fields and the entry before it give {} (the entry, or one before it, was changed after it was recorded)",
            self.seq,
            self.stored.as_deref().unwrap_or("none"),
            self.expected
        )
    }
}

/// A walk over the chain, fed the entries in `seq` order, a page at a time.
#[derive(Debug, Clone)]
pub struct Walk {
    head: ChainHead,
    checked: u64,
}

impl Default for Walk {
    fn default() -> Self {
        Self {
            head: ChainHead::empty(),
            checked: 0,
        }
    }
}

impl Walk {
    /// Checks the next entries; the first that breaks the chain ends the walk.
    pub fn check(&mut self, rows: &[ChainRow]) -> Result<(), Break> {
        for row in rows {
            let expected = row.fields().hash_after(&self.head.hash);
            if row.hash.as_deref() != Some(expected.as_str()) {
                return Err(Break {
                    seq: row.entry.seq,
                    stored: row.hash.clone(),
                    expected,
                });
            }
            self.head = ChainHead {
                seq: row.entry.seq,
                hash: expected,
            };
            self.checked += 1;
        }
        Ok(())
    }

    /// The last entry checked.
    pub fn head(&self) -> &ChainHead {
        &self.head
    }

    /// Entries checked so far.
    pub fn checked(&self) -> u64 {
        self.checked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("rfc 3339")
    }

    fn entry() -> Fields<'static> {
        Fields {
            seq: 1,
            organization_id: "org_1",
            lead_id: None,
            phone_number: "+15551234567",
            opted_out: true,
            occurred_at: at("2026-11-21T10:00:00.000Z"),
            recorded_at: at("2026-11-21T10:00:01.250Z"),
            source: Source::Webhook,
            event_ref: "event:evt_1",
            superseded: false,
            tag_id: None,
            reason: Some("said \"STOP\"\n\u{1}é/"),
            account_id: DEFAULT_ACCOUNT,
        }
    }

    #[test]
    fn the_canonical_encoding_is_the_documented_compact_json_array() {
        assert_eq!(
            entry().canonical(GENESIS),
            format!(
                "[\"{GENESIS}\",1,\"org_1\",null,\"+15551234567\",true,\"2026-11-21T10:00:00.000Z\",\"2026-11-21T10:00:01.250Z\",\"webhook\",\"event:evt_1\",false,null,\"said \\\"STOP\\\"\\n\\u0001é/\"]"
            )
        );
    }

    #[test]
    fn an_entry_of_another_account_than_default_ends_with_its_account() {
        let default = entry();
        let party = Fields {
            account_id: "party",
            ..entry()
        };
        let encoded = party.canonical(GENESIS);
        assert_eq!(
            encoded,
            format!(
                "{},\"party\"]",
                default.canonical(GENESIS).trim_end_matches(']')
            )
        );
        assert_ne!(party.hash_after(GENESIS), default.hash_after(GENESIS));
    }

    proptest::proptest! {
        #[test]
        fn the_encoding_is_what_serde_json_writes_for_the_same_array(
            organization_id in ".*", phone_number in ".*", reason in proptest::option::of(".*"),
            seq in 0i64.., opted_out: bool,
        ) {
            let fields = Fields { seq, organization_id: &organization_id, phone_number: &phone_number,
                opted_out, reason: reason.as_deref(), ..entry() };
            let expected = serde_json::to_string(&(
                GENESIS, seq, &organization_id, fields.lead_id, &phone_number, opted_out,
                fields.occurred_at, fields.recorded_at, fields.source, fields.event_ref,
                fields.superseded, fields.tag_id, &reason,
            )).expect("an array of strings, integers and booleans encodes");
            proptest::prop_assert_eq!(fields.canonical(GENESIS), expected.as_str());
            proptest::prop_assert_eq!(
                fields.hash_after(GENESIS),
                hex::encode(Sha256::digest(expected.as_bytes()))
            );
        }
    }

    #[test]
    fn a_walk_names_the_first_entry_whose_fields_changed() {
        let first = entry();
        let h1 = first.hash_after(GENESIS);
        let second = Fields { seq: 2, ..first };
        let h2 = second.hash_after(&h1);
        let row = |f: Fields, hash: &str| ChainRow {
            entry: LedgerEntry {
                seq: f.seq,
                organization_id: f.organization_id.into(),
                lead_id: None,
                phone_number: f.phone_number.into(),
                opted_out: f.opted_out,
                occurred_at: f.occurred_at,
                recorded_at: f.recorded_at,
                source: f.source,
                event_ref: f.event_ref.into(),
                superseded: f.superseded,
                account_id: crate::model::AccountId::stored(f.account_id),
                push: None,
                echo_of: None,
            },
            tag_id: None,
            reason: f.reason.map(Into::into),
            hash: Some(hash.into()),
        };
        let mut walk = Walk::default();
        assert_eq!(walk.check(&[row(first, &h1), row(second, &h2)]), Ok(()));
        assert_eq!(walk.head().seq, 2);
        let mut edited = row(second, &h2);
        edited.entry.opted_out = false;
        let broken = Walk::default()
            .check(&[row(first, &h1), edited])
            .unwrap_err();
        assert_eq!(broken.seq, 2);
    }
}
