//! The keys of a `[[source]]` of kind `telnyx`: the account's Ed25519 public key its posts
//! are signed with, and how far a post's signed time may lie from its receipt. Compiled into
//! the settings layer (`crate::settings::kinds::telnyx`): it imports the model and the
//! settings alone.

use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::settings::kinds::{Kind, Named, SourceKind};
use crate::settings::{SettingsError, read_secret_lines};

/// The longest `tolerance_secs`: a day.
pub const MAX_TOLERANCE_SECS: u64 = 86_400;

/// The keys of a Telnyx source beside the common ones.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TelnyxSettings {
    /// The account's public key (Mission Control: Keys & Credentials, Public Key), base64
    /// of its 32 bytes. Not a secret: it verifies, it cannot sign.
    #[serde(default)]
    pub public_key: Option<String>,
    /// A file of public keys, one a line, each accepted beside `public_key` (during a
    /// rotation the old and the new stand side by side).
    #[serde(default)]
    pub public_key_file: Option<PathBuf>,
    /// How far a post's `telnyx-timestamp` may lie from when it is received, either way:
    /// past it the post is refused, as a replay would be.
    #[serde(default = "default_tolerance_secs")]
    pub tolerance_secs: u64,
    /// Every key accepted: `public_key`, then the file's lines (read when the settings are,
    /// and on reload).
    #[serde(skip)]
    pub keys_from_file: Vec<String>,
}

fn default_tolerance_secs() -> u64 {
    300
}

impl TelnyxSettings {
    /// Every public key accepted, `public_key` first, as base64 text.
    pub fn accepted(&self) -> Vec<&str> {
        self.public_key
            .iter()
            .chain(&self.keys_from_file)
            .map(|key| key.trim())
            .collect()
    }

    /// Every public key accepted, as 32 bytes (those that are not are refused at load).
    pub fn accepted_bytes(&self) -> Vec<[u8; 32]> {
        self.accepted()
            .into_iter()
            .filter_map(|key| key_bytes(key).ok())
            .collect()
    }
}

/// A public key's 32 bytes from its base64; why it is not one.
fn key_bytes(key: &str) -> Result<[u8; 32], String> {
    let bytes = STANDARD
        .decode(key)
        .map_err(|_| "is not base64".to_owned())?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| format!("is {} bytes; an Ed25519 public key is 32", bytes.len()))
}

impl Kind for TelnyxSettings {
    const KIND: &'static str = "telnyx";
    const KEYS: &'static [&'static str] = &["public_key", "public_key_file", "tolerance_secs"];
}

impl SourceKind for TelnyxSettings {
    fn source(&self) -> crate::model::Source {
        crate::model::Source::Telnyx
    }

    fn polled(&self) -> bool {
        false
    }

    fn read_secret_files(&mut self) -> Result<(), SettingsError> {
        if let Some(path) = &self.public_key_file {
            self.keys_from_file = read_secret_lines("source.public_key_file", path)?;
        }
        Ok(())
    }

    /// At least one public key, each 32 bytes of base64 and a point of the curve; the
    /// tolerance within its bounds.
    fn validate(&self, _name: &str, named: Named<'_>) -> Result<(), SettingsError> {
        let keys = self.accepted();
        if keys.is_empty() {
            return Err(SettingsError::invalid(
                "source.public_key",
                named("a public key is required (public_key or public_key_file)"),
            ));
        }
        for (at, key) in keys.iter().enumerate() {
            let valid = key_bytes(key).and_then(|bytes| {
                ed25519_dalek::VerifyingKey::from_bytes(&bytes)
                    .map(|_| ())
                    .map_err(|_| "is not a point of Ed25519's curve".to_owned())
            });
            if let Err(why) = valid {
                return Err(SettingsError::invalid(
                    "source.public_key",
                    named(&format!(
                        "public key {} (the {}) {why}: paste it as Telnyx shows it",
                        at + 1,
                        if at == 0 && self.public_key.is_some() {
                            "public_key"
                        } else {
                            "file's"
                        }
                    )),
                ));
            }
        }
        if !(1..=MAX_TOLERANCE_SECS).contains(&self.tolerance_secs) {
            return Err(SettingsError::invalid(
                "source.tolerance_secs",
                named(&format!("must be between 1 and {MAX_TOLERANCE_SECS}")),
            ));
        }
        Ok(())
    }
}
