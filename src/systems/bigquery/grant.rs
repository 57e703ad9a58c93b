//! A service account's OAuth2 access token: the JWT bearer grant (RFC 7523), an RS256
//! assertion signed with the key's `private_key`, posted to the key's `token_uri` (https, or
//! http to this host: the assertion is a credential).

use std::time::{Duration, Instant};

use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::super::Stop;
use super::super::http::{MAX_ERROR_BODY, prefix, transport_error};
use super::super::warehouse::{Link, fingerprint};
use crate::model::text::bounded;

/// The scope a token is asked for.
const SCOPE: &str = "https://www.googleapis.com/auth/bigquery";
/// The JWT bearer grant (RFC 7523).
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// How long an assertion is valid: Google takes at most an hour.
const ASSERTION_LIFETIME: i64 = 3_600;
/// A service account's key file, as Google gives it (only what the grant needs).
#[derive(Deserialize)]
struct ServiceAccountKey {
    client_email: String,
    private_key: SecretString,
    #[serde(default)]
    private_key_id: Option<String>,
    token_uri: String,
}

/// A token in force, and the key it was granted to.
pub(super) struct Token {
    pub value: SecretString,
    pub expires: Instant,
    pub granted: Instant,
    pub key: [u8; 32],
}

/// A token granted for `link`'s key at its `token_uri`.
pub(super) async fn grant(link: &Link<'_>) -> Result<Token, Stop> {
    let key: ServiceAccountKey = serde_json::from_str(link.secret.expose_secret())
        .map_err(|_| Stop::Credentials("credentials_file: not a service account's JSON key (client_email, private_key, token_uri)".to_owned()))?;
    token_uri_allowed(&key.token_uri)?;
    let now = chrono::Utc::now().timestamp();
    let claims = json!({
        "iss": key.client_email,
        "scope": SCOPE,
        // Google's token endpoint, as Google documents the audience always is, wherever the
        // assertion is posted (the key's `token_uri`).
        "aud": GOOGLE_TOKEN_AUDIENCE,
        "iat": now,
        "exp": now + ASSERTION_LIFETIME,
    });
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = key.private_key_id.clone();
    let signing =
        jsonwebtoken::EncodingKey::from_rsa_pem(key.private_key.expose_secret().as_bytes())
            .map_err(|_| {
                Stop::Credentials(
                    "credentials_file: the private_key is not an RSA key in PEM".to_owned(),
                )
            })?;
    let assertion = jsonwebtoken::encode(&header, &claims, &signing)
        .map_err(|error| Stop::Credentials(format!("credentials_file: cannot sign: {error}")))?;
    let asked = Instant::now();
    let sent = link
        .http
        .post(&key.token_uri)
        .timeout(link.timeout)
        .form(&[
            ("grant_type", GRANT_TYPE),
            ("assertion", assertion.as_str()),
        ])
        .send()
        .await
        .map_err(|error| Stop::retry(format!("token: {}", transport_error(error))))?;
    let status = sent.status();
    let body = prefix(sent, 64 << 10).await;
    if !status.is_success() {
        #[derive(Deserialize, Default)]
        struct OAuthError {
            #[serde(default)]
            error: String,
            #[serde(default)]
            error_description: String,
        }
        let error: OAuthError = serde_json::from_str(&body).unwrap_or_default();
        let text = bounded(
            &format!(
                "token: answered {status}: {} {}",
                error.error, error.error_description
            ),
            MAX_ERROR_BODY,
        );
        return Err(match status.as_u16() {
            400 | 401 | 403 => Stop::Credentials(text),
            _ => Stop::retry(text),
        });
    }
    #[derive(Deserialize)]
    struct Granted {
        access_token: SecretString,
        #[serde(default = "an_hour")]
        expires_in: u64,
    }
    fn an_hour() -> u64 {
        3_600
    }
    let granted: Granted = serde_json::from_str(&body)
        .map_err(|_| Stop::retry("token: the answer holds no access_token".to_owned()))?;
    Ok(Token {
        value: granted.access_token,
        expires: asked + Duration::from_secs(granted.expires_in),
        granted: asked,
        key: fingerprint(link.secret),
    })
}

/// The audience of a service account's assertion ("Using OAuth 2.0 for Server to Server
/// Applications"): Google's token endpoint, whatever the key's `token_uri`.
const GOOGLE_TOKEN_AUDIENCE: &str = "https://oauth2.googleapis.com/token";

/// A key's `token_uri` is https, or http to this host: the assertion is a credential.
pub(super) fn token_uri_allowed(uri: &str) -> Result<(), Stop> {
    let parsed = reqwest::Url::parse(uri)
        .map_err(|_| Stop::Credentials("credentials_file: token_uri is not a URL".to_owned()))?;
    let host = parsed.host_str().unwrap_or_default();
    let loopback = host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err(Stop::Credentials(
            "credentials_file: token_uri must be https (or http to this host)".to_owned(),
        )),
    }
}
