//! Checks of every value that deserialization alone cannot make, each naming the key at
//! fault.

use std::net::SocketAddr;

use secrecy::ExposeSecret;

use super::destinations;
use super::urls::{Sends, owned, url};
use super::{Scheme, Settings, SettingsError, subscribers, url_with_http_scheme};

impl Settings {
    /// Checks every value that deserialization alone cannot.
    pub fn validate(&self) -> Result<(), SettingsError> {
        self.validate_except_webhook()?;
        if self.account.len() <= 1 {
            return webhook(&self.webhook);
        }
        // Each account's own `[account.webhook]` and service keys, naming the account.
        for account in self.accounts()? {
            let checked = webhook(&account.webhook).and_then(|()| service(&account.service));
            checked.map_err(|error| match error {
                SettingsError::Invalid { key, message } => SettingsError::Invalid {
                    key,
                    message: format!("account {:?}: {message}", account.id.as_str()),
                },
                other => other,
            })?;
        }
        self.refuse_shared_webhook_keys()
    }

    /// Refuses one webhook signing key (as decoded under each account's scheme) in two
    /// accounts: a delivery signed for one would then verify on the other's path, and be
    /// recorded as the other's. Names the accounts, never the secret.
    fn refuse_shared_webhook_keys(&self) -> Result<(), SettingsError> {
        let mut seen: std::collections::HashMap<Vec<u8>, &str> = Default::default();
        for account in &self.account {
            let webhook = &account.webhook;
            let mut own = std::collections::HashSet::new();
            for secret in &webhook.secrets {
                let secret = secret.expose_secret();
                let key = match webhook.scheme {
                    Scheme::Hmac => secret.as_bytes().to_vec(),
                    Scheme::StandardWebhooks => {
                        super::standard_webhooks_key(secret).unwrap_or_default()
                    }
                };
                if !own.insert(key.clone()) {
                    continue;
                }
                if let Some(first) = seen.insert(key, account.name.as_str()) {
                    return Err(SettingsError::invalid(
                        "account.webhook.secrets",
                        format!(
                            "accounts {first:?} and {:?} have the same webhook signing secret: a delivery signed for one would be accepted on the other's path as the other's; give each account its own",
                            account.name
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Every check of [`Settings::validate`] but `[webhook]`'s.
    pub fn validate_except_webhook(&self) -> Result<(), SettingsError> {
        self.backend()?;
        self.validate_storage()?;
        for subscriber in &self.subscriber {
            name("subscriber.name", "subscriber", &subscriber.name)?;
        }
        for destination in &self.destination {
            name("destination.name", "destination", &destination.name)?;
        }
        for source in &self.source {
            name("source.name", "source", &source.name)?;
        }
        subscribers::validate(&self.subscriber)?;
        let taken: Vec<&str> = self.subscriber.iter().map(|s| s.name.as_str()).collect();
        destinations::validate(&self.destination, &taken)?;
        self.validate_listeners()?;
        service(&self.service)?;
        if self.reconcile.schedule.check().is_err() {
            return Err(SettingsError::invalid(
                "reconcile.schedule",
                "not a cron expression with seconds (e.g. \"0 */15 * * * *\"), or \"\" to disable",
            ));
        }
        self.validate_scopes()?;
        self.validate_consent()?;
        super::sources::validate(&self.source, &self.account_ids()?)?;
        self.compliance.validate()?;
        self.callers()?;
        self.validate_log()
    }

    /// `[consent]`'s trust boundary: a region, a tolerance of at most a day.
    fn validate_consent(&self) -> Result<(), SettingsError> {
        if self
            .consent
            .default_region
            .parse::<crate::model::phone::Region>()
            .is_err()
        {
            return Err(SettingsError::invalid(
                "consent.default_region",
                format!(
                    "{} is not a region: two letters (ISO 3166-1 alpha-2, e.g. US) are expected",
                    crate::model::text::quoted(&self.consent.default_region)
                ),
            ));
        }
        if self.consent.future_tolerance_secs > 86_400 {
            return Err(SettingsError::invalid(
                "consent.future_tolerance_secs",
                "at most 86400 (a day): a time further ahead than that is a wrong clock",
            ));
        }
        Ok(())
    }

    /// `[retention]` and `[replica]`.
    fn validate_storage(&self) -> Result<(), SettingsError> {
        for (key, days) in [
            (
                "retention.message_status_days",
                self.retention.message_status_days,
            ),
            (
                "retention.consent_delivery_days",
                self.retention.consent_delivery_days,
            ),
            ("retention.messages_days", self.retention.messages_days),
        ] {
            if days == 0 {
                return Err(SettingsError::invalid(key, "must be at least 1 (a day)"));
            }
        }
        if self.replica.lease_secs < 2 {
            return Err(SettingsError::invalid(
                "replica.lease_secs",
                "must be at least 2 (the lease is renewed three times per period)",
            ));
        }
        Ok(())
    }

    /// `[ingest]` and the admin listener's address.
    fn validate_listeners(&self) -> Result<(), SettingsError> {
        parse_bind("ingest.bind", &self.ingest.bind)?;
        parse_bind("admin.bind", &self.admin.bind)?;
        ingest_path("ingest.path", "", &self.ingest.path)?;
        if !self.ingest.public_url.is_empty() {
            url_with_http_scheme("ingest.public_url", &self.ingest.public_url)?;
        }
        positive([
            ("ingest.max_body_bytes", self.ingest.max_body_bytes == 0),
            ("ingest.max_backlog", self.ingest.max_backlog == 0),
        ])?;
        self.validate_limits()
    }

    /// Both listeners' connection limits: a cap and timeouts of 1 s to an hour.
    fn validate_limits(&self) -> Result<(), SettingsError> {
        let (ingest, admin) = (&self.ingest, &self.admin);
        positive([
            ("ingest.max_connections", ingest.max_connections == 0),
            ("admin.max_connections", admin.max_connections == 0),
            (
                "admin.failed_auth_per_minute",
                admin.failed_auth_per_minute == 0,
            ),
        ])?;
        for (key, secs) in [
            ("ingest.header_timeout_secs", ingest.header_timeout_secs),
            ("ingest.body_timeout_secs", ingest.body_timeout_secs),
            ("ingest.idle_timeout_secs", ingest.idle_timeout_secs),
            ("admin.header_timeout_secs", admin.header_timeout_secs),
            ("admin.body_timeout_secs", admin.body_timeout_secs),
            ("admin.idle_timeout_secs", admin.idle_timeout_secs),
        ] {
            if !(1..=MAX_LISTENER_TIMEOUT_SECS).contains(&secs) {
                return Err(SettingsError::invalid(
                    key,
                    format!("must be from 1 to {MAX_LISTENER_TIMEOUT_SECS} (seconds)"),
                ));
            }
        }
        Ok(())
    }

    fn validate_log(&self) -> Result<(), SettingsError> {
        let level = self.log.level.trim();
        let plain_level = level
            .parse::<tracing_subscriber::filter::LevelFilter>()
            .is_ok();
        // A bare word would be taken as a target name: only accept filters with directives.
        let filter = level.contains('=') && tracing_subscriber::EnvFilter::try_new(level).is_ok();
        if !(plain_level || filter) {
            return Err(SettingsError::invalid(
                "log.level",
                "not a level (error, warn, info, debug, trace) or a tracing filter",
            ));
        }
        Ok(())
    }
}

/// `[service]` (or an account's keys): what the upstream client needs.
fn service(service: &super::ServiceSettings) -> Result<(), SettingsError> {
    let sends = match service.client_secret {
        Some(_) => Sends::Secret {
            allow_insecure_http: service.allow_insecure_http,
        },
        None => Sends::Nothing,
    };
    url("service.base_url", "", &service.base_url, sends)?;
    positive([
        (
            "service.requests_per_second",
            service.requests_per_second == 0,
        ),
        ("service.timeout_secs", service.timeout_secs == 0),
    ])
}

/// `[webhook]` (or an account's): how deliveries are verified.
fn webhook(webhook: &super::WebhookSettings) -> Result<(), SettingsError> {
    if webhook.secrets.is_empty() {
        return Err(SettingsError::invalid(
            "webhook.secrets",
            "at least one secret is required (or webhook.secrets_file)",
        ));
    }
    for secret in &webhook.secrets {
        if secret.expose_secret().is_empty() {
            return Err(SettingsError::invalid(
                "webhook.secrets",
                "a secret is empty",
            ));
        }
        if webhook.scheme == Scheme::StandardWebhooks
            && super::standard_webhooks_key(secret.expose_secret()).is_none()
        {
            return Err(SettingsError::invalid(
                "webhook.secrets",
                "standard-webhooks secrets are base64, optionally prefixed `whsec_`",
            ));
        }
    }
    if webhook.scheme == Scheme::Hmac {
        if http::HeaderName::try_from(webhook.header.as_str()).is_err() {
            return Err(SettingsError::invalid(
                "webhook.header",
                "not a valid header name",
            ));
        }
        if !webhook.timestamp_header.is_empty()
            && http::HeaderName::try_from(webhook.timestamp_header.as_str()).is_err()
        {
            return Err(SettingsError::invalid(
                "webhook.timestamp_header",
                "not a valid header name",
            ));
        }
    }
    if !webhook.confirmation_header.is_empty() {
        if http::HeaderName::try_from(webhook.confirmation_header.as_str()).is_err() {
            return Err(SettingsError::invalid(
                "webhook.confirmation_header",
                "not a valid header name",
            ));
        }
        if webhook.account_id.is_empty()
            || http::HeaderValue::try_from(webhook.account_id.as_str()).is_err()
        {
            return Err(SettingsError::invalid(
                "webhook.account_id",
                "required (as a valid header value) when webhook.confirmation_header is set",
            ));
        }
    }
    Ok(())
}

/// Longest a listener's timeout may be set to: an hour.
const MAX_LISTENER_TIMEOUT_SECS: u64 = 3600;

/// An error naming the first key whose value is zero, of `(key, is zero)` pairs.
fn positive<const N: usize>(keys: [(&'static str, bool); N]) -> Result<(), SettingsError> {
    match keys.into_iter().find(|(_, zero)| *zero) {
        Some((key, _)) => Err(SettingsError::invalid(key, "must be positive")),
        None => Ok(()),
    }
}

pub(super) fn parse_bind(key: &'static str, value: &str) -> Result<SocketAddr, SettingsError> {
    value
        .parse()
        .map_err(|_| SettingsError::invalid(key, format!("`{value}` is not an IP:port address")))
}

/// Longest ingest path: an account's default is `/webhooks/` and its name (at most
/// [`MAX_ID_CHARS`](crate::model::MAX_ID_CHARS) characters).
pub const MAX_INGEST_PATH_CHARS: usize = 256;

/// The paths of the ingest listener that no account's deliveries may take: its root, its
/// health checks, and everything under `/sources`, where a source's own webhooks come in
/// (`POST /sources/{name}`, e.g. Twilio's).
pub const RESERVED_INGEST_PATHS: &[&str] = &["/", "/healthz", "/readyz", "/sources"];

/// What is wrong with `path` as the path an account's deliveries are posted to, or `None`.
///
/// A path is routed by the listener exactly as written and must reach it as written: `/`
/// then segments of unreserved ASCII characters (`A-Z a-z 0-9 . _ ~ -`), none empty, none
/// `.` or `..`. So no `{`, `}`, `:` or `*` (which the router would take as parameters or
/// wildcards, or refuse by panicking), no percent-encoding and no other character (which a
/// client sends encoded, and so never matches), and not a path of [`RESERVED_INGEST_PATHS`].
/// The one rule of the settings and of the router ([`crate::ingest::router`]).
pub fn ingest_path_problem(path: &str) -> Option<String> {
    let shown = crate::model::text::quoted(path);
    if path.chars().count() > MAX_INGEST_PATH_CHARS {
        return Some(format!(
            "{shown} is longer than {MAX_INGEST_PATH_CHARS} characters"
        ));
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Some(format!("{shown} does not start with `/`"));
    };
    let first = rest.split('/').next().unwrap_or_default();
    if path == "/" || RESERVED_INGEST_PATHS.contains(&path) || first == "sources" {
        return Some(format!(
            "{shown} is reserved: the listener's root `/`, its health checks `/healthz` and `/readyz`, and `/sources/...`, where sources' own webhooks come in"
        ));
    }
    for segment in rest.split('/') {
        if segment.is_empty() {
            return Some(format!(
                "{shown} has an empty segment (`//` or a trailing `/`)"
            ));
        }
        if matches!(segment, "." | "..") {
            return Some(format!(
                "{shown} has a `{segment}` segment, which a client resolves before sending"
            ));
        }
        if let Some(c) = segment.chars().find(|&c| !unreserved(c)) {
            let why = match c {
                '{' | '}' | ':' | '*' => "the router would take it as a parameter or wildcard",
                '%' => "percent-encoding is not decoded before routing",
                _ => "a client sends it percent-encoded, so no delivery would match",
            };
            return Some(format!(
                "{shown} holds `{}`: {why}; a path is `/` and segments of A-Z, a-z, 0-9, `.`, `_`, `~` and `-`",
                crate::model::text::escape_controls(&c.to_string())
            ));
        }
    }
    None
}

/// An unreserved character of RFC 3986: one a client sends in a path as it is.
fn unreserved(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '-')
}

/// Refuses `path` under `key` (`owner`, e.g. `account "party"`, begins the message).
pub(super) fn ingest_path(key: &'static str, owner: &str, path: &str) -> Result<(), SettingsError> {
    match ingest_path_problem(path) {
        Some(problem) => Err(SettingsError::invalid(key, owned(owner, &problem))),
        None => Ok(()),
    }
}

/// Refuses a name (of an account, subscriber, destination or source) that is not one or
/// more of a-z, 0-9, `_` and `-`, or is longer than an id may be (`accountId=` and the
/// other ids the daemon takes: [`MAX_ID_CHARS`](crate::model::MAX_ID_CHARS)); `kind` is
/// `account`, `subscriber`...
pub(super) fn name(key: &'static str, kind: &str, name: &str) -> Result<(), SettingsError> {
    let max = crate::model::MAX_ID_CHARS;
    let shown = crate::model::text::quoted(name);
    if name.chars().count() > max {
        return Err(SettingsError::invalid(
            key,
            format!("{kind} {shown}: a name is at most {max} characters"),
        ));
    }
    if !crate::model::well_formed_name(name) {
        return Err(SettingsError::invalid(
            key,
            format!("{kind} {shown}: a name is one or more of a-z, 0-9, `_` and `-`"),
        ));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
