//! Typed configuration: the TOML file, `OUTREACH_SYNC__SECTION__KEY` overrides, `_file`
//! secrets, validation that names the offending key, and the redacted effective view.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize, Serializer};

mod accounts;
mod admin;
mod callers;
mod compliance;
pub mod destinations;
mod keys;
pub mod kinds;
mod live;
mod load;
mod schedule;
mod scope;
mod service;
pub mod sources;
mod storage;
mod subscribers;
mod urls;
mod validate;

/// What a kind's tests load a configuration with (`validate`'s own helpers).
#[cfg(test)]
pub(crate) mod test_support {
    pub(crate) use super::validate::tests::{load, refused};
}
mod webhook;
pub use accounts::{Account, AccountSettings, DEFAULT_ACCOUNT};
pub use admin::{
    AdminSettings, AdminToken, DEFAULT_FAILED_AUTH_PER_MINUTE, LogFormat, LogSettings,
};
pub use callers::{CallerSettings, REVOKE_ALL_FROM};
pub use compliance::ComplianceSettings;
pub use destinations::{DestinationKeys, DestinationSettings, SystemSettings, keys_of};
pub use keys::standard_webhooks_key;
pub use live::Live;
pub use schedule::Schedule;
pub use scope::{Feed, Scope};
pub use service::{ApiVersion, ConsentSettings, ReconcileSettings, ServiceSettings};
pub use sources::{SourceSettings, SourceSystem};
pub use storage::{
    Backend, DatabaseSettings, ReplicaSettings, RetentionSettings, Synchronous, redacted_url,
};
pub use subscribers::{MAX_BATCH, SubscriberSettings};
pub use validate::{MAX_INGEST_PATH_CHARS, RESERVED_INGEST_PATHS, ingest_path_problem};
pub use webhook::{Algorithm, Encoding, IngestSettings, Scheme, WebhookSettings};

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
    pub compliance: ComplianceSettings,
    /// `[[subscriber]]`: tools every consent ledger entry is pushed to.
    pub subscriber: Vec<SubscriberSettings>,
    /// `[[destination]]`: systems of record every opt-out is written into.
    pub destination: Vec<DestinationSettings>,
    /// `[[source]]`: systems opt-outs given elsewhere are read back from.
    pub source: Vec<SourceSettings>,
    /// `[[account]]`: the accounts of the service served (none: `[service]` is the one).
    pub account: Vec<AccountSettings>,
    /// `[[caller]]`: who a revocation binds (none: each organization is its own caller).
    pub caller: Vec<CallerSettings>,
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

/// The secrets of a `_file` of secrets: one per line, blank lines and `#` comments left out.
fn lines_as_secrets(text: &str) -> impl Iterator<Item = SecretString> + '_ {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| SecretString::from(line.to_owned()))
}

/// The text of a `_file` secret: the path may be relative to systemd's credentials
/// directory. (For the whole file and for each section: here, so that no section imports
/// `load`, which imports the sections.)
fn read_secret_file(key: &'static str, path: &Path) -> Result<String, SettingsError> {
    let resolved = match std::env::var_os("CREDENTIALS_DIRECTORY") {
        Some(dir) if path.is_relative() => Path::new(&dir).join(path),
        _ => path.to_owned(),
    };
    std::fs::read_to_string(&resolved).map_err(|e| {
        SettingsError::invalid(key, format!("cannot read {}: {e}", resolved.display()))
    })
}

/// The non-blank lines of the file at `path` (read as [`read_secret_file`] reads it),
/// each trimmed: a file of keys or passwords one a line, during a rotation the old and the
/// new side by side.
fn read_secret_lines(key: &'static str, path: &Path) -> Result<Vec<String>, SettingsError> {
    let text = read_secret_file(key, path)?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Refuses a URL that is not http(s) with a host, or that holds user-info, naming `key`.
fn url_with_http_scheme(key: &'static str, value: &str) -> Result<(), SettingsError> {
    urls::url(key, "", value, urls::Sends::Nothing)
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
