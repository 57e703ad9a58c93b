//! Secrets decoded into keys once, where the settings are read.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};

/// Decodes a Standard Webhooks secret (`whsec_` + base64); `None` if it is not base64.
pub fn standard_webhooks_key(secret: &str) -> Option<Vec<u8>> {
    let b64 = secret.strip_prefix("whsec_").unwrap_or(secret);
    let key = STANDARD
        .decode(b64)
        .or_else(|_| STANDARD_NO_PAD.decode(b64))
        .ok()?;
    (!key.is_empty()).then_some(key)
}
