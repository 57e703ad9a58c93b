//! The OpenAPI 3 document of the admin listener, built from the same route table as the
//! router, with the contract's JSON records as schemas.

use crate::model::{MAX_ID_CHARS, MAX_REASON_CHARS};
use axum::Json;
use serde_json::{Map, Value, json};

use super::{ROUTES, RouteSpec};

pub async fn document() -> Json<Value> {
    Json(build())
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

pub fn build() -> Value {
    let mut paths = Map::new();
    for route in ROUTES {
        let entry = paths
            .entry(route.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        entry[route.method.as_str().to_ascii_lowercase()] = operation(route);
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "outreach-sync admin API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The consent ledger for the campaign's other tools. Every error is {\"code\":N,\"message\":\"...\"}."
        },
        "paths": paths,
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas(),
        }
    })
}

/// One route's operation: its parameters, request body and responses.
fn operation(route: &RouteSpec) -> Value {
    let mut operation = json!({
        "operationId": route.operation_id,
        "summary": route.summary,
        "parameters": parameters(route),
        "responses": responses(route),
    });
    if route.public {
        operation["security"] = json!([]);
    }
    if let Some(name) = route.request {
        let content = match name {
            "CsvList" => json!({"text/csv": {"schema": {"type": "string",
                "description": "CSV with or without a header row; `,` `;` or tab; quoted fields; a UTF-8 BOM"}}}),
            name => {
                json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}})
            }
        };
        operation["requestBody"] = json!({"required": true, "content": content});
    }
    operation
}

/// The route's query parameters, then the parameters in its path.
fn parameters(route: &RouteSpec) -> Vec<Value> {
    route
        .query
        .iter()
        .map(|p| {
            json!({"name": p.name, "in": "query", "required": p.required,
                   "description": p.description, "schema": {"type": p.kind}})
        })
        .chain(
            route
                .path
                .split('/')
                .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
                .map(|name| {
                    json!({"name": name, "in": "path", "required": true,
                           "schema": {"type": "string"}})
                }),
        )
        .collect()
}

/// The route's success response, and the errors it can answer.
fn responses(route: &RouteSpec) -> Map<String, Value> {
    let (status, schema) = route.response;
    let content = match schema {
        Some("EventStream") => json!({"text/event-stream": {"schema": {"type": "string",
            "description": "Server-Sent Events: `id: SEQ`, `event: consent`, `data:` a LedgerEntry as JSON; `: heartbeat` comments"}}}),
        Some(name) => {
            json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}})
        }
        None => json!({"text/plain": {"schema": {"type": "string"}}}),
    };
    let mut responses = Map::new();
    responses.insert(
        status.to_string(),
        json!({"description": "success", "content": content}),
    );
    if !route.public {
        responses.insert(
            "401".into(),
            error_response("missing or unknown bearer token"),
        );
        responses.insert(
            "429".into(),
            error_response(
                "too many unknown bearer tokens from this client address ([admin] failed_auth_per_minute), or (reports, imports) as many running as the daemon takes at once; try again after Retry-After seconds",
            ),
        );
    }
    if !route.query.is_empty() || route.request.is_some() {
        responses.insert("400".into(), error_response("invalid parameters or body"));
    }
    if route.path.contains('{') {
        responses.insert("404".into(), error_response("not found"));
    }
    if route.request.is_some() {
        responses.insert("413".into(), error_response("body or batch too large"));
    }
    responses.insert("503".into(), error_response("the database is unavailable"));
    responses
}

fn string() -> Value {
    json!({"type": "string"})
}

fn nullable_string() -> Value {
    json!({"type": "string", "nullable": true})
}

fn items_of(name: &str) -> Value {
    json!({"type": "object", "required": ["items"], "properties": {
        "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{name}")}}}})
}

fn schemas() -> Value {
    let mut schemas = json!({
        "Error": {"type": "object", "required": ["code", "message"], "properties": {
            "code": {"type": "integer"}, "message": string()}},
        "Health": {"type": "object", "properties": {"status": string()}},
        "ConsentRecord": {"type": "object", "properties": {
            "organizationId": string(), "leadId": nullable_string(), "phoneNumber": string(),
            "optedOut": {"type": "boolean"}, "changedAt": string(),
            "source": {"type": "string", "enum": ["webhook", "reconcile", "local", "import"]}}},
        "ConsentItems": {"type": "object", "required": ["items", "suppressed"], "properties": {
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/ConsentRecord"}},
            "suppressed": {"type": "boolean", "description": "opted out for the whole account: a lead that appears with the number is opted out"},
            "suppressedSince": {"type": "string", "description": "when the account-wide opt-out happened (with suppressed)"},
            "suppressedBy": {"type": "integer", "description": "the ledger entry of that opt-out (with suppressed)"}}},
        "LedgerEntry": {"type": "object", "properties": {
            "seq": {"type": "integer"}, "organizationId": string(), "leadId": nullable_string(),
            "phoneNumber": string(), "optedOut": {"type": "boolean"}, "occurredAt": string(),
            "recordedAt": string(), "source": {"type": "string", "enum": ["webhook", "reconcile", "local", "import"]},
            "eventRef": string(), "superseded": {"type": "boolean"},
            "push": {"type": "string", "enum": ["pending", "sent", "failed", "superseded"],
                     "description": "local changes only"},
            "echoOf": {"type": "integer", "description": "the local change a returning webhook echoes"}}},
        "ChangePage": {"type": "object", "required": ["items", "next"], "properties": {
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/LedgerEntry"}},
            "next": {"type": "integer", "description": "pass as `after` for the next page"}}},
        "LookupRequest": {"type": "object", "required": ["phoneNumbers"], "properties": {
            "phoneNumbers": {"type": "array", "maxItems": 10000, "items": string()},
            "organizationId": string()}},
        "LookupResult": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/ConsentRecord"}},
            "unknown": {"type": "array", "items": string()}}},
        "LocalChange": {"type": "object", "required": ["phoneNumber", "organizationId", "optedOut"],
            "properties": {"phoneNumber": string(),
                "organizationId": {"type": "string", "maxLength": MAX_ID_CHARS},
                "optedOut": {"type": "boolean"},
                "tagId": {"type": "string", "maxLength": MAX_ID_CHARS},
                "reason": {"type": "string", "maxLength": MAX_REASON_CHARS}}},
        "LocalChangeRecorded": {"type": "object", "properties": {
            "seq": {"type": "integer"}, "eventRef": string(), "current": {"type": "boolean"},
            "push": string()}},
        "Lead": {"type": "object", "description": "the service's v3 Lead resource", "properties": {
            "id": string(), "type": string(), "phoneNumber": string(), "organizationId": string(),
            "activeGroupIds": {"type": "array", "items": string()},
            "inactiveGroupIds": {"type": "array", "items": string()},
            "customFields": {"type": "object", "additionalProperties": string()},
            "firstName": string(), "lastName": string(), "notes": string(), "followUp": string(),
            "email": string(), "postalCode": string(), "phoneNumberType": string(),
            "tagIds": {"type": "array", "items": string()}, "globalOptedOut": {"type": "boolean"},
            "createdAt": string()}},
        "LeadItems": items_of("Lead"),
        "Message": {"type": "object", "properties": {
            "id": string(), "threadId": string(), "status": string(), "type": string(),
            "createdAt": string(), "errorCode": string(), "leadId": string(),
            "organizationId": string(), "terminal": {"type": "boolean"}, "statusAt": string(),
            "source": string(), "updatedAt": string()}},
        "Status": {"type": "object", "additionalProperties": true,
            "description": "backlog, quarantined, reconciliation, pushes, lastError, \
                registrationCheck (the last `webhooks check`: checkedAt, ok, problems, \
                targetUrl; null before the first)"},
        "OpenApi": {"type": "object", "additionalProperties": true},
        "EvidenceBundle": {"type": "object", "additionalProperties": true,
            "description": "phoneNumber, generatedAt, chainHead {seq, hash}, canonicalEncoding, \
                items: ledger entries with tagId, reason, prevHash, hash and evidence"},
        "Subscriber": {"type": "object", "properties": {
            "name": string(), "url": string(), "cursor": {"type": "integer"},
            "lagEntries": {"type": "integer"}, "lagSeconds": {"type": "number"},
            "state": {"type": "string", "enum": ["active", "retrying", "disabled"]},
            "lastError": nullable_string(), "lastSuccessAt": nullable_string(),
            "nextAttemptAt": string()}},
        "SubscriberItems": items_of("Subscriber"),
        "ReplayRequest": {"type": "object", "required": ["fromSeq"], "properties": {
            "fromSeq": {"type": "integer", "minimum": 1,
                "description": "the first seq to send again; at most one past the cursor"}}},
    });
    if let (Value::Object(all), Value::Object(more)) =
        (&mut schemas, adoption_and_compliance_schemas())
    {
        all.extend(more);
    }
    schemas
}

/// The schemas of imports and of the compliance report.
fn adoption_and_compliance_schemas() -> Value {
    json!({
        "ComplianceReport": {"type": "object", "description": "For every opt-out that occurred in the window: its destinations (the service; each subscriber whose filters take it) and when each had it, its state against the deadline (`honoured`, `honouredLate`, `pending`, `overdue`), the confirmation message and the messages sent after it", "properties": {
            "since": string(), "until": string(), "deadlineBusinessDays": {"type": "integer"},
            "totals": {"type": "object", "properties": {
                "optOuts": {"type": "integer"}, "honoured": {"type": "integer"},
                "honouredLate": {"type": "integer"}, "pending": {"type": "integer"},
                "overdue": {"type": "integer"}, "sentAfterOptOut": {"type": "integer"}}},
            "destinations": {"type": "array", "items": {"type": "object", "properties": {
                "name": string(), "honoured": {"type": "integer"}, "pending": {"type": "integer"},
                "p50Secs": {"type": "number", "nullable": true}, "p99Secs": {"type": "number", "nullable": true},
                "maxSecs": {"type": "number", "nullable": true}}}},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "seq": {"type": "integer"}, "phoneNumber": string(), "organizationId": string(),
                "leadId": nullable_string(), "occurredAt": string(), "source": string(),
                "state": {"type": "string", "enum": ["honoured", "honouredLate", "pending", "overdue"]},
                "deadline": string(), "honouredAt": nullable_string(),
                "destinations": {"type": "array", "items": {"type": "object", "properties": {
                    "name": string(), "honouredAt": nullable_string()}}},
                "confirmation": {"$ref": "#/components/schemas/SentMessage"},
                "sentAfterOptOut": {"type": "array", "items": {"$ref": "#/components/schemas/SentMessage"}}}}}}},
        "SentMessage": {"type": "object", "nullable": true, "properties": {
            "id": string(), "status": string(), "createdAt": string()}},
        "ImportResult": {"type": "object", "properties": {
            "rows": {"type": "integer"}, "valid": {"type": "integer"},
            "invalid": {"type": "integer"}, "duplicatesInFile": {"type": "integer"},
            "alreadyOptedOut": {"type": "integer", "description": "(organization, number) pairs opted out already"},
            "recorded": {"type": "integer", "description": "ledger entries recorded"},
            "suppressed": {"type": "integer", "description": "numbers suppressed that were not"},
            "pushes": {"type": "integer", "description": "opt-outs queued for the service"},
            "sha256": string(), "dryRun": {"type": "boolean"},
            "invalidRows": {"type": "array", "items": {"$ref": "#/components/schemas/InvalidRow"}}}},
        "InvalidRow": {"type": "object", "properties": {
            "line": {"type": "integer"}, "value": string(), "reason": string()}}
    })
}
