//! The account's webhook registrations for this daemon, through the v3 API: what it needs
//! at its public URL ([`Target`]), made so (`webhooks register`: [`plan`], [`apply`]),
//! checked with a mock event each (`webhooks check`: [`check`], its last result kept for
//! `status` and `/metrics`), and given the first configured secret (`webhooks rotate`).
//!
//! The service never returns a secret, only whether one is set: whether a registration
//! signs with a secret the daemon accepts is learnt from its mock event alone.

use futures::TryStreamExt as _;
use secrecy::SecretString;

use crate::client::models::{
    CreateWebhookRegistration, EventKind, ListWebhookRegistrations, MockEvent, Scope,
    UpdateWebhookRegistration, WebhookConfig, WebhookRegistration,
};
use crate::client::{ClientError, ServiceClient};
use crate::model::{RegistrationCheck, Timestamp};
use crate::settings::Account;

/// The last check of each account, kept for `status`, `GET /v1/status` and `/metrics`.
mod kept;
pub use kept::{last_check, record, record_in};

/// What this daemon needs registered: where, for which leads, signed with which secret.
#[derive(Debug, Clone)]
pub struct Target {
    pub url: String,
    pub scope: Scope,
    secret: SecretString,
}

/// Why no target can be named; each says what to set.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error(
        "no target URL: set ingest.public_url (the URL the service calls, e.g. \"https://hooks.example.org/webhooks\") or give --target-url"
    )]
    NoUrl,
    #[error("--target-url: {} is not an http(s) URL", crate::model::text::quoted(.0))]
    BadUrl(String),
    #[error("no signing secret: set webhook.secrets (the first one signs the registrations)")]
    NoSecret,
}

/// The URL the registrations target: `--target-url`, else the account's public URL
/// (`ingest.public_url`).
pub fn target_url(account: &Account, given: Option<&str>) -> Result<String, TargetError> {
    match given {
        Some(url) => match reqwest::Url::parse(url) {
            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(url.to_owned()),
            _ => Err(TargetError::BadUrl(url.to_owned())),
        },
        // Validated with the settings.
        None if !account.public_url.is_empty() => Ok(account.public_url.clone()),
        None => Err(TargetError::NoUrl),
    }
}

impl Target {
    /// The target of `account`: at [`target_url`], for the whole account unless
    /// `organizations` are named, signed with the first of its `webhook.secrets`.
    pub fn of(
        account: &Account,
        given_url: Option<&str>,
        organizations: &[String],
    ) -> Result<Self, TargetError> {
        let url = target_url(account, given_url)?;
        let secret = account
            .webhook
            .secrets
            .first()
            .cloned()
            .ok_or(TargetError::NoSecret)?;
        let scope = if organizations.is_empty() {
            Scope::Account
        } else {
            let mut organization_ids = organizations.to_vec();
            organization_ids.sort();
            organization_ids.dedup();
            Scope::Organizations { organization_ids }
        };
        Ok(Self { url, scope, secret })
    }

    /// The two registrations the daemon needs: consent changes of both directions, and
    /// message statuses, in its scope.
    pub fn wanted(&self) -> [WebhookConfig; 2] {
        [
            WebhookConfig::ConsentUpdate {
                scope: self.scope.clone(),
                include_opt_out: true,
                include_opt_in: true,
            },
            WebhookConfig::MessageStatus {
                scope: self.scope.clone(),
            },
        ]
    }
}

/// Whether `registration` delivers to `url` (compared as URLs: `HTTP://Host:80/x` is
/// `http://host/x`).
pub fn targets(registration: &WebhookRegistration, url: &str) -> bool {
    match (
        reqwest::Url::parse(&registration.target_url),
        reqwest::Url::parse(url),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => registration.target_url == url,
    }
}

/// `config` with its organization ids in order and without repeats: two scopes naming the
/// same organizations are the same scope.
fn normalized(config: &WebhookConfig) -> WebhookConfig {
    let scope = |scope: &Scope| match scope {
        Scope::Account => Scope::Account,
        Scope::Organizations { organization_ids } => {
            let mut organization_ids = organization_ids.clone();
            organization_ids.sort();
            organization_ids.dedup();
            Scope::Organizations { organization_ids }
        }
    };
    match config {
        WebhookConfig::ConsentUpdate {
            scope: s,
            include_opt_out,
            include_opt_in,
        } => WebhookConfig::ConsentUpdate {
            scope: scope(s),
            include_opt_out: *include_opt_out,
            include_opt_in: *include_opt_in,
        },
        WebhookConfig::MessageStatus { scope: s } => {
            WebhookConfig::MessageStatus { scope: scope(s) }
        }
    }
}

/// Every registration of the account, all pages.
pub async fn all(client: &ServiceClient) -> Result<Vec<WebhookRegistration>, ClientError> {
    client
        .webhook_registrations(ListWebhookRegistrations::default(), None)
        .try_collect()
        .await
}

/// What `register` does to one registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// It is as needed.
    Unchanged { id: String },
    /// None of its kind targets the URL: one is created.
    Create,
    /// It is put (PUT) with the config needed, and the secret when it has none.
    Update {
        id: String,
        /// Its config differs, saying how.
        config: Vec<String>,
        /// It has no signing secret.
        secret: bool,
    },
    /// A second one of the same kind at the URL (every event would come twice): deleted,
    /// the first kept.
    Remove { id: String, kept: String },
}

/// One change, of a registration of `kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub kind: EventKind,
    pub change: Change,
}

/// What makes the account hold exactly what `target` needs, given its registrations
/// `existing`: per kind, the registration at the URL whose config is right (the one with a
/// secret first; else the first there) is kept or updated, the others of that kind at the URL removed, and one created
/// where there is none. Registrations at other URLs are left alone.
pub fn plan(existing: &[WebhookRegistration], target: &Target) -> Vec<Planned> {
    let mut planned = Vec::new();
    for wanted in target.wanted() {
        let kind = wanted.kind();
        let at_url: Vec<&WebhookRegistration> = existing
            .iter()
            .filter(|r| r.config.kind() == kind && targets(r, &target.url))
            .collect();
        // Kept: the first that is right and signed, else the first that is right, else the
        // first.
        let right = |r: &&WebhookRegistration| normalized(&r.config) == wanted;
        let keeper = at_url
            .iter()
            .position(|r| right(r) && r.secret_for_hmac)
            .or_else(|| at_url.iter().position(right))
            .unwrap_or(0);
        let Some(kept) = at_url.get(keeper) else {
            planned.push(Planned {
                kind,
                change: Change::Create,
            });
            continue;
        };
        let config = differences(&normalized(&kept.config), &wanted);
        let change = if config.is_empty() && kept.secret_for_hmac {
            Change::Unchanged {
                id: kept.id.clone(),
            }
        } else {
            Change::Update {
                id: kept.id.clone(),
                config,
                secret: !kept.secret_for_hmac,
            }
        };
        planned.push(Planned { kind, change });
        for (i, other) in at_url.iter().enumerate() {
            if i != keeper {
                let change = Change::Remove {
                    id: other.id.clone(),
                    kept: kept.id.clone(),
                };
                planned.push(Planned { kind, change });
            }
        }
    }
    planned
}

/// How `actual` differs from `wanted` (of the same kind), in words.
fn differences(actual: &WebhookConfig, wanted: &WebhookConfig) -> Vec<String> {
    let mut found = Vec::new();
    if actual.scope() != wanted.scope() {
        found.push(format!(
            "its scope is {}, not {}",
            describe_scope(actual.scope()),
            describe_scope(wanted.scope())
        ));
    }
    if let WebhookConfig::ConsentUpdate {
        include_opt_out,
        include_opt_in,
        ..
    } = actual
    {
        for (flag, on) in [
            ("includeOptOut", include_opt_out),
            ("includeOptIn", include_opt_in),
        ] {
            if !on {
                found.push(format!("{flag} is false"));
            }
        }
    }
    found
}

/// `account`, or `organizations org_1, org_2`.
pub fn describe_scope(scope: &Scope) -> String {
    match scope {
        Scope::Account => "account".into(),
        Scope::Organizations { organization_ids } => {
            format!("organizations {}", organization_ids.join(", "))
        }
    }
}

/// A change made: the registration's id (a created one's new id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub planned: Planned,
    pub id: String,
}

/// Makes the changes of `planned` at the service, in order.
pub async fn apply(
    client: &ServiceClient,
    target: &Target,
    planned: &[Planned],
) -> Result<Vec<Applied>, ClientError> {
    let mut applied = Vec::with_capacity(planned.len());
    for step in planned {
        let wanted = target
            .wanted()
            .into_iter()
            .find(|config| config.kind() == step.kind);
        let id = match (&step.change, wanted) {
            (Change::Unchanged { id }, _) => id.clone(),
            (Change::Create, Some(config)) => {
                let body = CreateWebhookRegistration {
                    target_url: target.url.clone(),
                    secret_for_hmac: target.secret.clone(),
                    config,
                };
                client.create_webhook_registration(&body).await?.id
            }
            (Change::Update { id, config, secret }, Some(wanted)) => {
                let body = UpdateWebhookRegistration {
                    target_url: None,
                    secret_for_hmac: secret.then(|| target.secret.clone()),
                    config: (!config.is_empty()).then_some(wanted),
                };
                client.update_webhook_registration(id, &body).await?.id
            }
            (Change::Remove { id, .. }, _) => {
                client.delete_webhook_registration(id).await?;
                id.clone()
            }
            // Every planned kind is a wanted one.
            (Change::Create | Change::Update { .. }, None) => continue,
        };
        applied.push(Applied {
            planned: step.clone(),
            id,
        });
    }
    Ok(applied)
}

/// What `register` did, and the check that followed.
#[derive(Debug, Clone)]
pub struct Registered {
    pub applied: Vec<Applied>,
    pub check: CheckReport,
}

/// `webhooks register`: makes the account hold exactly what `target` needs ([`plan`],
/// [`apply`]), then [`check`]s it, mock events included.
pub async fn register(client: &ServiceClient, target: &Target) -> Result<Registered, ClientError> {
    let planned = plan(&all(client).await?, target);
    let applied = apply(client, target, &planned).await?;
    let check = check(client, target).await?;
    Ok(Registered { applied, check })
}

/// A registration's mock event: whether the daemon took it as the service expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mocked {
    pub kind: EventKind,
    pub id: String,
    pub will_pass_validation: bool,
}

/// What a check found.
#[derive(Debug, Clone)]
pub struct CheckReport {
    pub result: RegistrationCheck,
    /// The mock event of each registration the daemon keeps.
    pub mocked: Vec<Mocked>,
    /// The account's id, as mock_event answers it (the ownership header's value).
    pub account_id: Option<String>,
}

/// Checks that the account holds what `target` needs: both registrations at the URL with
/// the right config, no second one of a kind, and a passing mock event for each.
pub async fn check(client: &ServiceClient, target: &Target) -> Result<CheckReport, ClientError> {
    let existing = all(client).await?;
    let planned = plan(&existing, target);
    let mut problems: Vec<String> = planned
        .iter()
        .filter_map(|p| problem(p, &target.url))
        .collect();
    let kept = planned.iter().filter_map(|p| match &p.change {
        Change::Unchanged { id } | Change::Update { id, .. } => Some((p.kind, id.clone())),
        Change::Create | Change::Remove { .. } => None,
    });
    let (mocked, account_id) = mock_each(client, kept).await?;
    for m in mocked.iter().filter(|m| !m.will_pass_validation) {
        problems.push(format!(
            "the {} registration {}: its mock event would not pass validation (the daemon at {} refused it or did not answer, it is signed with a secret the daemon does not have, or the ownership header is missing)",
            m.kind.as_str(),
            m.id,
            target.url
        ));
    }
    let result = RegistrationCheck {
        checked_at: Timestamp::now(),
        ok: problems.is_empty(),
        problems,
        target_url: target.url.clone(),
    };
    Ok(CheckReport {
        result,
        mocked,
        account_id,
    })
}

/// The problem a planned change stands for: what `check` reports.
fn problem(planned: &Planned, url: &str) -> Option<String> {
    let kind = planned.kind.as_str();
    match &planned.change {
        Change::Unchanged { .. } => None,
        Change::Create => Some(format!("no {kind} registration targets {url}")),
        Change::Update { id, config, secret } => {
            let mut what = config.clone();
            if *secret {
                what.push("it has no signing secret (secretForHMAC is false)".into());
            }
            Some(format!("the {kind} registration {id}: {}", what.join("; ")))
        }
        Change::Remove { id, kept } => Some(format!(
            "the {kind} registration {id} targets {url} as {kept} does: every event would come twice"
        )),
    }
}

/// Asks for the mock event of each registration; the account id the answers carry.
async fn mock_each(
    client: &ServiceClient,
    registrations: impl Iterator<Item = (EventKind, String)>,
) -> Result<(Vec<Mocked>, Option<String>), ClientError> {
    let mut mocked = Vec::new();
    let mut account_id = None;
    for (kind, id) in registrations {
        let outcome = client
            .mock_event(&MockEvent::WebhookRegistrationId {
                webhook_registration_id: id.clone(),
            })
            .await?;
        account_id = Some(outcome.account_id);
        mocked.push(Mocked {
            kind,
            id,
            will_pass_validation: outcome.will_pass_validation,
        });
    }
    Ok((mocked, account_id))
}

/// Puts `target`'s secret on every registration at its URL (any kind, any config), then
/// asks for a mock event of each. Empty when none targets the URL.
pub async fn rotate(client: &ServiceClient, target: &Target) -> Result<Vec<Mocked>, ClientError> {
    let ours: Vec<(EventKind, String)> = all(client)
        .await?
        .into_iter()
        .filter(|r| targets(r, &target.url))
        .map(|r| (r.config.kind(), r.id))
        .collect();
    for (_, id) in &ours {
        let body = UpdateWebhookRegistration {
            secret_for_hmac: Some(target.secret.clone()),
            ..UpdateWebhookRegistration::default()
        };
        client.update_webhook_registration(id, &body).await?;
    }
    Ok(mock_each(client, ours.into_iter()).await?.0)
}

#[cfg(test)]
mod tests;
