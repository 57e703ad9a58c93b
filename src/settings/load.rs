//! Where settings come from: the TOML file, `OUTREACH_SYNC__SECTION__KEY` overrides, then
//! `_file` secrets (relative paths under systemd's credentials directory).

use std::path::{Path, PathBuf};

use secrecy::SecretString;

use super::{
    DEFAULT_CONFIG_PATH, Settings, SettingsError, lines_as_secrets, read_secret_file, subscribers,
};
use super::{accounts, destinations, sources};

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
            check_syntax(path)?;
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
        let given = |key: &str| raw.get::<config::Value>(key).is_ok();
        let beside = accounts::GivenBeside {
            service: raw.get_table("service").is_ok(),
            webhook: given("webhook"),
            ingest_path: given("ingest.path"),
            // Their defaults (empty) say nothing: only a value is refused.
            ingest_public_url: raw
                .get_string("ingest.public_url")
                .is_ok_and(|url| !url.is_empty()),
            reconcile_organizations: raw
                .get_array("reconcile.organizations")
                .is_ok_and(|organizations| !organizations.is_empty()),
        };
        let mut settings: Settings = raw
            .try_deserialize()
            .map_err(|e| describe_config_error(e, file.as_deref()))?;
        settings.read_secret_files()?;
        accounts::validate(&settings.account, beside)?;
        settings.take_account();
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
        destinations::read_secret_files(&mut self.destination)?;
        sources::read_secret_files(&mut self.source)?;
        accounts::read_secret_files(&mut self.account)?;
        Ok(())
    }
}

/// Turns the `config` crate's error into one that names the key, without echoing values
/// (a value may be a secret).
fn describe_config_error(error: config::ConfigError, file: Option<&Path>) -> SettingsError {
    match error {
        // Checked by `check_syntax` first; the parser's own text quotes the line.
        config::ConfigError::FileParse { uri, .. } => SettingsError::File {
            path: uri
                .map(PathBuf::from)
                .or_else(|| file.map(Path::to_owned))
                .unwrap_or_default(),
            message: "not valid TOML".into(),
        },
        config::ConfigError::Type { key, expected, .. } => SettingsError::Parse(format!(
            "key `{}`: expected {expected}",
            key.unwrap_or_default()
        )),
        config::ConfigError::Foreign(cause) => {
            SettingsError::Parse(without_values(&cause.to_string()))
        }
        other => SettingsError::Parse(without_values(&other.to_string())),
    }
}

/// `message` with every double-quoted value in it replaced: serde quotes the value it could
/// not take (`invalid type: string "...", expected ...`), and that value may be a secret.
fn without_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut quoted = false;
    for c in message.chars() {
        if c == '"' {
            if !quoted {
                out.push_str("\"[redacted]\"");
            }
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    out
}

/// Refuses a file that is not TOML, naming the file, the line, the column and the key at
/// fault, never the line's text: the line may hold a secret.
fn check_syntax(path: &Path) -> Result<(), SettingsError> {
    let error = |message: String| SettingsError::File {
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(format!("cannot read it: {e}")))?;
    match text.parse::<toml::Table>() {
        Ok(_) => Ok(()),
        Err(syntax) => Err(error(syntax_error(&text, &syntax))),
    }
}

/// Where a syntax error is, and what the parser says of it (its first line, which does not
/// quote the file).
fn syntax_error(text: &str, error: &toml::de::Error) -> String {
    let at = error.span().map_or(0, |span| span.start);
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let key = key_at(text, line)
        .map(|key| format!(", key `{key}`"))
        .unwrap_or_default();
    let what = error.message().lines().next().unwrap_or("invalid TOML");
    format!("line {line}, column {column}{key}: {what}")
}

/// The dotted key line `line` (1-based) sets, with the table it is in: what is before its
/// `=`, when that is a plain key.
fn key_at(text: &str, line: usize) -> Option<String> {
    let plain = |key: &str| {
        !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    };
    let lines: Vec<&str> = text.lines().take(line).collect();
    let (key, _) = lines.last()?.split_once('=')?;
    let key = key.trim();
    if !plain(key) {
        return None;
    }
    let table = lines[..lines.len() - 1].iter().rev().find_map(|l| {
        let l = l.trim();
        l.strip_prefix("[[")
            .and_then(|t| t.strip_suffix("]]"))
            .or_else(|| l.strip_prefix('[').and_then(|t| t.strip_suffix(']')))
            .map(str::trim)
    });
    Some(match table {
        Some(table) if plain(table) => format!("{table}.{key}"),
        _ => key.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error `text` as a configuration file gives, as printed.
    fn error_of(text: &str) -> String {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).expect("write the file");
        let error = Settings::load_unvalidated(Some(&path), &[]).expect_err("refused");
        error.to_string()
    }

    #[test]
    fn a_syntax_error_on_a_secrets_line_names_the_line_and_key_but_not_the_secret() {
        let error =
            error_of("[log]\nlevel = \"info\"\n\n[webhook]\nsecrets = [\"whsec_TOPSECRET]\n");
        assert!(error.contains("config.toml"), "{error}");
        assert!(error.contains("line 5"), "{error}");
        assert!(error.contains("key `webhook.secrets`"), "{error}");
        assert!(!error.contains("TOPSECRET"), "{error}");
    }

    #[test]
    fn a_duplicate_key_names_the_key_but_not_either_value() {
        let error = error_of(
            "[service]\nclient_secret = \"first-TOPSECRET\"\nclient_secret = \"second-TOPSECRET\"\n",
        );
        assert!(error.contains("line 3"), "{error}");
        assert!(error.contains("service.client_secret"), "{error}");
        assert!(!error.contains("TOPSECRET"), "{error}");
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named_by_its_key_without_the_value() {
        let error = error_of("[admin]\ntokens = \"TOPSECRET\"\n");
        assert!(error.contains("tokens"), "{error}");
        assert!(!error.contains("TOPSECRET"), "{error}");
    }

    #[test]
    fn quoted_values_are_taken_out_of_messages() {
        assert_eq!(
            without_values(r#"invalid type: string "hunter2", expected a sequence"#),
            r#"invalid type: string "[redacted]", expected a sequence"#
        );
    }

    proptest::proptest! {
        #[test]
        fn any_file_loads_or_is_refused_with_a_message_that_does_not_quote_it(
            text in "[a-z_\\[\\]=\" \n.0-9]{0,80}",
        ) {
            let dir = tempfile::tempdir().expect("temporary directory");
            let path = dir.path().join("config.toml");
            // The secret opens a string it never closes: wherever it lands, it is a value.
            std::fs::write(&path, format!("{text}\"ZZSECRETZZ")).expect("write the file");
            if let Err(error) = Settings::load_unvalidated(Some(&path), &[]) {
                proptest::prop_assert!(!error.to_string().contains("ZZSECRETZZ"), "{error}");
            }
        }
    }
}
