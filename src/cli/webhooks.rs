//! `sign` and `webhooks diagnose`.

use std::io::{Read as _, Write as _};

use secrecy::{ExposeSecret, SecretString};

use super::CliError;
use crate::model::text::Escaped;
use crate::settings::Settings;
use crate::signature::diagnose::{Finding, config_snippet, diagnose};
use crate::signature::{Key, SignatureFormat, sign};

pub fn sign_stdin(
    config: Option<&std::path::Path>,
    secret: Option<String>,
    json: bool,
) -> Result<(), CliError> {
    let settings = match secret {
        Some(secret) => {
            // A secret on the command line stands in for the configured ones.
            let mut env: Vec<(String, String)> = std::env::vars().collect();
            env.retain(|(k, _)| k != "OUTREACH_SYNC__WEBHOOK__SECRETS");
            let mut settings = Settings::load_unvalidated(config, &env)?;
            settings.webhook.secrets = vec![SecretString::from(secret)];
            settings.webhook.secrets_file = None;
            settings.validate()?;
            settings
        }
        None => Settings::load(config)?,
    };
    let mut body = Vec::new();
    std::io::stdin()
        .read_to_end(&mut body)
        .map_err(|e| anyhow::anyhow!("reading the body from stdin: {e}"))?;
    let first = settings.webhook.secrets.first().ok_or_else(|| {
        CliError::Usage("no secret: give --secret or configure webhook.secrets".into())
    })?;
    let key = Key::for_scheme(settings.webhook.scheme, first.expose_secret()).ok_or_else(|| {
        CliError::Usage("the secret does not decode under the configured scheme".into())
    })?;
    let format = SignatureFormat::from(&settings.webhook);
    let headers = sign(&format, &key, &body, chrono::Utc::now().timestamp(), None);
    let mut out = std::io::stdout().lock();
    if json {
        let map: serde_json::Map<String, serde_json::Value> = headers
            .into_iter()
            .map(|(k, v)| (k, serde_json::Value::String(v)))
            .collect();
        let _ = writeln!(out, "{}", serde_json::Value::Object(map));
    } else {
        for (name, value) in headers {
            let _ = writeln!(out, "{name}: {value}");
        }
    }
    Ok(())
}

/// Diagnoses the kept refused deliveries of the account `account` (default: every account),
/// each with the secrets of the account whose path it arrived on.
pub async fn diagnose_rejected(
    settings: Settings,
    account: Option<String>,
    json: bool,
) -> Result<(), CliError> {
    let accounts = super::accounts_of(&settings, account.as_deref())?;
    let pool = super::open(&settings).await?;
    let rows = crate::ledger::rejected(&pool)
        .await
        .map_err(anyhow::Error::from)?;
    let of_account = |row: &crate::model::KeptRejection| {
        let name = row.account_id.as_deref().unwrap_or(settings.account_name());
        accounts.iter().find(|account| account.id == *name)
    };
    let rows: Vec<_> = rows
        .iter()
        .filter_map(|row| Some((row, of_account(row)?)))
        .collect();
    let mut tally: std::collections::BTreeMap<Finding, usize> = Default::default();
    let mut unmatched = Vec::new();
    for (row, account) in &rows {
        let findings = diagnose(&row.headers, &row.body, &account.webhook.secrets);
        if findings.is_empty() {
            unmatched.push(row);
        }
        for finding in findings {
            *tally.entry(finding).or_default() += 1;
        }
    }
    if json {
        let formats: Vec<serde_json::Value> = tally
            .iter()
            .map(|(f, n)| {
                serde_json::json!({
                    "deliveries": n, "scheme": f.scheme, "header": f.header,
                    "algorithm": f.algorithm, "encoding": f.encoding, "prefix": f.prefix,
                    "timestampHeader": f.timestamp_header, "secretIndex": f.secret_index,
                    "config": config_snippet(f),
                })
            })
            .collect();
        let value = serde_json::json!({
            "examined": rows.len(),
            "unmatched": unmatched.len(),
            "formats": formats,
        });
        println!("{value:#}");
        return Ok(());
    }
    println!(
        "{} refused deliveries examined (the most recent kept).",
        rows.len()
    );
    if rows.is_empty() {
        println!("Nothing to diagnose: no delivery has failed verification.");
        return Ok(());
    }
    for (finding, n) in &tally {
        println!("\n{n} of them verify with this configuration:\n");
        // Line by line: the snippet's lines are the daemon's, what fills them was received.
        for line in config_snippet(finding).lines() {
            println!("{}", Escaped(line));
        }
    }
    if !unmatched.is_empty() {
        println!(
            "\n{} match no configured secret under any known format; check webhook.secrets.",
            unmatched.len()
        );
        for row in unmatched.iter().take(5) {
            println!(
                "  #{} at {}: {}",
                row.id,
                row.received_at,
                Escaped(&row.reason)
            );
        }
    }
    Ok(())
}
