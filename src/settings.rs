//! Typed configuration: the TOML file, `OUTREACH_SYNC__SECTION__KEY` overrides, `_file`
//! secrets, validation that names the offending key, and the redacted effective view.

use std::net::SocketAddr;
use std::path::PathBuf;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize, Serializer};

mod keys;
mod load;
mod schedule;
mod subscribers;
mod validate;
pub use keys::standard_webhooks_key;
pub use schedule::Schedule;
pub use subscribers::{MAX_BATCH, SubscriberSettings};

/// Where `--config` points when it is not given, if the file exists.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/outreach-sync/config.toml";
/// Shown in place of every secret.
pub const REDACTED: &str = "[redacted]";

/// A configuration that cannot be used, naming the key at fault.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("configuration file {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("invalid configuration: {0}")]
    Parse(String),
    #[error("invalid configuration key `{key}`: {message}")]
    Invalid { key: &'static str, message: String },
}

impl SettingsError {
    fn invalid(key: &'static str, message: impl Into<String>) -> Self {
        Self::Invalid {
            key,
            message: message.into(),
        }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub database: DatabaseSettings,
    pub ingest: IngestSettings,
    pub webhook: WebhookSettings,
    pub service: ServiceSettings,
    pub reconcile: ReconcileSettings,
    pub consent: ConsentSettings,
    pub admin: AdminSettings,
    pub log: LogSettings,
    pub replica: ReplicaSettings,
    pub retention: RetentionSettings,
    /// `[[subscriber]]`: tools every consent ledger entry is pushed to.
    pub subscriber: Vec<SubscriberSettings>,
}

/// `[database]`
#[derive(Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSettings {
    /// `sqlite://PATH` (the file is created if missing) or `postgres://USER@HOST:PORT/DB`
    /// (also `postgresql://`). A password in the URL is a secret: it is redacted wherever
    /// the configuration is shown.
    #[serde(serialize_with = "redact_url")]
    pub url: String,
    /// A file holding the URL, read instead of `url` (for a URL with a password).
    pub url_file: Option<PathBuf>,
    /// SQLite: `full`: an acknowledged delivery survives power loss. `normal`: it survives a
    /// crash of the process but not of the machine. PostgreSQL keeps the server's own
    /// durability, which the daemon never lowers.
    pub synchronous: Synchronous,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        Self {
            url: "sqlite:///var/lib/outreach-sync/outreach-sync.db".into(),
            url_file: None,
            synchronous: Synchronous::Full,
        }
    }
}

impl std::fmt::Debug for DatabaseSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseSettings")
            .field("url", &redacted_url(&self.url))
            .field("url_file", &self.url_file)
            .field("synchronous", &self.synchronous)
            .finish()
    }
}

/// The backend `database.url` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// The embedded default: one file, one `serve`.
    Sqlite(PathBuf),
    /// A PostgreSQL server, shared by any number of replicas.
    Postgres,
}

/// `url` with its password, if any, replaced by [`REDACTED`].
pub fn redacted_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(parsed) => match parsed.password() {
            // As written in the URL (percent-encoded), between the user's `:` and the `@`.
            Some(password) => {
                let shown = parsed.to_string();
                shown.replacen(&format!(":{password}@"), &format!(":{REDACTED}@"), 1)
            }
            None => url.to_owned(),
        },
        // Not a URL the redaction can read: show nothing of it past its scheme.
        Err(_) => match url.split_once("://") {
            Some((scheme, rest)) if rest.contains('@') => format!("{scheme}://{REDACTED}"),
            _ => url.to_owned(),
        },
    }
}

fn redact_url<S: Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redacted_url(url))
}

/// `[replica]`: this process among the replicas of one PostgreSQL database.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplicaSettings {
    /// How this replica is listed in `status`; empty: the host name and the process id.
    pub name: String,
    /// How long the leader's lease (and a reconciliation pass's) lasts without renewal; a
    /// dead leader is replaced within two lease periods.
    pub lease_secs: u64,
}

impl ReplicaSettings {
    /// The leader's lease, which a reconciliation pass's leases last too.
    pub fn lease(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.lease_secs)
    }
}

impl Default for ReplicaSettings {
    fn default() -> Self {
        Self {
            name: String::new(),
            lease_secs: 15,
        }
    }
}

/// `[retention]`: how long stored deliveries, and finished messages of the mirror, are kept.
/// The ledger is never pruned, nor a quarantined or unapplied delivery, nor a message the
/// reconciler still looks up.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionSettings {
    /// Days an applied `messageStatus-v1` delivery is kept after its receipt.
    pub message_status_days: u32,
    /// Days an applied consent delivery (the evidence of a webhook ledger entry) is kept
    /// after its receipt: five years by default, past the four a claim can take.
    pub consent_delivery_days: u32,
    /// Days a tracked message with a terminal status stays in the mirror after that status
    /// (its event time, `status_at`); a non-terminal one always stays, and a `sent` one at
    /// least the reconciler's 72-hour receipt window.
    pub messages_days: u32,
}

impl Default for RetentionSettings {
    fn default() -> Self {
        Self {
            message_status_days: 90,
            consent_delivery_days: 1830,
            messages_days: 90,
        }
    }
}

/// SQLite `synchronous` pragma values offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    Full,
    Normal,
}

/// `[ingest]`: the public listener the webhook registrations target.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngestSettings {
    pub bind: String,
    /// Path deliveries are posted to.
    pub path: String,
    /// Larger bodies are refused with 413 without being read further.
    pub max_body_bytes: usize,
    /// Unapplied events above which deliveries are refused with 503 + `Retry-After`.
    pub max_backlog: u64,
}

impl Default for IngestSettings {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:8080".into(),
            path: "/webhooks".into(),
            max_body_bytes: 1024 * 1024,
            max_backlog: 100_000,
        }
    }
}

/// `[webhook]`: how deliveries are verified.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookSettings {
    pub scheme: Scheme,
    /// Every secret accepted; during a rotation the old and the new stand side by side.
    #[serde(serialize_with = "redact_list")]
    pub secrets: Vec<SecretString>,
    /// A file with one secret per line, added to `secrets`.
    pub secrets_file: Option<PathBuf>,
    /// hmac: the header carrying the signature.
    pub header: String,
    pub algorithm: Algorithm,
    pub encoding: Encoding,
    /// hmac: text before the digest in the header, e.g. `sha256=`.
    pub prefix: String,
    /// hmac: when set, the signed content is `{timestamp}.{body}`.
    pub timestamp_header: String,
    /// Largest accepted distance, either way, between a signed timestamp and now.
    pub tolerance_secs: u64,
    /// Ownership validation: every ingest response carries this header ...
    pub confirmation_header: String,
    /// ... with this value.
    pub account_id: String,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            scheme: Scheme::Hmac,
            secrets: Vec::new(),
            secrets_file: None,
            header: "X-Signature".into(),
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
            prefix: String::new(),
            timestamp_header: String::new(),
            tolerance_secs: 300,
            confirmation_header: String::new(),
            account_id: String::new(),
        }
    }
}

/// Signature schemes understood by the ingest endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Scheme {
    Hmac,
    StandardWebhooks,
}

/// HMAC hash functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    Sha1,
    Sha256,
    Sha512,
}

impl Algorithm {
    pub const ALL: [Algorithm; 3] = [Algorithm::Sha256, Algorithm::Sha1, Algorithm::Sha512];

    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Sha1 => "sha1",
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }
}

/// Text encodings of a digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    Hex,
    Base64,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Hex => "hex",
            Encoding::Base64 => "base64",
        }
    }
}

/// `[service]`: the upstream API client.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServiceSettings {
    /// The service's address; paths add `/v3` or `/v2`.
    pub base_url: String,
    pub api_version: ApiVersion,
    pub client_id: String,
    #[serde(serialize_with = "redact_opt")]
    pub client_secret: Option<SecretString>,
    pub client_secret_file: Option<PathBuf>,
    /// Upper bound on requests per second, shared by every task.
    pub requests_per_second: u32,
    pub timeout_secs: u64,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        Self {
            base_url: "https://api.example.org".into(),
            api_version: ApiVersion::V3,
            client_id: "me@example.org".into(),
            client_secret: None,
            client_secret_file: None,
            requests_per_second: 20,
            timeout_secs: 30,
        }
    }
}

/// Upstream API versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApiVersion {
    V3,
    V2,
}

/// `[reconcile]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReconcileSettings {
    /// Cron expression with seconds; empty disables the schedule.
    pub schedule: Schedule,
    pub on_start: bool,
    /// Organizations to scan; empty means every organization of the account.
    pub organizations: Vec<String>,
    pub message_stale_after_secs: u64,
}

impl Default for ReconcileSettings {
    fn default() -> Self {
        Self {
            schedule: Schedule::from("0 */15 * * * *"),
            on_start: true,
            organizations: Vec::new(),
            message_stale_after_secs: 3600,
        }
    }
}

/// `[consent]`
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsentSettings {
    /// A consent change applies to every mirrored lead with the same number.
    pub account_sync: bool,
}

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
}

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

fn redact_list<S: Serializer>(secrets: &[SecretString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(secrets.iter().map(|_| REDACTED))
}

fn redact_opt<S: Serializer>(secret: &Option<SecretString>, s: S) -> Result<S::Ok, S::Error> {
    match secret {
        Some(_) => s.serialize_str(REDACTED),
        None => s.serialize_none(),
    }
}

impl Settings {
    /// The backend `database.url` names.
    pub fn backend(&self) -> Result<Backend, SettingsError> {
        let url = self.database.url.as_str();
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return url
                .parse::<sqlx::postgres::PgConnectOptions>()
                .map(|_| Backend::Postgres)
                .map_err(|_| {
                    SettingsError::invalid(
                        "database.url",
                        format!(
                            "`{}` is not a PostgreSQL URL (postgres://USER@HOST:PORT/DB)",
                            redacted_url(url)
                        ),
                    )
                });
        }
        let rest = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .ok_or_else(|| {
                SettingsError::invalid(
                    "database.url",
                    "must start with `sqlite://` or `postgres://`",
                )
            })?;
        let path = rest.split('?').next().unwrap_or_default();
        if path.is_empty() || path == ":memory:" {
            return Err(SettingsError::invalid(
                "database.url",
                "must name a file: the outbox has to survive a restart",
            ));
        }
        Ok(Backend::Sqlite(PathBuf::from(path)))
    }

    /// The SQLite file named by `database.url`, for what opens a SQLite file itself; an
    /// error naming the key when the URL is a PostgreSQL one.
    pub fn database_path(&self) -> Result<PathBuf, SettingsError> {
        match self.backend()? {
            Backend::Sqlite(path) => Ok(path),
            Backend::Postgres => Err(SettingsError::invalid(
                "database.url",
                "a sqlite:// file is needed here, not a PostgreSQL database",
            )),
        }
    }

    /// The ingest listener address.
    pub fn ingest_bind(&self) -> SocketAddr {
        validate::parse_bind("ingest.bind", &self.ingest.bind)
            .unwrap_or_else(|_| ([127, 0, 0, 1], 8080).into())
    }

    /// The admin listener address.
    pub fn admin_bind(&self) -> SocketAddr {
        validate::parse_bind("admin.bind", &self.admin.bind)
            .unwrap_or_else(|_| ([127, 0, 0, 1], 8081).into())
    }

    /// The effective configuration as TOML, every secret replaced by [`REDACTED`].
    pub fn redacted_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot render configuration: {e}\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn environment_overrides_reach_nested_keys_and_lists() {
        let settings = Settings::load_from(
            None,
            &env(&[
                ("OUTREACH_SYNC__WEBHOOK__SECRETS", "one,two"),
                ("OUTREACH_SYNC__INGEST__MAX_BACKLOG", "7"),
                ("OUTREACH_SYNC__DATABASE__URL", "sqlite:///tmp/x.db"),
            ]),
        )
        .expect("valid");
        assert_eq!(settings.webhook.secrets.len(), 2);
        assert_eq!(settings.webhook.secrets[1].expose_secret(), "two");
        assert_eq!(settings.ingest.max_backlog, 7);
        assert_eq!(
            settings.database_path().unwrap(),
            PathBuf::from("/tmp/x.db")
        );
    }

    #[test]
    fn a_zero_limit_is_refused_naming_its_key() {
        for (var, key) in [
            ("INGEST__MAX_BODY_BYTES", "ingest.max_body_bytes"),
            ("INGEST__MAX_BACKLOG", "ingest.max_backlog"),
            (
                "SERVICE__REQUESTS_PER_SECOND",
                "service.requests_per_second",
            ),
            ("SERVICE__TIMEOUT_SECS", "service.timeout_secs"),
        ] {
            let error = Settings::load_from(
                None,
                &env(&[
                    ("OUTREACH_SYNC__WEBHOOK__SECRETS", "one"),
                    (&format!("OUTREACH_SYNC__{var}"), "0"),
                ]),
            )
            .expect_err("zero is refused");
            assert_eq!(
                error.to_string(),
                format!("invalid configuration key `{key}`: must be positive")
            );
        }
    }

    fn with_database(url: &str) -> Result<Settings, SettingsError> {
        Settings::load_from(
            None,
            &env(&[
                ("OUTREACH_SYNC__WEBHOOK__SECRETS", "one"),
                ("OUTREACH_SYNC__DATABASE__URL", url),
            ]),
        )
    }

    #[test]
    fn a_postgres_url_is_accepted_and_its_password_never_shown() {
        let url = "postgres://sync:s3cr%2Ft@db.example.org:5432/consent";
        let settings = with_database(url).expect("valid");
        assert_eq!(settings.backend().unwrap(), Backend::Postgres);
        let shown = "postgres://sync:[redacted]@db.example.org:5432/consent";
        assert!(settings.redacted_toml().contains(shown));
        let debug = format!("{settings:?}");
        assert!(debug.contains(shown), "{debug}");
        for text in [settings.redacted_toml(), debug] {
            assert!(!text.contains("s3cr"), "{text}");
        }
        let postgresql = with_database("postgresql://sync@db.example.org/consent").unwrap();
        assert_eq!(postgresql.backend().unwrap(), Backend::Postgres);
        assert!(
            postgresql
                .redacted_toml()
                .contains("postgresql://sync@db.example.org/consent")
        );
    }

    #[test]
    fn a_database_url_of_no_known_backend_names_the_key() {
        for url in [
            "mysql://db/consent",
            "/var/lib/x.db",
            "sqlite://",
            "postgres://[::1",
        ] {
            let error = with_database(url).unwrap_err().to_string();
            assert!(error.contains("`database.url`"), "{url}: {error}");
        }
    }

    #[test]
    fn a_lease_too_short_to_renew_names_the_key() {
        let error = Settings::load_from(
            None,
            &env(&[
                ("OUTREACH_SYNC__WEBHOOK__SECRETS", "one"),
                ("OUTREACH_SYNC__REPLICA__LEASE_SECS", "1"),
            ]),
        )
        .unwrap_err();
        assert!(error.to_string().contains("replica.lease_secs"), "{error}");
    }

    #[test]
    fn messages_retention_defaults_to_90_days_shows_and_must_be_positive() {
        let settings = with_database("sqlite:///tmp/x.db").expect("valid");
        assert_eq!(settings.retention.messages_days, 90);
        assert!(settings.redacted_toml().contains("messages_days = 90"));
        let error = Settings::load_from(
            None,
            &env(&[
                ("OUTREACH_SYNC__WEBHOOK__SECRETS", "one"),
                ("OUTREACH_SYNC__RETENTION__MESSAGES_DAYS", "0"),
            ]),
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("retention.messages_days"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_secret_names_the_key() {
        let err = Settings::load_from(None, &[]).unwrap_err();
        assert!(err.to_string().contains("webhook.secrets"), "{err}");
    }

    #[test]
    fn secrets_never_reach_debug_or_the_effective_view() {
        let settings = Settings::load_from(
            None,
            &env(&[
                ("OUTREACH_SYNC__WEBHOOK__SECRETS", "hunter2-webhook"),
                ("OUTREACH_SYNC__SERVICE__CLIENT_SECRET", "hunter2-client"),
                ("OUTREACH_SYNC__ADMIN__TOKENS", "hunter2-admin"),
            ]),
        )
        .expect("valid");
        let debug = format!("{settings:?}");
        let shown = settings.redacted_toml();
        for text in [&debug, &shown] {
            assert!(!text.contains("hunter2"), "{text}");
        }
        assert!(shown.contains(REDACTED));
    }
}
