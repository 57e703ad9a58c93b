//! The routes of the admin API and its OpenAPI 3 document, generated together from the
//! handlers (`#[utoipa::path]`) and the records they take and return (`ToSchema`,
//! `IntoParams`): a route is served exactly when it is documented.
//!
//! Who may call a route is the router's shape, not a flag: [`public`] routes are served
//! without a token, every other one sits behind the bearer check, and the document's
//! `security` and 401/429 answers are written from that same split.

use std::sync::{Arc, LazyLock};

use axum::Json;
use axum::Router;
use utoipa::OpenApi as _;
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::response::{ResponseBuilder, Responses};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, OpenApi, Ref, Required};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{
    AdminState, callers, compliance, consent, destinations, evidence, import, records, review,
    sources, stream, subscribers,
};
use crate::model::{
    DestinationStatus, OutcomeKind, PushState, Source, SubscriberStatus, Timestamp,
};

/// The name of the bearer scheme in `components/securitySchemes`.
const BEARER: &str = "bearer";

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "outreach-sync admin API",
        description = "The consent ledger for the campaign's other tools. Every error is {\"code\":N,\"message\":\"...\"}."
    ),
    components(schemas(
        Source,
        PushState,
        SubscriberStatus,
        DestinationStatus,
        OutcomeKind,
        Timestamp,
        crate::ingest::ErrorBody
    ))
)]
struct ApiDoc;

/// The routes served without a token.
fn public() -> OpenApiRouter<Arc<AdminState>> {
    OpenApiRouter::new()
        .routes(routes!(records::healthz))
        .routes(routes!(records::metrics))
}

/// The routes served with a configured bearer token only.
fn with_token() -> OpenApiRouter<Arc<AdminState>> {
    OpenApiRouter::new()
        .routes(routes!(consent::current, consent::record))
        .routes(routes!(compliance::report))
        .routes(routes!(import::import))
        .routes(routes!(consent::lookup))
        .routes(routes!(consent::changes))
        .routes(routes!(evidence::bundle))
        .routes(routes!(stream::consent))
        .routes(routes!(subscribers::list))
        .routes(routes!(subscribers::replay))
        .routes(routes!(subscribers::retry))
        .routes(routes!(destinations::list))
        .routes(routes!(destinations::outcomes))
        .routes(routes!(destinations::replay))
        .routes(routes!(destinations::retry))
        .routes(routes!(sources::list))
        .routes(routes!(callers::list))
        .routes(routes!(review::list))
        .routes(routes!(review::decide))
        .routes(routes!(records::find_leads))
        .routes(routes!(records::lead))
        .routes(routes!(records::message))
        .routes(routes!(records::status))
        .routes(routes!(document))
}

/// The public routes and the routes behind a token, each with its part of the document:
/// the token's answers (401, 429) added to the second's operations, `security: []` to the
/// first's.
pub(super) fn routes() -> (Router<Arc<AdminState>>, Router<Arc<AdminState>>, OpenApi) {
    let (public, mut public_doc) = public().split_for_parts();
    let (with_token, mut token_doc) = with_token().split_for_parts();
    for operation in operations(&mut public_doc) {
        operation.security = Some(Vec::new());
    }
    for operation in operations(&mut token_doc) {
        add_error(
            &mut operation.responses,
            401,
            "missing or unknown bearer token",
        );
        add_error(
            &mut operation.responses,
            429,
            "too many unknown bearer tokens from this client address ([admin] failed_auth_per_minute), or (reports, imports) as many running as the daemon takes at once; try again after Retry-After seconds",
        );
    }
    let mut document = ApiDoc::openapi();
    document.info.version = env!("CARGO_PKG_VERSION").into();
    // utoipa fills it from the package, which names none.
    document.info.license = None;
    document.merge(public_doc);
    document.merge(token_doc);
    consent::tag_only_with_an_opt_out(&mut document);
    for operation in operations(&mut document) {
        add_error(&mut operation.responses, 503, "the database is unavailable");
        // A path's parameters are always given (utoipa leaves `required` out of those whose
        // schema is `schema_with`).
        for parameter in operation.parameters.iter_mut().flatten() {
            if parameter.parameter_in == ParameterIn::Path {
                parameter.required = Required::True;
            }
        }
    }
    document.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
    if let Some(components) = document.components.as_mut() {
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
    (public, with_token, document)
}

/// Every operation of `document`.
fn operations(document: &mut OpenApi) -> impl Iterator<Item = &mut Operation> {
    document.paths.paths.values_mut().flat_map(|item| {
        [
            item.get.as_mut(),
            item.put.as_mut(),
            item.post.as_mut(),
            item.delete.as_mut(),
            item.options.as_mut(),
            item.head.as_mut(),
            item.patch.as_mut(),
            item.trace.as_mut(),
        ]
        .into_iter()
        .flatten()
    })
}

/// Documents `status` as answered with the JSON error body.
fn add_error(responses: &mut Responses, status: u16, description: &str) {
    let response = ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            Content::new(Some(Ref::from_schema_name("Error"))),
        )
        .build();
    responses
        .responses
        .insert(status.to_string(), response.into());
}

/// The document, built once.
static DOCUMENT: LazyLock<OpenApi> = LazyLock::new(|| routes().2);

/// The OpenAPI 3 document of the admin listener.
pub fn openapi_document() -> OpenApi {
    DOCUMENT.clone()
}

#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    operation_id = "openapi",
    summary = "This document",
    responses((status = 200, description = "success", body = Object))
)]
async fn document() -> Json<OpenApi> {
    Json(openapi_document())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::Value;

    use super::openapi_document;
    use crate::admin::consent::{MAX_CHANGES, MAX_LOOKUP, MAX_WAIT_SECS};
    use crate::model::MAX_REASON_CHARS;

    /// The committed copy, beside the other documents.
    const COMMITTED: &str = "docs/openapi.json";

    fn generated() -> String {
        let mut text = serde_json::to_string_pretty(&openapi_document()).unwrap();
        text.push('\n');
        text
    }

    #[test]
    fn the_committed_openapi_document_is_the_generated_one() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(COMMITTED);
        let generated = generated();
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(&path, &generated).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{COMMITTED} is not the document the handlers and records generate; \
             regenerate it with `UPDATE_OPENAPI=1 cargo test --lib the_committed_openapi_document` \
             and commit it"
        );
    }

    /// The bounds the attributes write as literals are the ones the handlers enforce.
    #[test]
    fn the_documented_bounds_are_the_enforced_ones() {
        let document = serde_json::to_value(openapi_document()).unwrap();
        let parameter = |path: &str, name: &str| -> Value {
            document["paths"][path]["get"]["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .unwrap()["schema"]
                .clone()
        };
        let limit = parameter("/v1/consent/changes", "limit");
        assert_eq!(limit["minimum"], 1);
        assert_eq!(
            parameter("/v1/consent", "phoneNumber")["pattern"],
            crate::model::phone::E164_PATTERN
        );
        assert_eq!(limit["maximum"], MAX_CHANGES);
        assert_eq!(
            parameter("/v1/consent/changes", "wait")["maximum"],
            MAX_WAIT_SECS
        );
        let schemas = &document["components"]["schemas"];
        assert_eq!(
            schemas["LocalChange"]["allOf"][0]["properties"]["reason"]["maxLength"],
            MAX_REASON_CHARS
        );
        assert_eq!(
            schemas["LookupRequest"]["properties"]["phoneNumbers"]["maxItems"],
            MAX_LOOKUP
        );
    }
}
