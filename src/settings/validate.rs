//! Checks of every value that deserialization alone cannot make, each naming the key at
//! fault.

use std::net::SocketAddr;

use secrecy::ExposeSecret;

use super::destinations;
use super::{Scheme, Settings, SettingsError, subscribers, url_with_http_scheme};

impl Settings {
    /// Checks every value that deserialization alone cannot.
    pub fn validate(&self) -> Result<(), SettingsError> {
        self.validate_except_webhook()?;
        if self.account.len() <= 1 {
            return self.validate_webhook();
        }
        // Each account's own `[account.webhook]` and service keys, naming the account.
        for view in self.served() {
            let checked = view
                .validate_webhook()
                .and_then(|()| view.validate_service());
            checked.map_err(|error| match error {
                SettingsError::Invalid { key, message } => SettingsError::Invalid {
                    key,
                    message: format!("account {:?}: {message}", view.account_name()),
                },
                other => other,
            })?;
        }
        Ok(())
    }

    /// Every check of [`Settings::validate`] but `[webhook]`'s.
    pub fn validate_except_webhook(&self) -> Result<(), SettingsError> {
        self.backend()?;
        self.validate_storage()?;
        subscribers::validate(&self.subscriber)?;
        let taken: Vec<&str> = self.subscriber.iter().map(|s| s.name.as_str()).collect();
        destinations::validate(&self.destination, &taken)?;
        self.validate_listeners()?;
        self.validate_service()?;
        self.compliance.validate()?;
        self.validate_log()
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
        if !self.ingest.path.starts_with('/') || self.ingest.path.len() < 2 {
            return Err(SettingsError::invalid(
                "ingest.path",
                "must start with `/` and name a path other than `/`",
            ));
        }
        if matches!(self.ingest.path.as_str(), "/healthz" | "/readyz") {
            return Err(SettingsError::invalid(
                "ingest.path",
                "is reserved for health checks",
            ));
        }
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

    /// `[service]` and `[reconcile]`: what the upstream client and the schedule need.
    fn validate_service(&self) -> Result<(), SettingsError> {
        url_with_http_scheme("service.base_url", &self.service.base_url)?;
        if self.reconcile.schedule.check().is_err() {
            return Err(SettingsError::invalid(
                "reconcile.schedule",
                "not a cron expression with seconds (e.g. \"0 */15 * * * *\"), or \"\" to disable",
            ));
        }
        positive([
            (
                "service.requests_per_second",
                self.service.requests_per_second == 0,
            ),
            ("service.timeout_secs", self.service.timeout_secs == 0),
        ])
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

    fn validate_webhook(&self) -> Result<(), SettingsError> {
        let webhook = &self.webhook;
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
