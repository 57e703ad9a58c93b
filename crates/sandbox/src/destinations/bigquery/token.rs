//! `POST /bigquery/oauth2/token`: Google's OAuth 2.0 token endpoint for a service account,
//! the JWT bearer grant (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`,
//! `assertion=<JWT>`, form-encoded). The JWT is checked as Google checks it: RS256 signed by
//! the registered key of its `iss`, `aud` Google's token endpoint as Google documents it
//! (`https://oauth2.googleapis.com/token`, whatever URL the assertion is posted to: the
//! key's `token_uri`), `iat` and `exp` at most an
//! hour apart and now between them (60 s of skew), a BigQuery scope. Errors are
//! `{"error","error_description"}` with Google's words. Not behind the fake's switchboard:
//! injected faults are for the API.

use std::time::{Duration, Instant};

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use chrono::Utc;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rand::Rng as _;
use rand::distributions::Alphanumeric;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{BIGQUERY_SCOPE, BigQuery};
use crate::destinations::FakesState;

/// The grant type of a service account's signed JWT.
const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// The token endpoint's path.
pub(super) const TOKEN_PATH: &str = "/bigquery/oauth2/token";

/// The audience of every service account assertion, as Google documents it ("Using OAuth
/// 2.0 for Server to Server Applications"), and as Google's client libraries sign it
/// whatever the key's `token_uri`.
const GOOGLE_TOKEN_AUDIENCE: &str = "https://oauth2.googleapis.com/token";

/// The broader scope that also grants BigQuery.
const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// The longest an assertion may live, `exp - iat`.
const MAX_ASSERTION_SECS: i64 = 3600;

/// The clock skew allowed on `iat` and `exp`.
const SKEW_SECS: i64 = 60;

/// Google's answer to an assertion whose `iat` and `exp` it refuses.
const SHORT_LIVED: &str = "Invalid JWT: Token must be a short-lived token (60 minutes) and in a \
     reasonable timeframe. Check your iat and exp values in the JWT claim.";

/// Google's answer to an assertion its key did not sign.
const BAD_SIGNATURE: &str = "Invalid JWT Signature.";

/// A service account's public key, as registered.
#[derive(Clone)]
pub(crate) struct PublicKey {
    key: DecodingKey,
}

impl PublicKey {
    /// An RSA public key in PEM (`PUBLIC KEY` or `RSA PUBLIC KEY`), or why not.
    pub(crate) fn from_pem(pem: &str) -> Result<Self, String> {
        if !pem.contains("PUBLIC KEY-----") {
            return Err("not a PEM public key".into());
        }
        DecodingKey::from_rsa_pem(pem.as_bytes())
            .map(|key| Self { key })
            .map_err(|e| format!("not an RSA public key: {e}"))
    }
}

/// A refused grant: 400 `{"error","error_description"}`.
#[derive(Debug)]
struct OAuthError {
    error: &'static str,
    description: String,
}

impl OAuthError {
    /// An OAuth `error` code and its description.
    fn new(error: &'static str, description: impl Into<String>) -> Self {
        Self {
            error,
            description: description.into(),
        }
    }

    /// `invalid_grant`: the assertion is refused.
    fn invalid_grant(description: impl Into<String>) -> Self {
        Self::new("invalid_grant", description)
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let body = json!({"error": self.error, "error_description": self.description});
        (StatusCode::BAD_REQUEST, Json(body)).into_response()
    }
}

/// The token request's form.
#[derive(Deserialize, Default)]
struct TokenForm {
    grant_type: Option<String>,
    assertion: Option<String>,
}

/// `POST /bigquery/oauth2/token`, beside the API (not under its switchboard).
pub(crate) fn routes() -> Router<FakesState> {
    Router::new().route(TOKEN_PATH, post(token))
}

/// `POST /bigquery/oauth2/token`: an access token for a valid assertion.
async fn token(
    State(fakes): State<FakesState>,
    form: Result<Form<TokenForm>, FormRejection>,
) -> Result<Response, OAuthError> {
    // A body that is not a form has no grant type, as Google sees it.
    let form = form.map(|Form(f)| f).unwrap_or_default();
    let grant_type = form.grant_type.unwrap_or_default();
    if grant_type != JWT_BEARER {
        return Err(OAuthError::new(
            "unsupported_grant_type",
            format!("Invalid grant_type: {grant_type}"),
        ));
    }
    let assertion = form.assertion.filter(|a| !a.is_empty()).ok_or_else(|| {
        OAuthError::new("invalid_request", "Missing required parameter: assertion")
    })?;
    let issuer = issuer(&assertion)?;
    let key = fakes
        .bigquery()
        .keys
        .get(&issuer)
        .cloned()
        .ok_or_else(|| OAuthError::invalid_grant("Invalid grant: account not found"))?;
    let claims = verified_claims(&assertion, &key)?;
    check_audience(&claims)?;
    check_times(&claims, Utc::now().timestamp())?;
    check_scope(&claims)?;
    let (access_token, expires_in) = fakes.bigquery().issue(Instant::now());
    let body =
        json!({"access_token": access_token, "expires_in": expires_in, "token_type": "Bearer"});
    Ok((
        StatusCode::OK,
        [(
            header::CACHE_CONTROL,
            "no-cache, no-store, max-age=0, must-revalidate",
        )],
        Json(body),
    )
        .into_response())
}

/// The `iss` of an assertion, read before its signature is checked (it names the key).
fn issuer(assertion: &str) -> Result<String, OAuthError> {
    let header = jsonwebtoken::decode_header(assertion)
        .map_err(|_| OAuthError::invalid_grant(BAD_SIGNATURE))?;
    if header.alg != Algorithm::RS256 {
        return Err(OAuthError::invalid_grant(BAD_SIGNATURE));
    }
    let claims: Value = jsonwebtoken::dangerous::insecure_decode_claims(assertion)
        .map_err(|_| OAuthError::invalid_grant(BAD_SIGNATURE))?;
    claims["iss"]
        .as_str()
        .filter(|iss| !iss.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| OAuthError::invalid_grant("Invalid grant: account not found"))
}

/// The claims, once the signature is good. Every other check is this fake's own, worded as
/// Google words it.
fn verified_claims(assertion: &str, key: &PublicKey) -> Result<Value, OAuthError> {
    let mut validation = Validation::new(Algorithm::RS256);
    validation.validate_exp = false;
    validation.validate_aud = false;
    validation.required_spec_claims.clear();
    jsonwebtoken::decode::<Value>(assertion, &key.key, &validation)
        .map(|data| data.claims)
        .map_err(|_| OAuthError::invalid_grant(BAD_SIGNATURE))
}

/// `aud` must be Google's token endpoint, as Google documents it: not the URL the assertion
/// was posted to.
fn check_audience(claims: &Value) -> Result<(), OAuthError> {
    if claims["aud"].as_str() == Some(GOOGLE_TOKEN_AUDIENCE) {
        return Ok(());
    }
    Err(OAuthError::invalid_grant(format!(
        "Invalid JWT: Failed audience check. The right audience is {GOOGLE_TOKEN_AUDIENCE}"
    )))
}

/// A claim in whole seconds since the epoch.
fn seconds(claims: &Value, name: &str) -> Option<i64> {
    let value = &claims[name];
    value.as_i64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.is_finite() && f.abs() < 1e15)
            .map(|f| f as i64)
    })
}

/// `iat` and `exp` present, at most an hour apart, and `now` between them (with skew).
fn check_times(claims: &Value, now: i64) -> Result<(), OAuthError> {
    let (Some(iat), Some(exp)) = (seconds(claims, "iat"), seconds(claims, "exp")) else {
        return Err(OAuthError::invalid_grant(SHORT_LIVED));
    };
    let short_lived = exp > iat && exp - iat <= MAX_ASSERTION_SECS;
    let in_time = iat <= now + SKEW_SECS && now <= exp + SKEW_SECS;
    if short_lived && in_time {
        Ok(())
    } else {
        Err(OAuthError::invalid_grant(SHORT_LIVED))
    }
}

/// The space-separated `scope` must grant BigQuery.
fn check_scope(claims: &Value) -> Result<(), OAuthError> {
    let scope = claims["scope"].as_str().unwrap_or_default();
    if scope.trim().is_empty() {
        return Err(OAuthError::new(
            "invalid_scope",
            "Empty or missing scope not allowed.",
        ));
    }
    if scope
        .split_whitespace()
        .any(|s| s == BIGQUERY_SCOPE || s == CLOUD_PLATFORM_SCOPE)
    {
        Ok(())
    } else {
        Err(OAuthError::new(
            "invalid_scope",
            "Invalid OAuth scope or ID token audience provided.",
        ))
    }
}

/// A new access token, `ya29.` and random characters.
fn new_access_token() -> String {
    let random: String = rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(64)
        .map(char::from)
        .collect();
    format!("ya29.c.{random}")
}

impl BigQuery {
    /// A new access token, valid for the token lifetime from `now`, and its `expires_in`.
    fn issue(&mut self, now: Instant) -> (String, u64) {
        self.tokens.retain(|_, expires| *expires > now);
        let token = new_access_token();
        let lifetime = self.token_lifetime_secs;
        self.tokens
            .insert(token.clone(), now + Duration::from_secs(lifetime));
        self.counts.tokens_issued += 1;
        (token, lifetime)
    }

    /// An access token this fake issued, not expired at `now`.
    pub(crate) fn token_valid(&self, token: &str, now: Instant) -> bool {
        self.tokens.get(token).is_some_and(|expires| now < *expires)
    }

    /// Accepts JWTs of `client_email` signed with the key of `pem` (replacing any other).
    pub(crate) fn add_key(&mut self, client_email: &str, pem: &str) -> Result<(), String> {
        let key = PublicKey::from_pem(pem)?;
        self.keys.insert(client_email.to_owned(), key);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_must_be_an_hour_at_most_and_around_now() {
        let now = 1_800_000_000;
        let claims = |iat: i64, exp: i64| json!({"iat": iat, "exp": exp});
        assert!(check_times(&claims(now, now + 3600), now).is_ok());
        assert!(check_times(&claims(now - 30, now + 10), now).is_ok());
        assert!(
            check_times(&claims(now, now + 3601), now).is_err(),
            "too long"
        );
        assert!(
            check_times(&claims(now - 7200, now - 3600), now).is_err(),
            "expired"
        );
        assert!(
            check_times(&claims(now + 600, now + 900), now).is_err(),
            "future"
        );
        assert!(
            check_times(&json!({"exp": now + 60}), now).is_err(),
            "no iat"
        );
    }

    #[test]
    fn the_audience_is_googles_token_endpoint_whatever_the_assertion_is_posted_to() {
        let aud = |a: &str| json!({ "aud": a });
        assert!(check_audience(&aud(GOOGLE_TOKEN_AUDIENCE)).is_ok());
        for bad in [
            "http://127.0.0.1:4000/bigquery/oauth2/token",
            "https://oauth2.googleapis.com/token/",
            "https://www.googleapis.com/oauth2/v4/token",
            "/bigquery/oauth2/token",
        ] {
            assert!(check_audience(&aud(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_private_key_is_not_a_public_key() {
        assert!(PublicKey::from_pem(super::super::BIGQUERY_TEST_PUBLIC_KEY).is_ok());
        assert!(PublicKey::from_pem("-----BEGIN PRIVATE KEY-----\nAAAA\n").is_err());
    }
}
