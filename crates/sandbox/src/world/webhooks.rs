//! Webhook registrations and which of them an event reaches.

use super::{Change, Refusal, World};
use crate::wire::{
    CreateWebhookRegistration, Kind, Scope, UpdateWebhookRegistration, WebhookConfig,
    WebhookRegistration,
};
use secrecy::ExposeSecret;

/// A registration with its secret, which the API never returns. No `Debug`, for the same
/// reason.
#[derive(Clone)]
pub(crate) struct Registration {
    pub resource: WebhookRegistration,
    pub secret: Option<String>,
}

impl Registration {
    /// Whether this registration receives `change` (kind, scope and consent direction).
    pub(crate) fn wants(&self, change: &Change) -> bool {
        match (&self.resource.config, change) {
            (
                WebhookConfig::ConsentUpdate {
                    scope,
                    include_opt_out,
                    include_opt_in,
                },
                Change::Consent { lead, .. },
            ) => {
                let direction = if lead.global_opted_out {
                    *include_opt_out
                } else {
                    *include_opt_in
                };
                direction && scope.covers(&lead.organization_id)
            }
            (WebhookConfig::MessageStatus { scope }, Change::Message { message, .. }) => {
                scope.covers(&message.organization_id)
            }
            _ => false,
        }
    }
}

impl World {
    pub(crate) fn create_registration(
        &mut self,
        body: CreateWebhookRegistration,
    ) -> Result<WebhookRegistration, Refusal> {
        check_target(&body.target_url)?;
        self.check_scope(&body.config)?;
        let secret =
            Some(body.secret_for_hmac.expose_secret().to_owned()).filter(|s| !s.is_empty());
        let resource = WebhookRegistration {
            id: self.id("whr"),
            kind: Kind::WebhookRegistration,
            target_url: body.target_url,
            config: body.config,
            created_at: super::now(),
            secret_for_hmac: secret.is_some(),
        };
        self.registrations.insert(
            resource.id.clone(),
            Registration {
                resource: resource.clone(),
                secret,
            },
        );
        Ok(resource)
    }

    pub(crate) fn update_registration(
        &mut self,
        id: &str,
        body: UpdateWebhookRegistration,
    ) -> Result<WebhookRegistration, Refusal> {
        if let Some(target) = &body.target_url {
            check_target(target)?;
        }
        if let Some(config) = &body.config {
            self.check_scope(config)?;
        }
        let registration = self
            .registrations
            .get_mut(id)
            .ok_or_else(|| Refusal::not_found("webhook registration", id))?;
        if let Some(target) = body.target_url {
            registration.resource.target_url = target;
        }
        if let Some(config) = body.config {
            registration.resource.config = config;
        }
        if let Some(secret) = body.secret_for_hmac {
            registration.secret = Some(secret.expose_secret().to_owned()).filter(|s| !s.is_empty());
            registration.resource.secret_for_hmac = registration.secret.is_some();
        }
        Ok(registration.resource.clone())
    }

    /// `true` if there was such a registration.
    pub(crate) fn delete_registration(&mut self, id: &str) -> bool {
        self.registrations.remove(id).is_some()
    }

    fn check_scope(&self, config: &WebhookConfig) -> Result<(), Refusal> {
        if let Scope::Organizations { organization_ids } = config.scope() {
            for id in organization_ids {
                if !self.organizations.contains_key(id) {
                    return Err(Refusal::unprocessable(
                        "ORGANIZATION_NOT_FOUND",
                        format!("scope names unknown organization {id}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn check_target(url: &str) -> Result<(), Refusal> {
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(()),
        _ => Err(Refusal::bad_request(format!(
            "targetUrl `{url}` is not an http(s) URI"
        ))),
    }
}
