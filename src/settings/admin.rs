//! `[admin]` and `[log]`: the local listener for other tools, and logging.

use super::*;

/// `[admin]`: the local listener for other tools.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminSettings {
    pub bind: String,
    /// Bearer tokens accepted; `/healthz` and `/metrics` need none. `name:token` names a
    /// token (`[A-Za-z0-9_.-]+`; the name is the actor of the local changes made with it,
    /// and may be shown; the token never is); a token without a name is `token-N` (N from
    /// 1, in order).
    #[serde(serialize_with = "redact_tokens")]
    pub tokens: Vec<SecretString>,
    /// A file with one token per line, added to `tokens`.
    pub tokens_file: Option<PathBuf>,
    /// Open connections at most (a long-poll or an event stream holds one while it runs).
    pub max_connections: usize,
    /// A request's head must be complete this long after its first byte.
    pub header_timeout_secs: u64,
    /// A request's body must be complete this long after its head.
    pub body_timeout_secs: u64,
    /// A connection with no request in progress is closed after this.
    pub idle_timeout_secs: u64,
    /// Bearer tokens and console sign-ins that match no token, per client address and
    /// minute; past it the address is refused (429) for a while (see
    /// [`crate::admin::guard`]).
    pub failed_auth_per_minute: u32,
}

/// Failed credentials allowed per client address and minute by default.
pub const DEFAULT_FAILED_AUTH_PER_MINUTE: u32 = 10;

/// An admin token and its name (see [`AdminSettings::tokens`]).
#[derive(Debug, Clone)]
pub struct AdminToken {
    pub name: String,
    pub token: SecretString,
}

impl AdminToken {
    /// `name:token`, or a bare token named `token-{number}`.
    pub fn parse(configured: &SecretString, number: usize) -> Self {
        let text = configured.expose_secret();
        match token_name(text) {
            Some((name, token)) => Self {
                name: name.to_owned(),
                token: SecretString::from(token.to_owned()),
            },
            None => Self {
                name: format!("token-{number}"),
                token: configured.clone(),
            },
        }
    }
}

/// The name and token of `name:token`, if `text` has that form.
fn token_name(text: &str) -> Option<(&str, &str)> {
    let (name, token) = text.split_once(':')?;
    let valid = !name.is_empty()
        && !token.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    valid.then_some((name, token))
}

impl AdminSettings {
    /// The listener's limits.
    pub fn limits(&self) -> crate::listener::Limits {
        crate::listener::Limits::from_settings(
            self.max_connections,
            self.header_timeout_secs,
            self.body_timeout_secs,
            self.idle_timeout_secs,
        )
    }

    /// The configured tokens with their names.
    pub fn named_tokens(&self) -> Vec<AdminToken> {
        self.tokens
            .iter()
            .enumerate()
            .map(|(i, token)| AdminToken::parse(token, i + 1))
            .collect()
    }
}

/// Tokens as `name:[redacted]` (a name is not a secret), or `[redacted]` when unnamed.
fn redact_tokens<S: Serializer>(tokens: &[SecretString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(
        tokens
            .iter()
            .map(|token| match token_name(token.expose_secret()) {
                Some((name, _)) => format!("{name}:{REDACTED}"),
                None => REDACTED.to_owned(),
            }),
    )
}

impl Default for AdminSettings {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:8081".into(),
            tokens: Vec::new(),
            tokens_file: None,
            max_connections: 256,
            header_timeout_secs: 10,
            body_timeout_secs: 30,
            idle_timeout_secs: 60,
            failed_auth_per_minute: DEFAULT_FAILED_AUTH_PER_MINUTE,
        }
    }
}

/// `[log]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSettings {
    pub format: LogFormat,
    /// A level (`info`) or a `tracing` filter (`info,outreach_sync=debug`).
    pub level: String,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            level: "info".into(),
        }
    }
}

/// Log line formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}
