//! Each kind's own keys: a struct in the kind's folder under `src/systems/` (with the rest
//! of the kind), compiled here, in the settings layer, because settings are typed and
//! checked once, when they are read. Such a file imports the model and the settings alone
//! (`tests/it/architecture.rs` reads it as this module). The lists of kinds a table's
//! `kind` takes are [`kinds!`] invocations, a line per kind: `[[destination]]`'s in
//! `destinations.rs`, `[[source]]`'s in `sources.rs`.

#[path = "../systems/action_network/settings.rs"]
pub mod action_network;
#[path = "../systems/bigquery/settings.rs"]
pub mod bigquery;
#[path = "../systems/postgres/settings.rs"]
pub mod postgres;
#[path = "../systems/twilio/settings.rs"]
pub mod twilio;
#[path = "../systems/van/settings.rs"]
pub mod van;

/// A kind's name, as `kind` takes it, and its own keys (what a table of another kind is
/// refused naming).
pub trait Kind {
    const KIND: &'static str;
    const KEYS: &'static [&'static str];
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
