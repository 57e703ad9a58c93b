//! `[database]`, `[replica]` and `[retention]`: where the ledger is kept, by whom, and for how long.

use super::*;

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
