//! Agents, custom fields, groups, integrations, messages, organizations and tags.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use secrecy::ExposeSecret;

use super::paging::page;
use super::{ApiError, ApiResult, AppState, JsonBody, Params};
use crate::validate;
use crate::wire::{
    Agent, AgentUpdate, AgentVisibility, CountryCode, CustomField, Group, Integration,
    IntegrationOperation, IntegrationPatch, IntegrationType, Kind, MessageStatus, NewAgent,
    NewCustomField, NewGroup, NewIntegration, NewIntegrationBody, Organization, Page, Tag,
};
use crate::world::{Refusal, World, now};

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/agents", get(list_agents).post(create_agent))
        .route("/agents/{id}", axum::routing::put(update_agent))
        .route(
            "/custom_fields",
            get(list_custom_fields).post(create_custom_field),
        )
        .route("/groups", get(list_groups).post(create_group))
        .route(
            "/integrations",
            get(list_integrations)
                .post(create_integration)
                .patch(update_integration),
        )
        .route("/messages/{id}", get(message))
        .route("/organizations", get(list_organizations))
        .route("/tags", get(list_tags))
}

async fn list_agents(State(s): State<AppState>, params: Params) -> ApiResult<Json<Page<Agent>>> {
    let limit = s.config.default_page_size;
    s.read(|w| {
        let items = w
            .agents
            .iter()
            .filter(|(_, a)| params.matches("id", &a.id) && params.matches("groupId", &a.group_id));
        page(items, &params, limit).map(Json)
    })
}

async fn create_agent(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<NewAgent>,
) -> ApiResult<Json<Agent>> {
    if !body.email.contains('@') {
        return Err(ApiError::bad_request("email: not an email address"));
    }
    s.with_world(|w| {
        let group = w
            .groups
            .get(&body.group_id)
            .ok_or_else(|| {
                Refusal::unprocessable(
                    "GROUP_NOT_FOUND",
                    format!("group {} not found", body.group_id),
                )
            })?
            .clone();
        let agent = Agent {
            id: w.id("agt"),
            kind: Kind::Agent,
            name: body.name,
            full_name: body.full_name,
            phone_number: None,
            organization_id: group.organization_id,
            group_id: group.id,
            created_at: now(),
        };
        w.agents.insert(agent.id.clone(), agent.clone());
        Ok(Json(agent))
    })
}

async fn update_agent(
    State(s): State<AppState>,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<AgentUpdate>,
) -> ApiResult<Json<Agent>> {
    s.with_world(|w| {
        let agent = w
            .agents
            .get_mut(&id)
            .ok_or_else(|| Refusal::not_found("agent", &id))?;
        agent.name = body.name;
        agent.full_name = body.full_name;
        Ok(Json(agent.clone()))
    })
}

async fn list_custom_fields(
    State(s): State<AppState>,
    params: Params,
) -> ApiResult<Json<Page<CustomField>>> {
    let limit = s.config.default_page_size;
    s.read(|w| {
        let items = w.custom_fields.iter().filter(|(_, f)| {
            params.matches("id", &f.id)
                && params
                    .get("organizationId")
                    .is_none_or(|org| f.organization_id.as_deref() == Some(org))
        });
        page(items, &params, limit).map(Json)
    })
}

async fn create_custom_field(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<NewCustomField>,
) -> ApiResult<(StatusCode, Json<CustomField>)> {
    if !validate::is_custom_field_name(&body.name) {
        return Err(ApiError(Refusal::unprocessable(
            "INVALID_CUSTOM_FIELD_NAME",
            format!("name `{}` does not match ^[_a-zA-Z]\\w*$", body.name),
        )));
    }
    s.with_world(|w| {
        w.organization(&body.organization_id)?;
        let taken = w.custom_fields.values().any(|f| {
            f.name == body.name
                && f.organization_id
                    .as_deref()
                    .is_none_or(|o| o == body.organization_id)
        });
        if taken {
            return Err(ApiError(Refusal::unprocessable(
                "CUSTOM_FIELD_EXISTS",
                format!("a custom field named `{}` exists", body.name),
            )));
        }
        let field = CustomField {
            id: w.id("cf"),
            kind: Kind::CustomField,
            name: body.name,
            agent_visible: body.agent_visible,
            organization_id: Some(body.organization_id),
            created_at: now(),
        };
        w.custom_fields.insert(field.id.clone(), field.clone());
        Ok((StatusCode::CREATED, Json(field)))
    })
}

async fn list_groups(State(s): State<AppState>, params: Params) -> ApiResult<Json<Page<Group>>> {
    let limit = s.config.default_page_size;
    let active = params.bool("active")?;
    s.read(|w| {
        let items = w.groups.iter().filter(|(_, g)| {
            params.matches("id", &g.id)
                && params.matches("organizationId", &g.organization_id)
                && active.is_none_or(|a| a == g.active)
        });
        page(items, &params, limit).map(Json)
    })
}

/// The service assigns the timezone from the location; a longitude band is close enough.
fn timezone(country: CountryCode, lng: f64) -> &'static str {
    match country {
        CountryCode::PR => "America/Puerto_Rico",
        CountryCode::CA if lng > -90.0 => "America/Toronto",
        CountryCode::CA => "America/Vancouver",
        CountryCode::US if lng > -87.0 => "America/New_York",
        CountryCode::US if lng > -101.0 => "America/Chicago",
        CountryCode::US if lng > -115.0 => "America/Denver",
        CountryCode::US => "America/Los_Angeles",
    }
}

async fn create_group(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<NewGroup>,
) -> ApiResult<Json<Group>> {
    s.with_world(|w| {
        w.organization(&body.organization_id)?;
        let group = Group {
            id: w.id("grp"),
            kind: Kind::Group,
            name: body.name,
            description: body.description,
            country_code: body.country_code,
            active: true,
            timezone: timezone(body.country_code, body.location.coordinates.lng).into(),
            location: Some(body.location),
            organization_id: body.organization_id,
            created_at: now(),
        };
        w.groups.insert(group.id.clone(), group.clone());
        Ok(Json(group))
    })
}

async fn list_integrations(
    State(s): State<AppState>,
    params: Params,
) -> ApiResult<Json<Page<Integration>>> {
    let limit = s.config.default_page_size;
    let kind: Option<IntegrationType> = params.parse("integrationType")?;
    s.read(|w| {
        let items = w.integrations.iter().filter(|(_, i)| {
            params.matches("id", &i.id)
                && params.matches("organizationId", &i.organization_id)
                && kind.is_none_or(|k| k == i.integration_type)
        });
        page(items, &params, limit).map(Json)
    })
}

/// The sandbox's notion of valid credentials: nothing empty.
fn check_credentials(values: &[&str]) -> Result<(), Refusal> {
    if values.iter().any(|v| v.trim().is_empty()) {
        return Err(Refusal::unprocessable(
            "INVALID_CREDENTIALS",
            "the credentials were refused",
        ));
    }
    Ok(())
}

async fn create_integration(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<NewIntegrationBody>,
) -> ApiResult<(StatusCode, Json<Integration>)> {
    match &body.integration {
        NewIntegration::AdvocacyA { credentials: c, .. } => check_credentials(&[
            &c.username,
            c.password.expose_secret(),
            c.api_key.expose_secret(),
        ])?,
        NewIntegration::VoterFileA { credentials: c, .. }
        | NewIntegration::VoterFileAAlt { credentials: c, .. } => {
            check_credentials(&[&c.application_name, c.api_key.expose_secret()])?
        }
    }
    s.with_world(|w| {
        w.organization(&body.organization_id)?;
        let integration = Integration {
            id: w.id("int"),
            kind: Kind::Integration,
            name: body.integration.name().to_owned(),
            integration_type: body.integration.integration_type(),
            organization_id: body.organization_id.clone(),
            created_at: now(),
        };
        w.integrations
            .insert(integration.id.clone(), integration.clone());
        if let Some(org) = w.organizations.get_mut(&body.organization_id) {
            org.integrations.push(integration.id.clone());
        }
        Ok((StatusCode::CREATED, Json(integration)))
    })
}

async fn update_integration(
    State(s): State<AppState>,
    JsonBody(body): JsonBody<IntegrationPatch>,
) -> ApiResult<(StatusCode, Json<Integration>)> {
    s.with_world(|w: &mut World| {
        let integration = w
            .integrations
            .get(&body.integration_id)
            .ok_or_else(|| Refusal::not_found("integration", &body.integration_id))?;
        let expected = match &body.operation {
            IntegrationOperation::AdvocacyA { credentials: c } => {
                check_credentials(&[
                    &c.username,
                    c.password.expose_secret(),
                    c.api_key.expose_secret(),
                ])?;
                IntegrationType::AdvocacyA
            }
            IntegrationOperation::VoterFileA { credentials: c } => {
                check_credentials(&[&c.application_name, c.api_key.expose_secret()])?;
                IntegrationType::VoterFileA
            }
            IntegrationOperation::VoterFileAlt { credentials: c } => {
                check_credentials(&[&c.application_name, c.api_key.expose_secret()])?;
                IntegrationType::VoterFileAAlt
            }
        };
        if integration.integration_type != expected {
            return Err(ApiError(Refusal::unprocessable(
                "INTEGRATION_TYPE_MISMATCH",
                format!(
                    "integration {} is of type {}",
                    integration.id,
                    integration.integration_type.token()
                ),
            )));
        }
        Ok((StatusCode::CREATED, Json(integration.clone())))
    })
}

async fn message(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<MessageStatus>> {
    s.read(|w| {
        w.messages
            .get(&id)
            .map(|m| Json(m.status_resource()))
            .ok_or_else(|| ApiError(Refusal::not_found("message", &id)))
    })
}

async fn list_organizations(
    State(s): State<AppState>,
    params: Params,
) -> ApiResult<Json<Page<Organization>>> {
    let limit = s.config.default_page_size;
    s.read(|w| {
        page(
            w.organizations
                .iter()
                .filter(|(_, o)| params.matches("id", &o.id)),
            &params,
            limit,
        )
        .map(Json)
    })
}

async fn list_tags(State(s): State<AppState>, params: Params) -> ApiResult<Json<Page<Tag>>> {
    let limit = s.config.default_page_size;
    let visibility: Option<AgentVisibility> = params.parse("agentVisibility")?;
    s.read(|w| {
        let items = w.tags.iter().filter(|(_, t)| {
            params.matches("id", &t.id)
                && params.matches("name", &t.name)
                && params
                    .get("organizationId")
                    .is_none_or(|org| t.organization_id.as_deref() == Some(org))
                && visibility.is_none_or(|v| v == t.agent_visibility)
        });
        page(items, &params, limit).map(Json)
    })
}
