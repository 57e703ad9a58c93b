//! Where settings come from: the TOML file, `OUTREACH_SYNC__SECTION__KEY` overrides, then
//! `_file` secrets (relative paths under systemd's credentials directory).

use std::path::{Path, PathBuf};

use secrecy::SecretString;

use super::{DEFAULT_CONFIG_PATH, Settings, SettingsError, subscribers};

/// Prefix of environment overrides: `OUTREACH_SYNC__DATABASE__URL`.
const ENV_PREFIX: &str = "OUTREACH_SYNC";
/// Keys whose environment value is a comma-separated list.
const LIST_KEYS: &[&str] = &["webhook.secrets", "admin.tokens", "reconcile.organizations"];

impl Settings {
    /// Loads the file named on the command line, or the default path if it exists, or only
    /// the built-in defaults; then the environment; then `_file` secrets; then validates.
    pub fn load(explicit: Option<&Path>) -> Result<Self, SettingsError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        Self::load_from(explicit, &env)
    }

    /// [`Settings::load`] for commands that never see a webhook (reading the ledger,
    /// reconciling, local changes): `[webhook]` need not be configured for them.
    pub fn load_without_webhook(explicit: Option<&Path>) -> Result<Self, SettingsError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        let settings = Self::load_unvalidated(explicit, &env)?;
        settings.validate_except_webhook()?;
        Ok(settings)
    }

    /// [`Settings::load`] with the environment given, for tests.
    pub fn load_from(
        explicit: Option<&Path>,
        env: &[(String, String)],
    ) -> Result<Self, SettingsError> {
        let settings = Self::load_unvalidated(explicit, env)?;
        settings.validate()?;
        Ok(settings)
    }

    /// Loads and reads `_file` secrets, but leaves validation to the caller (for commands
    /// that supply a missing value themselves, such as `sign --secret`).
    pub fn load_unvalidated(
        explicit: Option<&Path>,
        env: &[(String, String)],
    ) -> Result<Self, SettingsError> {
        let file = match explicit {
            Some(path) if !path.exists() => {
                return Err(SettingsError::File {
                    path: path.to_owned(),
                    message: "no such file".into(),
                });
            }
            Some(path) => Some(path.to_owned()),
            None => Some(PathBuf::from(DEFAULT_CONFIG_PATH)).filter(|p| p.exists()),
        };
        let mut builder = config::Config::builder();
        if let Some(path) = &file {
            builder = builder.add_source(
                config::File::from(path.as_path())
                    .format(config::FileFormat::Toml)
                    .required(true),
            );
        }
        let mut environment = config::Environment::with_prefix(ENV_PREFIX)
            .prefix_separator("__")
            .separator("__")
            .try_parsing(true)
            .list_separator(",")
            .source(Some(env.iter().cloned().collect()));
        for key in LIST_KEYS {
            environment = environment.with_list_parse_key(key);
        }
        let raw = builder
            .add_source(environment)
            .build()
            .map_err(|e| describe_config_error(e, file.as_deref()))?;
        let mut settings: Settings = raw
            .try_deserialize()
            .map_err(|e| describe_config_error(e, file.as_deref()))?;
        settings.read_secret_files()?;
        Ok(settings)
    }

    fn read_secret_files(&mut self) -> Result<(), SettingsError> {
        if let Some(path) = &self.database.url_file {
            let text = read_secret_file("database.url_file", path)?;
            self.database.url = text.trim().to_owned();
        }
        if let Some(path) = &self.webhook.secrets_file {
            let text = read_secret_file("webhook.secrets_file", path)?;
            self.webhook.secrets.extend(lines_as_secrets(&text));
        }
        if let Some(path) = &self.admin.tokens_file {
            let text = read_secret_file("admin.tokens_file", path)?;
            self.admin.tokens.extend(lines_as_secrets(&text));
        }
        if let Some(path) = &self.service.client_secret_file {
            let text = read_secret_file("service.client_secret_file", path)?;
            self.service.client_secret = Some(SecretString::from(text.trim().to_owned()));
        }
        subscribers::read_secret_files(&mut self.subscriber)?;
        Ok(())
    }
}

pub(super) fn read_secret_file(key: &'static str, path: &Path) -> Result<String, SettingsError> {
    // The path may be relative to systemd's credentials directory.
    let resolved = match std::env::var_os("CREDENTIALS_DIRECTORY") {
        Some(dir) if path.is_relative() => Path::new(&dir).join(path),
        _ => path.to_owned(),
    };
    std::fs::read_to_string(&resolved).map_err(|e| {
        SettingsError::invalid(key, format!("cannot read {}: {e}", resolved.display()))
    })
}

fn lines_as_secrets(text: &str) -> impl Iterator<Item = SecretString> + '_ {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| SecretString::from(line.to_owned()))
}

/// Turns the `config` crate's error into one that names the key, without echoing values
/// (a value may be a secret).
fn describe_config_error(error: config::ConfigError, file: Option<&Path>) -> SettingsError {
    match error {
        config::ConfigError::FileParse { uri, cause } => SettingsError::File {
            path: uri
                .map(PathBuf::from)
                .or_else(|| file.map(Path::to_owned))
                .unwrap_or_default(),
            message: cause.to_string(),
        },
        config::ConfigError::Foreign(cause) => SettingsError::Parse(cause.to_string()),
        other => SettingsError::Parse(other.to_string()),
    }
}
