//! Values that cross the storage boundary typed: a time as the ledger shows it, and the
//! closed sets of words the database keeps as text (sources, outbox and push states).
//!
//! Each type binds and decodes on both backends, so a statement that is the same text in
//! both dialects can be written once and its results need no second parse.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgHasArrayType, PgTypeInfo};
use sqlx::{Database, Decode, Encode, Postgres, Sqlite, Type};

/// An instant as the ledger shows and SQLite stores it: RFC 3339, UTC, milliseconds, `Z`
/// (`2026-11-21T10:00:00.000Z`). On PostgreSQL it is a `timestamptz`. Text that sorts as
/// the instants do, so SQLite compares stored times as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub DateTime<Utc>);

impl Timestamp {
    pub fn now() -> Self {
        Self(Utc::now())
    }

    pub fn at(self) -> DateTime<Utc> {
        self.0
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(at: DateTime<Utc>) -> Self {
        Self(at)
    }
}

impl From<Timestamp> for DateTime<Utc> {
    fn from(at: Timestamp) -> Self {
        at.0
    }
}

impl Timestamp {
    /// The text the ledger shows (`2026-11-21T10:00:00.000Z`): what chrono's
    /// `to_rfc3339_opts(SecondsFormat::Millis, true)` gives, written digit by digit for the
    /// years 0 to 9999 outside a leap second (every time the daemon writes: each delivery
    /// stores several, on its writer's path), by chrono otherwise.
    pub fn text(&self) -> String {
        use chrono::{Datelike as _, Timelike as _};
        let at = &self.0;
        let (year, nano) = (at.year(), at.nanosecond());
        if !(0..=9999).contains(&year) || nano >= 1_000_000_000 {
            return at.to_rfc3339_opts(SecondsFormat::Millis, true);
        }
        let mut text = *b"0000-00-00T00:00:00.000Z";
        let mut digits = |at: usize, width: usize, mut value: u32| {
            for i in (at..at + width).rev() {
                text[i] = b'0' + (value % 10) as u8;
                value /= 10;
            }
        };
        digits(0, 4, year.unsigned_abs());
        digits(5, 2, at.month());
        digits(8, 2, at.day());
        digits(11, 2, at.hour());
        digits(14, 2, at.minute());
        digits(17, 2, at.second());
        digits(20, 3, nano / 1_000_000);
        match std::str::from_utf8(&text) {
            Ok(text) => text.to_owned(),
            Err(_) => at.to_rfc3339_opts(SecondsFormat::Millis, true),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl FromStr for Timestamp {
    type Err = chrono::ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        DateTime::parse_from_rfc3339(text).map(|at| Self(at.to_utc()))
    }
}

/// A time equals the text the ledger shows for it.
impl PartialEq<&str> for Timestamp {
    fn eq(&self, text: &&str) -> bool {
        use std::fmt::Write as _;
        let mut shown = String::with_capacity(24);
        write!(shown, "{self}").is_ok() && shown == *text
    }
}

/// RFC 3339 text in the OpenAPI document, as it is serialized.
impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::schema::SchemaFormat::KnownFormat(
                utoipa::openapi::schema::KnownFormat::DateTime,
            )))
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Type<Sqlite> for Timestamp {
    fn type_info() -> <Sqlite as Database>::TypeInfo {
        <String as Type<Sqlite>>::type_info()
    }

    fn compatible(ty: &<Sqlite as Database>::TypeInfo) -> bool {
        <DateTime<Utc> as Type<Sqlite>>::compatible(ty)
    }
}

impl<'q> Encode<'q, Sqlite> for Timestamp {
    fn encode_by_ref(
        &self,
        buf: &mut <Sqlite as Database>::ArgumentBuffer<'q>,
    ) -> Result<IsNull, BoxDynError> {
        <String as Encode<'q, Sqlite>>::encode(self.text(), buf)
    }
}

impl<'r> Decode<'r, Sqlite> for Timestamp {
    fn decode(value: <Sqlite as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
        <DateTime<Utc> as Decode<'r, Sqlite>>::decode(value).map(Self)
    }
}

impl Type<Postgres> for Timestamp {
    fn type_info() -> PgTypeInfo {
        <DateTime<Utc> as Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <DateTime<Utc> as Type<Postgres>>::compatible(ty)
    }
}

impl PgHasArrayType for Timestamp {
    fn array_type_info() -> PgTypeInfo {
        <DateTime<Utc> as PgHasArrayType>::array_type_info()
    }
}

impl<'q> Encode<'q, Postgres> for Timestamp {
    fn encode_by_ref(
        &self,
        buf: &mut <Postgres as Database>::ArgumentBuffer<'q>,
    ) -> Result<IsNull, BoxDynError> {
        <DateTime<Utc> as Encode<'q, Postgres>>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> Decode<'r, Postgres> for Timestamp {
    fn decode(value: <Postgres as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
        <DateTime<Utc> as Decode<'r, Postgres>>::decode(value).map(Self)
    }
}

/// A word the database keeps as text that is not one of the enum's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {found:?}")]
pub struct UnknownWord {
    pub what: &'static str,
    pub found: String,
}

/// A closed set of words kept as text: `as_str`, `FromStr`, `Display`, serde, and sqlx on
/// any backend that stores text.
macro_rules! text_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident ($what:literal) {
        $($(#[$vmeta:meta])* $variant:ident = $word:literal,)+
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every word, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)+
                }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::model::typed::UnknownWord;

            fn from_str(word: &str) -> Result<Self, Self::Err> {
                match word {
                    $($word => Ok($name::$variant),)+
                    other => Err($crate::model::typed::UnknownWord {
                        what: $what,
                        found: other.to_owned(),
                    }),
                }
            }
        }

        /// A word equals its text.
        impl PartialEq<&str> for $name {
            fn eq(&self, word: &&str) -> bool {
                self.as_str() == *word
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        /// Its words, as the OpenAPI document's `enum`.
        impl ::utoipa::PartialSchema for $name {
            fn schema() -> ::utoipa::openapi::RefOr<::utoipa::openapi::schema::Schema> {
                ::utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(::utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($word,)+]))
                    .into()
            }
        }

        impl ::utoipa::ToSchema for $name {}

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let word = <::std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
                word.parse().map_err(::serde::de::Error::custom)
            }
        }

        impl<DB: ::sqlx::Database> ::sqlx::Type<DB> for $name
        where
            str: ::sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <str as ::sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <str as ::sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'q, DB: ::sqlx::Database> ::sqlx::Encode<'q, DB> for $name
        where
            &'q str: ::sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut DB::ArgumentBuffer<'q>,
            ) -> Result<::sqlx::encode::IsNull, ::sqlx::error::BoxDynError> {
                <&'q str as ::sqlx::Encode<'q, DB>>::encode(self.as_str(), buf)
            }
        }

        impl<'r, DB: ::sqlx::Database> ::sqlx::Decode<'r, DB> for $name
        where
            &'r str: ::sqlx::Decode<'r, DB>,
        {
            fn decode(value: DB::ValueRef<'r>) -> Result<Self, ::sqlx::error::BoxDynError> {
                let word = <&'r str as ::sqlx::Decode<'r, DB>>::decode(value)?;
                Ok(word.parse()?)
            }
        }
    };
}

text_enum! {
    /// Where a consent observation comes from (the contract's `source`).
    pub enum Source("source") {
        Webhook = "webhook",
        Reconcile = "reconcile",
        Local = "local",
        /// An opt-out list imported from another platform.
        Import = "import",
        /// Read back from VAN's changed entities (a `[[source]]` of kind `van`).
        Van = "van",
        /// Read back from Action Network's people (a `[[source]]` of kind `action_network`).
        ActionNetwork = "action_network",
        /// Heard from a Twilio number: a person's reply, posted by Twilio's messaging
        /// webhook to a `[[source]]` of kind `twilio`.
        Twilio = "twilio",
        /// Heard from a Telnyx number: a person's reply, posted by Telnyx's messaging
        /// webhook to a `[[source]]` of kind `telnyx`.
        Telnyx = "telnyx",
        /// Heard from a Bandwidth number: a person's reply, posted by a Bandwidth
        /// application's inbound callback to a `[[source]]` of kind `bandwidth`.
        Bandwidth = "bandwidth",
        /// Read back from an organization's people in Mobilize.
        Mobilize = "mobilize",
        /// Read back from Mobile Commons' profiles.
        MobileCommons = "mobile_commons",
    }
}

impl Source {
    /// Whether entries of this source came from a system by a `[[source]]` (read back, or
    /// posted to the daemon): every source but the daemon's own ways.
    pub fn read_back(self) -> bool {
        !matches!(
            self,
            Source::Webhook | Source::Reconcile | Source::Local | Source::Import
        )
    }

    /// Whether a system posts what it records to the daemon (`/sources/{name}`): its
    /// entries stand on the post, kept in the outbox under their `event_ref`.
    pub fn posted(self) -> bool {
        matches!(self, Source::Twilio | Source::Telnyx | Source::Bandwidth)
    }

    /// Whether the system it comes from writes its event times in whole seconds (the
    /// service's webhooks, and the systems read back).
    pub fn in_whole_seconds(self) -> bool {
        self == Source::Webhook || self.read_back()
    }
}

text_enum! {
    /// Where an outbox row is: waiting for the worker, applied, or kept aside because it
    /// does not parse or apply.
    pub enum OutboxState("outbox state") {
        Pending = "pending",
        Applied = "applied",
        Quarantined = "quarantined",
    }
}

text_enum! {
    /// A local change's push to the service.
    pub enum PushState("push state") {
        Pending = "pending",
        Sent = "sent",
        Failed = "failed",
        /// A newer change of the same number was queued before this one was sent.
        Superseded = "superseded",
    }
}

text_enum! {
    /// A subscriber as `GET /v1/subscribers` shows it.
    pub enum SubscriberStatus("subscriber state") {
        Active = "active",
        /// The last attempt failed; the next is scheduled.
        Retrying = "retrying",
        /// Answered 410: nothing is sent until a replay.
        Disabled = "disabled",
    }
}

text_enum! {
    /// How a destination's entry ended (`destinations outcomes`).
    pub enum OutcomeKind("destination outcome") {
        /// Every action was answered with success.
        Sent = "sent",
        /// Nothing could be sent: no lead in the mirror, or no VAN ID on it.
        Unmatched = "unmatched",
        /// The system said no (404, or another 4xx): its own words are kept.
        Refused = "refused",
        /// Nothing was sent: the destination was told this already (what it was last told
        /// of the person is what the entry says: a second opt-out, the service's echo, a
        /// shared copy, a reconciliation finding it). Its time is when it was told, by the
        /// entry it follows.
        Already = "already",
        /// An account-wide entry (no lead) at a system that finds people by their lead:
        /// nothing was sent for it; it reaches the system through the entries of its
        /// leads (one per organization holding the number, recorded with it).
        ThroughLeads = "through_leads",
        /// An action was sent twice and neither request was answered (no answer within the
        /// timeout): it is not sent a third time, and whether the system has it is unknown.
        Unconfirmed = "unconfirmed",
    }
}

impl OutcomeKind {
    /// Whether the system could not be given the entry (or may not have it): a finding,
    /// which keeps an opt-out from `honoured`.
    pub fn unreached(self) -> bool {
        matches!(self, Self::Unmatched | Self::Refused | Self::Unconfirmed)
    }
}

text_enum! {
    /// A destination as `GET /v1/destinations` shows it.
    pub enum DestinationStatus("destination state") {
        Active = "active",
        /// The last attempt failed; the next is scheduled.
        Retrying = "retrying",
        /// Stopped until its key works again or its lookups find what they need (reload,
        /// `destinations retry`): `lastError` says why.
        Error = "error",
        /// A warehouse whose table was found missing, made again or behind what was sent:
        /// every entry is being written again from its first, `lastError` says why.
        Refilling = "refilling",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timestamp_shows_as_the_ledger_stores_it_and_reads_back() {
        let at: Timestamp = "2026-11-21T10:00:00.123456+02:00"
            .parse()
            .expect("rfc 3339");
        assert_eq!(at.to_string(), "2026-11-21T08:00:00.123Z");
        let json = serde_json::to_string(&at).expect("serialize");
        assert_eq!(json, r#""2026-11-21T08:00:00.123Z""#);
        let back: Timestamp = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back.to_string(), at.to_string());
        assert!("yesterday".parse::<Timestamp>().is_err());
    }

    #[test]
    fn a_timestamp_shows_exactly_as_chrono_writes_it_whatever_the_instant() {
        use chrono::TimeZone as _;
        let chrono = |at: &DateTime<Utc>| at.to_rfc3339_opts(SecondsFormat::Millis, true);
        let mut instants = vec![
            Utc.with_ymd_and_hms(0, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(-1, 12, 31, 23, 59, 59).unwrap(),
            Utc.with_ymd_and_hms(2024, 2, 29, 12, 34, 56).unwrap(),
            DateTime::<Utc>::MIN_UTC,
            DateTime::<Utc>::MAX_UTC,
        ];
        // A leap second, and sub-millisecond parts that are cut, not rounded.
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
            .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 1_999_999_999))
            .unwrap();
        instants.push(Utc.from_utc_datetime(&leap));
        let mut millis: i64 = -62_167_219_200_000; // 0000-01-01
        while millis < 253_402_300_800_000 {
            // Steps of a prime number of milliseconds cover every field's values.
            for nanos in [0, 999_999, 1_000_000, 999_999_999] {
                let at = DateTime::from_timestamp_millis(millis).unwrap()
                    + chrono::TimeDelta::nanoseconds(nanos % 1_000_000);
                instants.push(at);
            }
            millis += 7_919_999_993;
        }
        for at in instants {
            assert_eq!(Timestamp(at).text(), chrono(&at), "{at:?}");
            assert_eq!(Timestamp(at).to_string(), chrono(&at), "{at:?}");
        }
    }

    #[test]
    fn a_word_outside_the_set_is_refused_naming_what_it_is() {
        assert_eq!("local".parse::<Source>(), Ok(Source::Local));
        let error = "carrier pigeon"
            .parse::<Source>()
            .expect_err("not a source");
        assert_eq!(error.to_string(), r#"unknown source "carrier pigeon""#);
        for state in OutboxState::ALL {
            assert_eq!(state.as_str().parse::<OutboxState>(), Ok(*state));
        }
        assert_eq!(
            serde_json::to_string(&PushState::Superseded).expect("serialize"),
            r#""superseded""#
        );
    }
}
