//! What the demo leaves beside its database: its configuration (`config.toml`), with each
//! secret in a file of its own under `secrets/` as a user would keep them, so that every
//! command the demo suggests afterwards (`--config DIR/config.toml`) sees what it saw: the
//! two accounts, the subscriber, the destinations, the same report.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use outreach_sync::settings::{Settings, SourceSystem};
use secrecy::{ExposeSecret as _, SecretString};

/// The listeners of `serve` run on the kept configuration: the demo's own were on ports
/// of the moment.
pub(super) const KEPT_INGEST: &str = "127.0.0.1:8080";
pub(super) const KEPT_ADMIN: &str = "127.0.0.1:8081";

/// Where the demo's files are, and what they are for.
pub(super) struct Kept {
    pub config: PathBuf,
    pub admin_token: PathBuf,
}

/// Writes `settings` as `dir/config.toml`, its secrets under `dir/secrets/`.
pub(super) fn keep(dir: &Path, settings: &Settings) -> anyhow::Result<Kept> {
    let secrets = dir.join("secrets");
    std::fs::create_dir_all(&secrets).with_context(|| format!("creating {}", secrets.display()))?;
    let mut out = String::new();
    let file = |name: &str, secret: &[SecretString]| -> anyhow::Result<String> {
        let path = secrets.join(name);
        let text: Vec<&str> = secret.iter().map(|s| s.expose_secret()).collect();
        write_secret(&path, &text.join("\n"))?;
        Ok(quoted(&path.display().to_string()))
    };
    let _ = writeln!(
        out,
        "# What `outreach-sync demo` ran, kept beside its database. Its services (the\n\
         # sandboxes, VAN, Action Network, the CRM) ended with it: nothing here is scheduled.\n\
         [database]\nurl = {}\nsynchronous = \"normal\"\n\n\
         [ingest]\nbind = \"{KEPT_INGEST}\"\n\n\
         [admin]\nbind = \"{KEPT_ADMIN}\"\ntokens_file = {}\n\n\
         [reconcile]\nschedule = \"\"\non_start = false\n\n\
         [consent]\nshare_across_accounts = {}\nrevoke_all_from = {}\n\n\
         [log]\nlevel = \"warn\"\n",
        quoted(&settings.database.url),
        file("admin-token", &settings.admin.tokens)?,
        settings.consent.share_across_accounts,
        quoted(&settings.consent.revoke_all_from),
    );
    for account in &settings.account {
        let name = &account.name;
        let secret: Vec<SecretString> = account.client_secret.iter().cloned().collect();
        let _ = writeln!(
            out,
            "[[account]]\nname = {}\ningest_path = {}\nbase_url = {}\nclient_id = {}\n\
             client_secret_file = {}\n[account.webhook]\nsecrets_file = {}\n",
            quoted(name),
            quoted(&account.ingest_path),
            quoted(&account.base_url),
            quoted(&account.client_id),
            file(&format!("{name}-client-secret"), &secret)?,
            file(&format!("{name}-webhook-secrets"), &account.webhook.secrets)?,
        );
    }
    for caller in &settings.caller {
        let members: Vec<String> = caller.members.iter().map(|m| quoted(m)).collect();
        let _ = writeln!(
            out,
            "[[caller]]\nname = {}\nmembers = [{}]\n",
            quoted(&caller.name),
            members.join(", ")
        );
    }
    for subscriber in &settings.subscriber {
        let name = &subscriber.name;
        let secret: Vec<SecretString> = subscriber.secret.iter().cloned().collect();
        let _ = writeln!(
            out,
            "[[subscriber]]\nname = {}\nurl = {}\nsecret_file = {}\n",
            quoted(name),
            quoted(&subscriber.url),
            file(&format!("{name}-secret"), &secret)?,
        );
    }
    write_destinations(&mut out, settings, &file)?;
    write_sources(&mut out, settings, &file)?;
    let config = dir.join("config.toml");
    std::fs::write(&config, out).with_context(|| format!("writing {}", config.display()))?;
    Ok(Kept {
        config,
        admin_token: secrets.join("admin-token"),
    })
}

/// The `[[destination]]` tables of `settings`, each key in a file `file` writes.
fn write_destinations(
    out: &mut String,
    settings: &Settings,
    file: &dyn Fn(&str, &[SecretString]) -> anyhow::Result<String>,
) -> anyhow::Result<()> {
    for destination in &settings.destination {
        let name = &destination.name;
        let kind = destination.system.kind();
        let accounts: Vec<String> = destination
            .scope
            .accounts
            .iter()
            .map(|a| quoted(a))
            .collect();
        let key: Vec<SecretString> = destination.api_key.iter().cloned().collect();
        if let Some(table) = destination.system.table() {
            // A warehouse the demo writes is PostgreSQL's: its URL in a file of its own.
            let _ = writeln!(
                out,
                "[[destination]]\nname = {}\nkind = \"{kind}\"\nurl_file = {}\ntable = {}\n",
                quoted(name),
                file(&format!("{name}-url"), &key)?,
                quoted(table.table()),
            );
            continue;
        }
        let _ = writeln!(
            out,
            "[[destination]]\nname = {}\nkind = \"{kind}\"\nbase_url = {}\napi_key_file = {}\n\
             accounts = [{}]\n",
            quoted(name),
            quoted(&destination.base_url),
            file(&format!("{name}-api-key"), &key)?,
            accounts.join(", "),
        );
    }
    Ok(())
}

/// The `[[source]]` tables of `settings`, each key in a file `file` writes.
fn write_sources(
    out: &mut String,
    settings: &Settings,
    file: &dyn Fn(&str, &[SecretString]) -> anyhow::Result<String>,
) -> anyhow::Result<()> {
    for source in &settings.source {
        let name = &source.name;
        let kind = source.system.kind();
        if let SourceSystem::Twilio(twilio) = &source.system {
            let _ = writeln!(
                out,
                "[[source]]\nname = {}\nkind = \"{kind}\"\nauth_token_file = {}\npublic_url = {}\n",
                quoted(name),
                file(&format!("source-{name}-auth-token"), &twilio.accepted())?,
                quoted(&twilio.public_url),
            );
            continue;
        }
        let key: Vec<SecretString> = source.api_key.iter().cloned().collect();
        let _ = writeln!(
            out,
            "[[source]]\nname = {}\nkind = \"{kind}\"\nbase_url = {}\napi_key_file = {}\n\
             every_secs = {}\n",
            quoted(name),
            quoted(&source.base_url),
            file(&format!("source-{name}-api-key"), &key)?,
            source.every_secs,
        );
    }
    Ok(())
}

/// `text` as a TOML basic string (JSON's escapes are TOML's).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// A secret file only its owner reads.
fn write_secret(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}
