//! POST /oauth/token: the client-credentials grant (JSON) and the token answer.

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

/// The grant; all three fields required.
#[derive(Debug, Deserialize)]
pub(crate) struct TokenGrant {
    pub grant_type: String,
    pub client_id: String,
    pub client_secret: SecretString,
}

/// The answer; all four fields required. `expires_in` is the lifetime in seconds.
#[derive(Debug, Serialize)]
pub(crate) struct Token {
    pub access_token: String,
    pub token_type: &'static str,
    pub scope: &'static str,
    pub expires_in: serde_json::Number,
}
