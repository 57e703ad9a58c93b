//! POST /oauth/token (client credentials, JSON), under /v3 and /v2. Counted, so tests can
//! check how often a client asks.

use std::sync::atomic::Ordering;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use secrecy::ExposeSecret as _;

use super::{ApiError, ApiResult, AppState, JsonBody};
use crate::wire::{Token, TokenGrant as Grant};
use crate::world::Refusal;

pub(super) fn routes_v3() -> Router<AppState> {
    Router::new().route("/oauth/token", post(token_v3))
}

pub(super) fn routes_v2() -> Router<AppState> {
    Router::new().route("/oauth/token", post(token_v2))
}

async fn token_v3(
    State(shared): State<AppState>,
    body: Result<JsonBody<Grant>, ApiError>,
) -> ApiResult<Json<Token>> {
    mint(&shared, body, 401)
}

/// v2.1 answers a refusal with 403.
async fn token_v2(
    State(shared): State<AppState>,
    body: Result<JsonBody<Grant>, ApiError>,
) -> ApiResult<Json<Token>> {
    mint(&shared, body, 403)
}

fn mint(
    shared: &AppState,
    body: Result<JsonBody<Grant>, ApiError>,
    refused: u16,
) -> ApiResult<Json<Token>> {
    shared.stats.token_requests.fetch_add(1, Ordering::Relaxed);
    let outcome = body.and_then(|JsonBody(grant)| {
        if grant.grant_type != "client_credentials" {
            return Err(ApiError::bad_request(
                "grant_type must be client_credentials",
            ));
        }
        let config = &shared.config;
        if grant.client_id != config.client_id
            || grant.client_secret.expose_secret() != config.client_secret
        {
            return Err(ApiError(Refusal::new(
                refused,
                "invalid client credentials",
            )));
        }
        Ok(())
    });
    if let Err(error) = outcome {
        shared.stats.token_failures.fetch_add(1, Ordering::Relaxed);
        return Err(error);
    }
    let lifetime = shared.config.token_lifetime;
    // Whole seconds as an integer, as the service writes them.
    let expires_in = if lifetime.subsec_nanos() == 0 {
        serde_json::Number::from(lifetime.as_secs())
    } else {
        serde_json::Number::from_f64(lifetime.as_secs_f64())
            .unwrap_or_else(|| serde_json::Number::from(lifetime.as_secs()))
    };
    Ok(Json(Token {
        access_token: shared.mint_token(),
        token_type: "Bearer",
        scope: "account",
        expires_in,
    }))
}
