//! `[[account]]`: the accounts of the service this daemon serves, each with its own keys,
//! its own webhook verification, its own ingest path and its own organizations.
//!
//! A configuration without `[[account]]` is one account named [`DEFAULT_ACCOUNT`], made of
//! `[service]`, `[webhook]`, `ingest.path`, `ingest.public_url` and
//! `reconcile.organizations`, exactly as before accounts existed. Each account served is
//! built once into an [`Account`] ([`Settings::accounts`]): its name, its keys, its webhook,
//! its paths and its organizations, which everything that talks to one account (the ingest
//! route, the client, the reconciler, the pusher, the registrations) is given. The settings
//! themselves hold the first account's keys in those sections, so a lone `[[account]]`
//! reads as the sections it replaces.

use super::urls::Sends;
use super::*;

use crate::model::AccountId;
pub use crate::model::DEFAULT_ACCOUNT;

/// `[[account]]`: one account of the service.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccountSettings {
    /// `[a-z0-9_-]+`: every record will say which account it is of.
    pub name: String,
    /// Where this account's deliveries are posted; empty: `/webhooks/{name}`.
    pub ingest_path: String,
    /// As `ingest.public_url`, for this account's registrations.
    pub public_url: String,
    // The keys of `[service]`, this account's own: written out rather than a flattened
    // `ServiceSettings`, because serde cannot refuse unknown keys through `flatten`.
    pub base_url: String,
    pub api_version: Option<ApiVersion>,
    pub client_id: String,
    #[serde(serialize_with = "redact_opt")]
    pub client_secret: Option<SecretString>,
    pub client_secret_file: Option<PathBuf>,
    /// Empty: `[service]`'s default.
    pub requests_per_second: Option<u32>,
    pub timeout_secs: Option<u64>,
    /// As `service.allow_insecure_http`, for this account's `base_url`.
    pub allow_insecure_http: bool,
    /// `[account.webhook]`: how this account's deliveries are verified.
    pub webhook: WebhookSettings,
    /// Organizations to reconcile; empty: every organization of the account.
    pub organizations: Vec<String>,
}

impl AccountSettings {
    /// The path this account's deliveries are posted to.
    pub fn ingest_path(&self) -> String {
        if self.ingest_path.is_empty() {
            format!("/webhooks/{}", self.name)
        } else {
            self.ingest_path.clone()
        }
    }

    /// This account's `[service]`.
    pub fn service(&self) -> ServiceSettings {
        let defaults = ServiceSettings::default();
        ServiceSettings {
            base_url: self.base_url.clone(),
            api_version: self.api_version.unwrap_or(defaults.api_version),
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            client_secret_file: self.client_secret_file.clone(),
            requests_per_second: self
                .requests_per_second
                .unwrap_or(defaults.requests_per_second),
            timeout_secs: self.timeout_secs.unwrap_or(defaults.timeout_secs),
            allow_insecure_http: self.allow_insecure_http,
        }
    }
}

/// `name` as an account's, or the error that names `account.name`.
fn account_id(name: &str) -> Result<AccountId, SettingsError> {
    AccountId::new(name).map_err(|error| SettingsError::invalid("account.name", error.to_string()))
}

/// Reads each account's `client_secret_file` and `webhook.secrets_file`.
pub(super) fn read_secret_files(accounts: &mut [AccountSettings]) -> Result<(), SettingsError> {
    for account in accounts {
        if let Some(path) = &account.client_secret_file {
            let text = read_secret_file("account.client_secret_file", path)?;
            account.client_secret = Some(SecretString::from(text.trim().to_owned()));
        }
        if let Some(path) = &account.webhook.secrets_file {
            let text = read_secret_file("account.webhook.secrets_file", path)?;
            account.webhook.secrets.extend(lines_as_secrets(&text));
        }
    }
    Ok(())
}

/// The sections and keys given (in the file or the environment) that a configuration with
/// `[[account]]` does not read, because each account has its own.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct GivenBeside {
    /// `[service]`: the account's own keys.
    pub service: bool,
    /// `[webhook]`: the account's `[account.webhook]`.
    pub webhook: bool,
    /// `ingest.path`: the account's `ingest_path`.
    pub ingest_path: bool,
    /// `ingest.public_url`: read for a lone account without its own `public_url` only.
    pub ingest_public_url: bool,
    /// `reconcile.organizations`: the account's `organizations`.
    pub reconcile_organizations: bool,
}

/// Well-formed, distinct names, ingest paths and public URLs, and each account's keys;
/// `given`: which sections the accounts replace were written too (none may be).
pub(super) fn validate(
    accounts: &[AccountSettings],
    given: GivenBeside,
) -> Result<(), SettingsError> {
    if accounts.is_empty() {
        return Ok(());
    }
    refuse_unread(accounts, given)?;
    let mut names = std::collections::HashSet::new();
    let mut paths = std::collections::HashSet::new();
    let mut urls = std::collections::HashSet::new();
    for account in accounts {
        super::validate::name("account.name", "account", &account.name)?;
        let owner = format!("account {:?}", account.name);
        let named = |message: &str| format!("{owner}: {message}");
        if !names.insert(account.name.as_str()) {
            return Err(SettingsError::invalid(
                "account.name",
                named("two accounts have this name"),
            ));
        }
        let path = account.ingest_path();
        super::validate::ingest_path("account.ingest_path", &owner, &path)?;
        if !paths.insert(path) {
            return Err(SettingsError::invalid(
                "account.ingest_path",
                named("another account's deliveries come in on this path"),
            ));
        }
        if !account.public_url.is_empty() {
            let public = &account.public_url;
            super::urls::url("account.public_url", &owner, public, Sends::Nothing)?;
            if !urls.insert(public.as_str()) {
                return Err(SettingsError::invalid(
                    "account.public_url",
                    named("another account has this public URL"),
                ));
            }
        }
        let sends = Sends::Secret {
            allow_insecure_http: account.allow_insecure_http,
        };
        super::urls::url("account.base_url", &owner, &account.base_url, sends)?;
        if account.client_id.is_empty() {
            return Err(SettingsError::invalid(
                "account.client_id",
                named("required: each account has its own credentials"),
            ));
        }
        if account.client_secret.is_none() {
            return Err(SettingsError::invalid(
                "account.client_secret",
                named(
                    "required (or account.client_secret_file): each account has its own credentials",
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses what `[[account]]` replaces, given beside it: it would be silently unread.
fn refuse_unread(accounts: &[AccountSettings], given: GivenBeside) -> Result<(), SettingsError> {
    // A lone account without a public URL of its own takes `ingest.public_url`.
    let public_url_unread = accounts.len() > 1 || !accounts[0].public_url.is_empty();
    let unread = [
        (
            given.service,
            "service",
            "[service] (or an OUTREACH_SYNC__SERVICE__* variable) and [[account]] cannot both be given: an account's keys go in its own [[account]] section",
        ),
        (
            given.webhook,
            "webhook",
            "[webhook] (or an OUTREACH_SYNC__WEBHOOK__* variable) is not read beside [[account]]: each account's signing secrets and scheme go in its own [account.webhook] table",
        ),
        (
            given.ingest_path,
            "ingest.path",
            "is not read beside [[account]]: each account's deliveries come in on its own `ingest_path` (default \"/webhooks/{name}\")",
        ),
        (
            given.ingest_public_url && public_url_unread,
            "ingest.public_url",
            "is not read beside several [[account]] tables (nor one with its own): each account's registrations target its own `public_url`",
        ),
        (
            given.reconcile_organizations,
            "reconcile.organizations",
            "is not read beside [[account]]: each account's organizations to reconcile are its own `organizations`",
        ),
    ];
    match unread.into_iter().find(|(given, _, _)| *given) {
        Some((_, key, message)) => Err(SettingsError::invalid(key, message)),
        None => Ok(()),
    }
}

/// One account served, built once from the settings ([`Settings::accounts`]): what
/// everything that talks to one account needs (the ingest route, the client, the
/// reconciler, the pusher, the registrations), and nothing of the other accounts.
#[derive(Debug, Clone)]
pub struct Account {
    pub id: AccountId,
    /// Its `[service]`: the keys its client authenticates with.
    pub service: ServiceSettings,
    /// Its `[webhook]`: how its deliveries are verified and its registrations signed.
    pub webhook: WebhookSettings,
    /// Where its deliveries are posted.
    pub ingest_path: String,
    /// Where its registrations point; empty: not configured.
    pub public_url: String,
    /// Organizations to reconcile; empty: every organization of the account.
    pub organizations: Vec<String>,
}

impl Settings {
    /// The name of the account this daemon serves (the first).
    pub fn account_name(&self) -> &str {
        self.account
            .first()
            .map_or(DEFAULT_ACCOUNT, |a| a.name.as_str())
    }

    /// The accounts served, in the order written: each `[[account]]` with its own keys (a
    /// lone one as the sections it was put in, [`Settings::take_account`]), or without
    /// `[[account]]` the account `default` made of `[service]`, `[webhook]`, `ingest.path`,
    /// `ingest.public_url` and `reconcile.organizations`. An error names an ill-formed name.
    pub fn accounts(&self) -> Result<Vec<Account>, SettingsError> {
        let of_sections = |id| Account {
            id,
            service: self.service.clone(),
            webhook: self.webhook.clone(),
            ingest_path: self.ingest.path.clone(),
            public_url: self.ingest.public_url.clone(),
            organizations: self.reconcile.organizations.clone(),
        };
        if self.account.len() <= 1 {
            return Ok(vec![of_sections(self.account_id()?)]);
        }
        self.account
            .iter()
            .map(|account| {
                let public_url = if account.public_url.is_empty() {
                    self.ingest.public_url.clone()
                } else {
                    account.public_url.clone()
                };
                Ok(Account {
                    id: account_id(&account.name)?,
                    service: account.service(),
                    webhook: account.webhook.clone(),
                    ingest_path: account.ingest_path(),
                    public_url,
                    organizations: account.organizations.clone(),
                })
            })
            .collect()
    }

    /// The account this daemon serves first: the one changes are made in by default.
    pub fn account_id(&self) -> Result<AccountId, SettingsError> {
        account_id(self.account_name())
    }

    /// The accounts served, in the order written (`default` without `[[account]]`).
    pub fn account_ids(&self) -> Result<Vec<AccountId>, SettingsError> {
        match self.account.as_slice() {
            [] => Ok(vec![AccountId::default_account()]),
            accounts => accounts.iter().map(|a| account_id(&a.name)).collect(),
        }
    }

    /// Puts the first `[[account]]`'s keys where `[service]`, `[webhook]`, `[ingest]` and
    /// `[reconcile]` keep them, so that a lone account is served as those sections would be
    /// (and `[webhook]`'s checks are its webhook's). Done once the accounts are checked
    /// ([`validate`]).
    pub(super) fn take_account(&mut self) {
        let Some(account) = self.account.first() else {
            return;
        };
        self.service = account.service();
        self.webhook = account.webhook.clone();
        self.ingest.path = account.ingest_path();
        if !account.public_url.is_empty() {
            self.ingest.public_url = account.public_url.clone();
        }
        self.reconcile.organizations = account.organizations.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` loaded as the configuration file, with nothing from the environment.
    fn load(text: &str) -> Result<Settings, SettingsError> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).expect("write the file");
        Settings::load_from(Some(&path), &[])
    }

    fn account(name: &str, extra: &str) -> String {
        format!(
            "[[account]]\nname = {name:?}\nbase_url = \"https://api.example.org\"\nclient_id = \"{name}@example.org\"\nclient_secret = \"TOPSECRET-{name}\"\n{extra}\n[account.webhook]\nsecrets = [\"whsec-{name}\"]\n\n"
        )
    }

    fn refused(text: &str) -> String {
        let error = load(text).expect_err("refused").to_string();
        assert!(!error.contains("TOPSECRET"), "{error}");
        error
    }

    #[test]
    fn without_accounts_the_one_account_is_the_default_made_of_the_sections() {
        let settings = load("[webhook]\nsecrets = [\"s\"]\n").expect("loads");
        assert_eq!(settings.account_name(), DEFAULT_ACCOUNT);
        assert_eq!(settings.ingest.path, "/webhooks");
    }

    #[test]
    fn one_account_is_served_on_its_own_path_with_its_own_keys_and_secrets() {
        let settings = load(&account(
            "party",
            "organizations = [\"org_9\"]\npublic_url = \"https://hooks.example.org/webhooks/party\"\nrequests_per_second = 7",
        ))
        .expect("loads");
        assert_eq!(settings.account_name(), "party");
        assert_eq!(settings.ingest.path, "/webhooks/party");
        assert_eq!(
            settings.ingest.public_url,
            "https://hooks.example.org/webhooks/party"
        );
        assert_eq!(settings.service.client_id, "party@example.org");
        assert_eq!(settings.service.requests_per_second, 7);
        assert_eq!(settings.service.timeout_secs, 30, "[service]'s default");
        assert_eq!(
            settings
                .service
                .client_secret
                .as_ref()
                .map(|s| s.expose_secret().to_owned()),
            Some("TOPSECRET-party".to_owned())
        );
        assert_eq!(settings.webhook.secrets.len(), 1);
        assert_eq!(settings.reconcile.organizations, ["org_9"]);
        let shown = format!("{settings:?}");
        assert!(!shown.contains("TOPSECRET"), "{shown}");
    }

    #[test]
    fn service_and_an_account_together_are_refused_naming_service() {
        let error = refused(&format!(
            "[service]\nclient_id = \"x\"\n\n{}",
            account("party", "")
        ));
        assert!(error.contains("`service`"), "{error}");
    }

    #[test]
    fn an_account_without_its_credentials_is_refused_naming_the_key() {
        let text = account("party", "").replace("client_secret = \"TOPSECRET-party\"\n", "");
        let error = refused(&text);
        assert!(error.contains("account.client_secret"), "{error}");
        assert!(error.contains("\"party\""), "{error}");
    }

    #[test]
    fn two_accounts_with_one_name_path_or_public_url_are_refused_naming_the_key() {
        let error = refused(&(account("party", "") + &account("party", "")));
        assert!(error.contains("account.name"), "{error}");
        // The second account's default path is the first one's explicit path.
        let error = refused(
            &(account("party", "ingest_path = \"/webhooks/candidate\"")
                + &account("candidate", "")),
        );
        assert!(error.contains("account.ingest_path"), "{error}");
        let url = "public_url = \"https://hooks.example.org/in\"";
        let error = refused(&(account("party", url) + &account("candidate", url)));
        assert!(error.contains("account.public_url"), "{error}");
        let error = refused(&account("Party Two", ""));
        assert!(error.contains("account.name"), "{error}");
    }

    #[test]
    fn several_accounts_are_each_served_with_their_own_keys_path_and_secrets() {
        let settings = load(&(account("party", "") + &account("candidate", ""))).expect("valid");
        settings.validate().expect("valid");
        let served: Vec<(String, String, String, String)> = settings
            .accounts()
            .expect("well-formed names")
            .iter()
            .map(|account| {
                (
                    account.id.to_string(),
                    account.ingest_path.clone(),
                    account.service.client_id.clone(),
                    account.webhook.secrets[0].expose_secret().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            served,
            [
                (
                    "party".to_owned(),
                    "/webhooks/party".to_owned(),
                    "party@example.org".to_owned(),
                    "whsec-party".to_owned()
                ),
                (
                    "candidate".to_owned(),
                    "/webhooks/candidate".to_owned(),
                    "candidate@example.org".to_owned(),
                    "whsec-candidate".to_owned()
                ),
            ]
        );
        // A second account without a webhook secret is refused, naming it.
        let without = account("party", "")
            + "[[account]]\nname = \"candidate\"\nbase_url = \"https://api.example.org\"\nclient_id = \"c\"\nclient_secret = \"s\"\n";
        let error = load(&without).expect_err("refused").to_string();
        assert!(
            error.contains("webhook.secrets") && error.contains("candidate"),
            "{error}"
        );
    }
}
