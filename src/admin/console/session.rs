//! Console sign-in: an admin token exchanged for a session cookie.
//!
//! The cookie carries 256 random bits and nothing else; the database keeps only their
//! SHA-256, the actor (the token's name), the SHA-256 of the token, and the session's form
//! token. Sessions are kept in the database so that every replica behind a load balancer
//! knows them, sign-out ends them everywhere, and removing a token from `admin.tokens` ends
//! the sessions made with it.
//!
//! Forms are safe from cross-site requests three times over: the cookie is
//! `SameSite=Strict`, every POST must carry the session's form token, and a POST whose
//! `Origin` is another site is refused. The sign-in form, made before any session exists,
//! carries a token that must match a short-lived cookie of its own (double submit).

use crate::store::SessionStore;
use std::time::Duration;

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Utc;
use cookie::{Cookie, CookieBuilder, SameSite};
use secrecy::ExposeSecret as _;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::ConsoleError;
use crate::admin::AdminState;
use crate::model::ConsoleSession;
use crate::store::Pool;

/// The session cookie.
pub const COOKIE: &str = "outreach_sync_session";
/// The sign-in form's double-submit cookie.
pub const SIGNIN_COOKIE: &str = "outreach_sync_signin";
/// A session unused this long is over.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// A session is over this long after sign-in, however active.
pub const LIFETIME: Duration = Duration::from_secs(12 * 60 * 60);
/// Uses of a session are written at most this often (each is a database write).
const TOUCH_EVERY: Duration = Duration::from_secs(60);
/// How long the sign-in form may stay open.
const SIGNIN_FORM_LIFETIME: Duration = Duration::from_secs(60 * 60);

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// 256 random bits, URL-safe.
fn random_token() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Whether `presented` equals `expected`, in constant time.
fn same_secret(expected: &str, presented: &str) -> bool {
    bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
}

/// A signed-in person: who they are, and the form token their POSTs must carry.
#[derive(Clone)]
pub struct Session {
    pub actor: String,
    pub csrf: String,
    id_hash: String,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("actor", &self.actor)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Refuses a form post that lacks the session's form token or comes from another site.
    pub fn check_form(
        &self,
        headers: &HeaderMap,
        presented: Option<&str>,
    ) -> Result<(), ConsoleError> {
        check_origin(headers)?;
        match presented {
            Some(token) if same_secret(&self.csrf, token) => Ok(()),
            _ => Err(ConsoleError::Forbidden(
                "This form is missing its security token, or it is out of date. Go back, reload the page and try again.",
            )),
        }
    }
}

/// Refuses a POST whose `Origin` (sent by every browser on a POST) is not this listener.
pub fn check_origin(headers: &HeaderMap) -> Result<(), ConsoleError> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest);
    match (origin_host, host) {
        (Some(origin_host), Some(host)) if origin_host.eq_ignore_ascii_case(host) => Ok(()),
        _ => Err(ConsoleError::Forbidden(
            "This form was sent from another site and was refused.",
        )),
    }
}

/// The value of the cookie `name` of a request.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|cookie| cookie.name() == name)
        .and_then(|cookie| cookie.value_raw())
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, for the whole listener; `Secure` when
/// the request came over HTTPS through a proxy that says so.
pub fn set_cookie(headers: &HeaderMap, name: &str, value: &str, max_age: Duration) -> HeaderValue {
    let secure = headers
        .get("x-forwarded-proto")
        .is_some_and(|p| p.as_bytes().eq_ignore_ascii_case(b"https"));
    let seconds = i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX);
    let cookie = ours(name, value, seconds).secure(secure);
    header_value(&cookie.build())
}

/// A `Set-Cookie` value that removes the cookie `name`.
pub fn clear_cookie(name: &'static str) -> HeaderValue {
    header_value(&ours(name, "", 0).build())
}

/// The attributes of every cookie the console sets.
fn ours<'c>(name: &'c str, value: &'c str, max_age_secs: i64) -> CookieBuilder<'c> {
    Cookie::build((name, value))
        .path("/")
        .max_age(cookie::time::Duration::seconds(max_age_secs))
        .http_only(true)
        .same_site(SameSite::Strict)
}

fn header_value(cookie: &Cookie<'_>) -> HeaderValue {
    // Only URL-safe base64 and fixed text: always a valid header value.
    HeaderValue::from_str(&cookie.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The sign-in form's token: a fresh one, and the cookie that goes with it.
pub fn signin_form(headers: &HeaderMap) -> (String, HeaderValue) {
    let token = random_token();
    let cookie = set_cookie(headers, SIGNIN_COOKIE, &token, SIGNIN_FORM_LIFETIME);
    (token, cookie)
}

/// Refuses a sign-in post whose form token does not match its cookie.
pub fn check_signin_form(headers: &HeaderMap, presented: Option<&str>) -> Result<(), ConsoleError> {
    check_origin(headers)?;
    match (cookie(headers, SIGNIN_COOKIE), presented) {
        (Some(expected), Some(presented)) if same_secret(expected, presented) => Ok(()),
        _ => Err(ConsoleError::Forbidden(
            "The sign-in form is out of date (or cookies are off). Reload the page and sign in again.",
        )),
    }
}

/// Signs in with `presented`: the new session and its cookie value, or `None` when the
/// token is not one of `admin.tokens`.
pub async fn sign_in(
    state: &AdminState,
    presented: &str,
) -> Result<Option<(Session, String)>, crate::store::Error> {
    let Some(token) = crate::admin::auth::matching_token(state, presented.trim()) else {
        return Ok(None);
    };
    let id = random_token();
    let now = Utc::now().timestamp_millis();
    let stored = ConsoleSession {
        id_hash: sha256_hex(&id),
        actor: token.name,
        token_hash: sha256_hex(token.token.expose_secret()),
        csrf: random_token(),
        created_ms: now,
        seen_ms: now,
        expires_ms: now.saturating_add(millis(LIFETIME)),
    };
    state.pool.create_session(&stored, millis(IDLE)).await?;
    let session = Session {
        actor: stored.actor,
        csrf: stored.csrf,
        id_hash: stored.id_hash,
    };
    Ok(Some((session, id)))
}

/// Ends `session` on every replica.
pub async fn sign_out(pool: &Pool, session: &Session) -> Result<(), crate::store::Error> {
    pool.delete_session(&session.id_hash).await
}

/// The session of a request's cookie, if it is signed in.
async fn current(
    state: &AdminState,
    headers: &HeaderMap,
) -> Result<Option<Session>, crate::store::Error> {
    let Some(id) = cookie(headers, COOKIE) else {
        return Ok(None);
    };
    let id_hash = sha256_hex(id);
    let now = Utc::now().timestamp_millis();
    let Some(stored) = state.pool.find_session(&id_hash, now, millis(IDLE)).await? else {
        return Ok(None);
    };
    // The token it was made with must still be configured, under the same name.
    let token_kept = state.tokens.current().iter().any(|token| {
        token.name == stored.actor
            && same_secret(&stored.token_hash, &sha256_hex(token.token.expose_secret()))
    });
    if !token_kept {
        state.pool.delete_session(&id_hash).await?;
        return Ok(None);
    }
    if now - stored.seen_ms >= millis(TOUCH_EVERY) {
        state.pool.touch_session(&id_hash, now).await?;
    }
    Ok(Some(Session {
        actor: stored.actor,
        csrf: stored.csrf,
        id_hash,
    }))
}

/// A page for signed-in people: anyone else is sent to the sign-in page, and back after.
/// Only to a page (a GET): the path of a form posted with a lapsed session (a replay,
/// sign-out) is no page, and the form cannot be sent again by a redirect.
impl FromRequestParts<std::sync::Arc<AdminState>> for Session {
    type Rejection = ConsoleError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &std::sync::Arc<AdminState>,
    ) -> Result<Self, Self::Rejection> {
        match current(state, &parts.headers).await? {
            Some(session) => Ok(session),
            None => {
                let page = parts.method == Method::GET || parts.method == Method::HEAD;
                let back = parts
                    .uri
                    .path_and_query()
                    .filter(|_| page)
                    .map(|p| p.as_str())
                    .filter(|p| *p != "/")
                    .map(|p| format!("?next={}", super::views::query_value(p)))
                    .unwrap_or_default();
                Err(ConsoleError::SignIn(format!("/signin{back}")))
            }
        }
    }
}

/// The sign-in page itself: the session if there is one.
impl OptionalFromRequestParts<std::sync::Arc<AdminState>> for Session {
    type Rejection = ConsoleError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &std::sync::Arc<AdminState>,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(current(state, &parts.headers).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("test header"));
        }
        map
    }

    #[test]
    fn a_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; outreach_sync_session=abc; b=2")]);
        assert_eq!(cookie(&h, COOKIE), Some("abc"));
        assert_eq!(cookie(&h, SIGNIN_COOKIE), None);
    }

    #[test]
    fn a_post_from_another_site_is_refused() {
        let ours = headers(&[
            ("host", "127.0.0.1:8081"),
            ("origin", "http://127.0.0.1:8081"),
        ]);
        assert!(check_origin(&ours).is_ok());
        let theirs = headers(&[
            ("host", "127.0.0.1:8081"),
            ("origin", "https://evil.example"),
        ]);
        assert!(check_origin(&theirs).is_err());
        let opaque = headers(&[("host", "127.0.0.1:8081"), ("origin", "null")]);
        assert!(check_origin(&opaque).is_err());
    }

    #[test]
    fn cookies_are_http_only_and_same_site_strict() {
        let plain = set_cookie(&HeaderMap::new(), COOKIE, "v", IDLE);
        let plain = plain.to_str().expect("ascii");
        assert!(plain.contains("HttpOnly") && plain.contains("SameSite=Strict"));
        assert!(!plain.contains("Secure"));
        let proxied = set_cookie(
            &headers(&[("x-forwarded-proto", "https")]),
            COOKIE,
            "v",
            IDLE,
        );
        // An attribute, wherever the crate writes it (after SameSite, before Path).
        let attributes = |value: &HeaderValue| {
            let text = value.to_str().expect("ascii").to_owned();
            text.split("; ")
                .skip(1)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert!(attributes(&proxied).iter().any(|a| a == "Secure"));
        assert_eq!(
            attributes(&set_cookie(&HeaderMap::new(), COOKIE, "v", IDLE)),
            ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=1800"]
        );
        assert_eq!(
            clear_cookie(COOKIE).to_str().expect("ascii"),
            "outreach_sync_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
        );
    }
}
