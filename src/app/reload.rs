//! Reloading without a restart: on SIGHUP `serve` reads its configuration again and puts
//! the new `[webhook] secrets` and `[admin] tokens` (with their `_file` forms), and each
//! destination's `api_key`, in force at once. A configuration that is not valid changes nothing: the running settings stay, and
//! the log names the key at fault (never a value). Neither does one that would take every
//! admin token away from a daemon that has some.

use std::path::PathBuf;
use std::sync::Arc;

use secrecy::ExposeSecret as _;
use tokio_util::sync::CancellationToken;

use crate::model::AccountId;
use crate::settings::{AdminToken, DestinationKeys, Live, Settings, SettingsError};
use crate::signature::{Key, Verifier};

/// What a reload replaces, and where it reads the configuration from.
#[derive(Debug, Clone)]
pub struct Reloader {
    /// `--config`, as `serve` was started with (`None`: the default path, if it exists).
    config: Option<PathBuf>,
    /// The settings in force: all but the two reloaded are kept as the daemon started.
    running: Arc<std::sync::Mutex<Settings>>,
    /// Each account's verifier, by the account's name.
    verifiers: Vec<(AccountId, Live<Verifier>)>,
    tokens: Live<Vec<AdminToken>>,
    /// The destinations' keys: a destination stopped by its key is tried again under new
    /// ones.
    destination_keys: Live<DestinationKeys>,
    /// The sources the leader reads.
    sources: Live<Vec<crate::settings::SourceSettings>>,
    /// The callers the sharer holds opt-outs by.
    callers: Live<Vec<crate::model::caller::Caller>>,
}

/// What a reload put in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    pub webhook_secrets: usize,
    pub admin_tokens: usize,
    /// The file also changes keys that only a restart applies.
    pub restart_needed: bool,
}

impl Reloader {
    pub fn new(
        config: Option<PathBuf>,
        running: Settings,
        verifiers: Vec<(AccountId, Live<Verifier>)>,
        tokens: Live<Vec<AdminToken>>,
    ) -> Self {
        Self {
            config,
            running: Arc::new(std::sync::Mutex::new(running)),
            verifiers,
            tokens,
            destination_keys: Live::new(DestinationKeys::new()),
            sources: Live::new(Vec::new()),
            callers: Live::new(Vec::new()),
        }
    }

    /// Replaces `callers` too on reload: `[[caller]]` and `[consent] revoke_all_from`.
    pub fn with_callers(mut self, callers: Live<Vec<crate::model::caller::Caller>>) -> Self {
        self.callers = callers;
        self
    }

    /// Replaces `sources` too on reload: a source added runs, one removed stops, one
    /// changed runs as it now reads.
    pub fn with_sources(mut self, sources: Live<Vec<crate::settings::SourceSettings>>) -> Self {
        self.sources = sources;
        self
    }

    /// Replaces `keys` too on reload (the destinations' API keys).
    pub fn with_destination_keys(mut self, keys: Live<DestinationKeys>) -> Self {
        self.destination_keys = keys;
        self
    }

    /// Reads the configuration again and, when it is valid, puts its webhook secrets and
    /// admin tokens in force; otherwise changes nothing and says which key is at fault.
    pub fn reload(&self) -> Result<Reloaded, SettingsError> {
        let new = Settings::load(self.config.as_deref())?;
        let mut running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        check_webhooks(&running, &new)?;
        // Allowed at start (a demo, a daemon whose admin listener nobody uses), an empty list
        // put in force by a reload would end every console session and lock every tool out
        // at once, most likely because a tokens file was emptied or not yet written.
        if new.admin.tokens.is_empty() && !running.admin.tokens.is_empty() {
            return Err(SettingsError::Invalid {
                key: "admin.tokens",
                message: "the new configuration has no admin token (admin.tokens and admin.tokens_file give none): a reload never removes every token, as that would lock out every tool and console session; to run without tokens, restart".into(),
            });
        }
        let mut next = running.clone();
        next.webhook.secrets = new.webhook.secrets.clone();
        next.webhook.secrets_file = new.webhook.secrets_file.clone();
        for account in &mut next.account {
            if let Some(reloaded) = new.account.iter().find(|a| a.name == account.name) {
                account.webhook.secrets = reloaded.webhook.secrets.clone();
                account.webhook.secrets_file = reloaded.webhook.secrets_file.clone();
            }
        }
        next.admin.tokens = new.admin.tokens.clone();
        next.admin.tokens_file = new.admin.tokens_file.clone();
        // A destination's key, for the destinations configured at start (a new destination
        // takes a restart).
        for destination in &mut next.destination {
            if let Some(reloaded) = new.destination.iter().find(|d| d.name == destination.name) {
                destination.api_key = reloaded.api_key.clone();
                destination.api_key_file = reloaded.api_key_file.clone();
            }
        }
        let mut webhook_secrets = 0;
        for account in next.accounts()? {
            if let Some((_, verifier)) = self.verifiers.iter().find(|(id, _)| *id == account.id) {
                verifier.replace(Verifier::new(&account.webhook));
            }
            webhook_secrets += account.webhook.secrets.len();
        }
        // The sources, whole: added, changed and removed at once; the callers too.
        next.source = new.source.clone();
        next.caller = new.caller.clone();
        next.consent.revoke_all_from = new.consent.revoke_all_from.clone();
        let callers = next.callers()?;
        self.sources.replace(next.source.clone());
        self.callers.replace(callers);
        self.tokens.replace(next.admin.named_tokens());
        self.destination_keys
            .replace(crate::settings::keys_of(&next.destination));
        let reloaded = Reloaded {
            webhook_secrets,
            admin_tokens: next.admin.tokens.len(),
            restart_needed: next.redacted_toml() != new.redacted_toml(),
        };
        *running = next;
        Ok(reloaded)
    }

    /// Reloads on every SIGHUP that `hangups` receives, until `shutdown`; logs each
    /// outcome.
    pub async fn run(self, hangups: Hangups, shutdown: CancellationToken) {
        let mut hangups = hangups.0.lock().await;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                received = hangups.recv() => {
                    if received.is_none() {
                        return;
                    }
                }
            }
            self.log(self.reload());
        }
    }

    fn log(&self, outcome: Result<Reloaded, SettingsError>) {
        match outcome {
            Ok(reloaded) => {
                tracing::info!(
                    webhook_secrets = reloaded.webhook_secrets,
                    admin_tokens = reloaded.admin_tokens,
                    "configuration reloaded: webhook.secrets and admin.tokens are in force"
                );
                if reloaded.restart_needed {
                    tracing::warn!(
                        "the configuration also changes other keys: only webhook.secrets and admin.tokens are reloaded, the others take effect at the next start"
                    );
                }
            }
            // The error names the key and never quotes a value.
            Err(error) => tracing::error!(
                %error,
                "configuration reload refused: the running webhook.secrets and admin.tokens stay"
            ),
        }
    }
}

/// SIGHUP, listened to from before the daemon says it is ready (a SIGHUP before then
/// would end the process): shared by the runs of the reload task.
#[derive(Clone)]
pub struct Hangups(Arc<tokio::sync::Mutex<tokio::signal::unix::Signal>>);

impl Hangups {
    /// Starts listening to SIGHUP.
    pub fn listen() -> std::io::Result<Self> {
        let signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        Ok(Self(Arc::new(tokio::sync::Mutex::new(signal))))
    }
}

/// Every account served keeps being served, and each new secret makes a key under the
/// scheme its account runs with (a new scheme, or a new or removed account, takes a
/// restart).
fn check_webhooks(running: &Settings, new: &Settings) -> Result<(), SettingsError> {
    let new_accounts = new.accounts()?;
    for account in running.accounts()? {
        let Some(reloaded) = new_accounts.iter().find(|n| n.id == account.id) else {
            return Err(SettingsError::Invalid {
                key: "account",
                message: format!(
                    "account {:?} is no longer in the configuration (removing an account takes a restart)",
                    account.id.as_str()
                ),
            });
        };
        let scheme = account.webhook.scheme;
        if reloaded
            .webhook
            .secrets
            .iter()
            .any(|s| Key::for_scheme(scheme, s.expose_secret()).is_none())
        {
            return Err(SettingsError::Invalid {
                key: "webhook.secrets",
                message: "a secret does not decode under the running webhook.scheme (a new scheme takes a restart)".into(),
            });
        }
    }
    Ok(())
}
