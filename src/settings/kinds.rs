//! Each kind's own keys: a struct in the kind's folder under `src/systems/` (with the rest
//! of the kind), compiled here, in the settings layer, because settings are typed and
//! checked once, when they are read. Such a file imports the model and the settings alone
//! (`tests/it/architecture.rs` reads it as this module). The lists of kinds a table's
//! `kind` takes are [`kinds!`] invocations, a line per kind: `[[destination]]`'s in
//! `destinations.rs`, `[[source]]`'s in `sources.rs`.

#[path = "../systems/action_network/settings.rs"]
pub mod action_network;
#[path = "../systems/bandwidth/settings.rs"]
pub mod bandwidth;
#[path = "../systems/bigquery/settings.rs"]
pub mod bigquery;
#[path = "../systems/mobile_commons/settings.rs"]
pub mod mobile_commons;
#[path = "../systems/mobilize/settings.rs"]
pub mod mobilize;
#[path = "../systems/postgres/settings.rs"]
pub mod postgres;
#[path = "../systems/telnyx/settings.rs"]
pub mod telnyx;
#[path = "../systems/twilio/settings.rs"]
pub mod twilio;
#[path = "../systems/van/settings.rs"]
pub mod van;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::SettingsError;
use crate::model::AccountId;

/// What every warehouse's table takes.
pub mod warehouse;

/// `destination "name": ` or `source "name": ` before a message.
pub type Named<'a> = &'a dyn Fn(&str) -> String;

/// A kind's name, as `kind` takes it, and its own keys (what a table of another kind is
/// refused naming).
pub trait Kind {
    const KIND: &'static str;
    const KEYS: &'static [&'static str];
}

/// What each kind's settings do beside the common keys.
pub trait KindSettings {
    /// The keys of other kinds it was given.
    fn foreign(&self) -> &Foreign;

    /// A warehouse's table: `None` for a system of record.
    fn table(&self) -> Option<&warehouse::Table> {
        None
    }

    /// Its secret, when it is not `api_key` (a warehouse's credentials in a file, Mobile
    /// Commons' password): `None` for a kind whose key is `api_key`. Read into the
    /// destination's key, which a reload replaces as it replaces an API key.
    fn own_secret(&self) -> Option<OwnSecret<'_>> {
        None
    }

    /// Whether it writes opt-ins (`opt_ins = true`): a kind whose API only opts out
    /// (Mobile Commons' `profile_opt_out`) refuses it.
    fn writes_opt_ins(&self) -> bool {
        true
    }

    /// Who its key is used as, beside the key (Mobile Commons' login and company): a source
    /// reads what a destination writes only when both are the same.
    fn login(&self) -> Option<String> {
        None
    }

    /// Its API's root when `base_url` is not given: `None` when it must be.
    fn default_base_url(&self) -> Option<&'static str> {
        None
    }

    /// Why `base_url` is not one of its keys (it is reached some other way): `None` when
    /// it is.
    fn no_base_url(&self) -> Option<&'static str> {
        None
    }

    /// Its own keys' values.
    fn validate(&self, _named: Named<'_>) -> Result<(), SettingsError> {
        Ok(())
    }

    /// Its accounts (`accounts`) against the accounts `served`.
    fn validate_scope(
        &self,
        _named: Named<'_>,
        _accounts: &[String],
        _served: &[AccountId],
    ) -> Result<(), SettingsError> {
        Ok(())
    }
}

/// A kind's own secret: the key that holds it inline (`None`: a file alone holds it, as a
/// warehouse's credentials), what that key was given, the key of its file, and the file.
#[derive(Debug, Clone, Copy)]
pub struct OwnSecret<'a> {
    pub inline_key: Option<&'static str>,
    pub inline: Option<&'a secrecy::SecretString>,
    pub file_key: &'static str,
    pub file: Option<&'a PathBuf>,
}

impl<'a> OwnSecret<'a> {
    /// A secret kept in a file alone, under `file_key`.
    pub fn file(file_key: &'static str, file: Option<&'a PathBuf>) -> Self {
        Self {
            inline_key: None,
            inline: None,
            file_key,
            file,
        }
    }
}

/// The keys of a kind's table that are not its own: kept to be refused when the table is
/// validated, naming the kind they belong to (or none).
#[derive(Debug, Clone, Default)]
pub struct Foreign(pub(crate) Vec<String>);

impl<'de> Deserialize<'de> for Foreign {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let keys =
            std::collections::BTreeMap::<String, serde::de::IgnoredAny>::deserialize(deserializer)?;
        Ok(Self(keys.into_keys().collect()))
    }
}

impl Serialize for Foreign {
    /// Nothing: a foreign key never passes validation.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        serializer.serialize_map(Some(0))?.end()
    }
}

/// What each kind's own keys do beside the keys every source takes.
pub trait SourceKind {
    /// The ledger's `source` of what it records (`model::Source`: the ledger's vocabulary).
    fn source(&self) -> crate::model::Source;

    /// Whether the daemon reads it every `every_secs` (false: the system posts to it).
    fn polled(&self) -> bool {
        true
    }

    /// Reads the files its secrets are kept in.
    fn read_secret_files(&mut self) -> Result<(), SettingsError> {
        Ok(())
    }

    /// The key that holds the secret its reads are sent with, when it is not the common
    /// `api_key` (Mobile Commons' `password`), and the secret as read (`None`: not given):
    /// such a source refuses `api_key`.
    fn own_secret(&self) -> Option<(&'static str, Option<&secrecy::SecretString>)> {
        None
    }

    /// See [`KindSettings::login`].
    fn login(&self) -> Option<String> {
        None
    }

    /// Its own keys' values, in source `name` (the common keys are checked apart: those of
    /// a source the daemon reads when it is [`SourceKind::polled`], none of them when not).
    fn validate(&self, name: &str, named: Named<'_>) -> Result<(), SettingsError>;
}

/// Most of a source's own revocation words, and their length.
const MOST_WORDS: usize = 50;
const LONGEST_WORD_CHARS: usize = 40;

/// A source's own revocation words: a few, each short, with letters, and no control
/// character.
pub fn validate_words(words: &[String], named: Named<'_>) -> Result<(), SettingsError> {
    if words.len() > MOST_WORDS {
        return Err(SettingsError::invalid(
            "source.opt_out_words",
            named(&format!("at most {MOST_WORDS} words or phrases")),
        ));
    }
    for word in words {
        let fits = word.chars().count() <= LONGEST_WORD_CHARS
            && word.chars().any(char::is_alphanumeric)
            && !word.chars().any(crate::model::text::is_unsafe_char);
        if !fits {
            return Err(SettingsError::invalid(
                "source.opt_out_words",
                named(&format!(
                    "{} is not a word or phrase: at most {LONGEST_WORD_CHARS} characters, with letters, none a control character",
                    crate::model::text::quoted(word)
                )),
            ));
        }
    }
    Ok(())
}

/// The enum of a table's kinds, `kind` its tag, a line per kind: `Variant(Settings)`, the
/// settings implementing [`Kind`] and the table's trait of what each kind's keys do. It
/// gives `own()` (that trait, of the kind given), `kind()` and `KEYS` (each kind's name
/// and keys).
macro_rules! kinds {
    (
        $(#[$meta:meta])*
        pub enum $name:ident: $own:ident {
            $($(#[$variant_meta:meta])* $variant:ident($settings:ty),)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        pub enum $name {
            $($(#[$variant_meta])* $variant($settings),)+
        }

        impl $name {
            /// Each kind's name and its own keys.
            pub const KEYS: &[(&str, &[&str])] = &[
                $((
                    <$settings as $crate::settings::kinds::Kind>::KIND,
                    <$settings as $crate::settings::kinds::Kind>::KEYS,
                ),)+
            ];

            /// What its kind's own keys do.
            pub fn own(&self) -> &dyn $own {
                match self {
                    $(Self::$variant(own) => own,)+
                }
            }

            #[allow(dead_code)]
            fn own_mut(&mut self) -> &mut dyn $own {
                match self {
                    $(Self::$variant(own) => own,)+
                }
            }

            /// The kind's name, as `kind` takes it.
            pub fn kind(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => <$settings as $crate::settings::kinds::Kind>::KIND,)+
                }
            }
        }
    };
}
pub(crate) use kinds;

#[cfg(test)]
mod tests {
    use crate::settings::{SourceSystem, SystemSettings};

    /// The name `kind` takes is the one each kind's settings give ([`super::Kind::KIND`]),
    /// for every kind of both lists.
    #[test]
    fn each_kind_is_read_by_the_name_its_settings_give() {
        for (kind, _) in SystemSettings::KEYS {
            let table = serde_json::json!({ "kind": kind });
            let read: SystemSettings = serde_json::from_value(table).expect("a destination");
            assert_eq!(read.kind(), *kind);
        }
        for (kind, _) in SourceSystem::KEYS {
            let table = serde_json::json!({ "kind": kind });
            let read: SourceSystem = serde_json::from_value(table).expect("a source");
            assert_eq!(read.kind(), *kind);
            assert_eq!(
                read.source().as_str(),
                *kind,
                "the ledger's source is the kind"
            );
        }
    }
}
