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
        subscribers::validate(&self.subscriber)?;
        let taken: Vec<&str> = self.subscriber.iter().map(|s| s.name.as_str()).collect();
        destinations::validate(&self.destination, &taken)?;
        self.validate_listeners()?;
        self.validate_service()?;
        self.validate_scopes()?;
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

    /// `[service]` and `[reconcile]`: what the upstream client and the schedule need.
    fn validate_service(&self) -> Result<(), SettingsError> {
        let sends = match self.service.client_secret {
            Some(_) => Sends::Secret {
                allow_insecure_http: self.service.allow_insecure_http,
            },
            None => Sends::Nothing,
        };
        url("service.base_url", "", &self.service.base_url, sends)?;
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
    if !super::subscribers::well_formed_name(name) {
        return Err(SettingsError::invalid(
            key,
            format!("{kind} {shown}: a name is one or more of a-z, 0-9, `_` and `-`"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` loaded as the configuration file, with `env` as the environment.
    fn load_with(text: &str, env: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).expect("write the file");
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::load_from(Some(&path), &env)
    }

    fn load(text: &str) -> Result<Settings, SettingsError> {
        load_with(text, &[])
    }

    /// An `[[account]]` named `name` with `extra` keys and its own webhook secret.
    fn account(name: &str, extra: &str) -> String {
        account_signed(name, extra, &[&format!("whsec-{name}")])
    }

    /// An `[[account]]` whose `[account.webhook]` has `secrets`.
    fn account_signed(name: &str, extra: &str, secrets: &[&str]) -> String {
        format!(
            "[[account]]\nname = {name:?}\nbase_url = \"https://api.example.org\"\nclient_id = \"{name}@example.org\"\nclient_secret = \"TOPSECRET-{name}\"\n{extra}\n[account.webhook]\nsecrets = {secrets:?}\n\n"
        )
    }

    /// The error loading `text` gives, which must name `key` and quote no secret.
    fn refused(text: &str, key: &str) -> String {
        let error = load(text).expect_err("refused").to_string();
        assert!(error.contains(&format!("`{key}`")), "{key}: {error}");
        for secret in ["TOPSECRET", "hunter2"] {
            assert!(!error.contains(secret), "{error}");
        }
        error
    }

    const WEBHOOK: &str = "[webhook]\nsecrets = [\"s\"]\n";

    #[test]
    fn ingest_paths_the_router_cannot_take_or_a_client_cannot_reach_are_refused_naming_the_key() {
        for path in [
            "/webhooks/:x",
            "/webhooks/{",
            "/webhooks/{x}",
            "/webhooks/{*rest}",
            "/webhooks/*",
            "/webhooks/café",
            "/webhooks/a%20b",
            "/webhooks/a b",
            "/webhooks//x",
            "/webhooks/",
            "/webhooks/../x",
            "webhooks",
            "/",
            "/healthz",
            "/readyz",
            "/sources",
            "/sources/twilio-main",
        ] {
            let error = refused(
                &account("party", &format!("ingest_path = {path:?}")),
                "account.ingest_path",
            );
            assert!(error.contains("account \"party\""), "{path}: {error}");
            let error = refused(
                &format!("{WEBHOOK}[ingest]\npath = {path:?}\n"),
                "ingest.path",
            );
            assert!(!error.contains("account \""), "{path}: {error}");
        }
        let long = format!("/{}", "a".repeat(MAX_INGEST_PATH_CHARS));
        refused(
            &format!("{WEBHOOK}[ingest]\npath = {long:?}\n"),
            "ingest.path",
        );
        // Two parameters the router would take as one route (it panicked).
        refused(
            &(account("party", "ingest_path = \"/webhooks/{a}\"")
                + &account("candidate", "ingest_path = \"/webhooks/{b}\"")),
            "account.ingest_path",
        );
        // The second account may not take what the first may not.
        for path in ["/healthz", "/", "/readyz", "/sources/twilio-main"] {
            let error = refused(
                &(account("party", "") + &account("candidate", &format!("ingest_path = {path:?}"))),
                "account.ingest_path",
            );
            assert!(error.contains("\"candidate\""), "{error}");
        }
        // What a client sends as it is routes.
        let settings = load(
            &(account("party", "ingest_path = \"/hooks/Party.v1~x_y-z\"") + &account("b", "")),
        )
        .expect("a path of unreserved characters");
        assert_eq!(settings.served()[0].ingest.path, "/hooks/Party.v1~x_y-z");
    }

    #[test]
    fn a_name_longer_than_an_id_is_refused_for_accounts_subscribers_and_destinations() {
        let long = "a".repeat(5_000);
        let error = refused(&account(&long, ""), "account.name");
        assert!(error.contains("at most 200 characters"), "{error}");
        assert!(error.len() < 400, "the name is quoted bounded: {error}");
        let at_most = "a".repeat(crate::model::MAX_ID_CHARS);
        load(&account(&at_most, "")).expect("200 characters is an id");
        let subscriber = format!(
            "{WEBHOOK}[[subscriber]]\nname = {long:?}\nurl = \"https://crm.example.org/hooks\"\nsecret = \"whsec_c2VjcmV0\"\n"
        );
        refused(&subscriber, "subscriber.name");
        let destination = format!(
            "{WEBHOOK}[[destination]]\nname = {long:?}\nkind = \"action_network\"\nbase_url = \"https://actionnetwork.org/api/v2\"\napi_key = \"k\"\n"
        );
        refused(&destination, "destination.name");
    }

    #[test]
    fn one_webhook_secret_in_two_accounts_is_refused_naming_both_never_the_secret() {
        let error = refused(
            &(account_signed("party", "", &["TOPSECRET-shared"])
                + &account_signed("candidate", "", &["TOPSECRET-shared"])),
            "account.webhook.secrets",
        );
        assert!(
            error.contains("\"party\"") && error.contains("\"candidate\""),
            "{error}"
        );
        // The same key, once as HMAC text and once as a Standard Webhooks secret.
        let candidate = account_signed("candidate", "", &["whsec_VE9QU0VDUkVULXNoYXJlZA=="])
            .replace(
                "[account.webhook]\n",
                "[account.webhook]\nscheme = \"standard-webhooks\"\n",
            );
        refused(
            &(account_signed("party", "", &["TOPSECRET-shared"]) + &candidate),
            "account.webhook.secrets",
        );
        // A rotation keeps two secrets in one account: that is no sharing.
        load(
            &(account_signed("party", "", &["one", "two", "one"])
                + &account_signed("candidate", "", &["three"])),
        )
        .expect("each account its own secrets");
    }

    #[test]
    fn sections_a_configuration_with_accounts_does_not_read_are_refused_saying_where_they_go() {
        let error = refused(&format!("{WEBHOOK}{}", account("party", "")), "webhook");
        assert!(error.contains("[account.webhook]"), "{error}");
        let error = refused(
            &format!("[ingest]\npath = \"/webhooks\"\n{}", account("party", "")),
            "ingest.path",
        );
        assert!(error.contains("ingest_path"), "{error}");
        let error = refused(
            &format!(
                "[reconcile]\norganizations = [\"org_1\"]\n{}",
                account("party", "")
            ),
            "reconcile.organizations",
        );
        assert!(error.contains("`organizations`"), "{error}");
        let public = "[ingest]\npublic_url = \"https://hooks.example.org/in\"\n";
        let error = refused(
            &format!("{public}{}{}", account("party", ""), account("b", "")),
            "ingest.public_url",
        );
        assert!(error.contains("`public_url`"), "{error}");
        // A lone account without its own public URL reads it, as before.
        let settings = load(&format!("{public}{}", account("party", ""))).expect("read");
        assert_eq!(settings.ingest.public_url, "https://hooks.example.org/in");
        // From the environment too (a systemd unit's Environment= line).
        let error = load_with(
            &account("party", ""),
            &[("OUTREACH_SYNC__WEBHOOK__SECRETS", "hunter2")],
        )
        .expect_err("refused")
        .to_string();
        assert!(error.contains("`webhook`"), "{error}");
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[test]
    fn credentials_over_plain_http_to_a_host_not_loopback_are_refused_unless_allowed() {
        let service = |url: &str, extra: &str| {
            format!(
                "{WEBHOOK}[service]\nbase_url = {url:?}\nclient_secret = \"TOPSECRET\"\n{extra}\n"
            )
        };
        let error = refused(&service("http://api.example.org", ""), "service.base_url");
        assert!(error.contains("allow_insecure_http"), "{error}");
        load(&service(
            "http://api.example.org",
            "allow_insecure_http = true",
        ))
        .expect("allowed");
        for loopback in [
            "http://127.0.0.1:9090",
            "http://localhost:9090",
            "http://[::1]:9",
        ] {
            load(&service(loopback, "")).expect(loopback);
        }
        // Without a client secret nothing secret goes there.
        load(&format!(
            "{WEBHOOK}[service]\nbase_url = \"http://api.example.org\"\n"
        ))
        .expect("no secret");

        let error = refused(
            &account("party", "").replace("https://api.example.org", "http://api.example.org"),
            "account.base_url",
        );
        assert!(error.contains("\"party\""), "{error}");
        load(
            &account("party", "allow_insecure_http = true")
                .replace("https://api.example.org", "http://api.example.org"),
        )
        .expect("allowed for the account");

        let destination = |extra: &str| {
            format!(
                "{WEBHOOK}[[destination]]\nname = \"an\"\nkind = \"action_network\"\nbase_url = \"http://actionnetwork.org/api/v2\"\napi_key = \"TOPSECRET\"\n{extra}\n"
            )
        };
        refused(&destination(""), "destination.base_url");
        load(&destination("allow_insecure_http = true")).expect("allowed");
        let subscriber = |extra: &str| {
            format!(
                "{WEBHOOK}[[subscriber]]\nname = \"crm\"\nurl = \"http://crm.example.org/hooks\"\nsecret = \"whsec_c2VjcmV0\"\n{extra}\n"
            )
        };
        refused(&subscriber(""), "subscriber.url");
        load(&subscriber("allow_insecure_http = true")).expect("allowed");
    }

    #[test]
    fn user_info_in_any_configured_url_is_refused_without_being_shown() {
        let with_user = "https://van:TOPSECRET@api.securevan.com/v4";
        refused(
            &format!(
                "{WEBHOOK}[[destination]]\nname = \"van\"\nkind = \"van\"\nbase_url = {with_user:?}\napi_key = \"k\"\n"
            ),
            "destination.base_url",
        );
        refused(
            &format!(
                "{WEBHOOK}[[subscriber]]\nname = \"crm\"\nurl = {with_user:?}\nsecret = \"whsec_c2VjcmV0\"\n"
            ),
            "subscriber.url",
        );
        refused(
            &format!("{WEBHOOK}[service]\nbase_url = {with_user:?}\n"),
            "service.base_url",
        );
        refused(
            &format!("{WEBHOOK}[ingest]\npublic_url = {with_user:?}\n"),
            "ingest.public_url",
        );
        refused(
            &account("party", &format!("public_url = {with_user:?}")),
            "account.public_url",
        );
        refused(
            &account("party", "")
                .replace("https://api.example.org", "https://party@api.example.org"),
            "account.base_url",
        );
        // Nor when the URL is not one at all.
        refused(
            &format!("{WEBHOOK}[service]\nbase_url = \"ftp://me:TOPSECRET@host/x\"\n"),
            "service.base_url",
        );
    }
}
