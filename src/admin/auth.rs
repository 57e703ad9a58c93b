//! Bearer tokens, compared in constant time against every configured token (no early exit,
//! so timing says neither which token nor how much of one matched).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret as _;
use subtle::{ConditionallySelectable as _, ConstantTimeEq as _};

use super::guard::ClientAddress;
use super::{AdminError, AdminState};
use crate::metrics::AuthAttempt;
use crate::settings::AdminToken;

/// Lets a request through only with a configured token. It guards every route but the
/// public ones (which the router keeps apart), and the fallback: unknown paths need a token
/// too, so the listener does not tell strangers what it serves.
pub async fn require_token(
    State(state): State<Arc<AdminState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let client = ClientAddress::of(request.extensions()).0;
    if let Err(limited) = state.failed_auth.check(client) {
        state
            .failed_auth
            .refused_unread(AuthAttempt::Bearer, &state.metrics);
        return AdminError::TooManyFailures(limited).into_response();
    }
    match authorized(&state, &request) {
        Ok(actor) => {
            request.extensions_mut().insert(actor);
            next.run(request).await
        }
        Err(Presented::Nothing) => AdminError::Unauthorized.into_response(),
        Err(Presented::Unknown) => {
            match state
                .failed_auth
                .failed(client, AuthAttempt::Bearer, &state.metrics)
            {
                Ok(()) => AdminError::Unauthorized.into_response(),
                Err(limited) => AdminError::TooManyFailures(limited).into_response(),
            }
        }
    }
}

/// Why a request is not authorized: no bearer token (not counted as a failure: it guesses
/// nothing), or one that matches no configured token.
enum Presented {
    Nothing,
    Unknown,
}

/// The name of the admin token a request was made with: the actor of what it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor(pub String);

fn authorized(state: &AdminState, request: &Request) -> Result<Actor, Presented> {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
        .ok_or(Presented::Nothing)?;
    matching_token(state, presented)
        .map(|token| Actor(token.name))
        .ok_or(Presented::Unknown)
}

/// The configured token equal to `presented` (among those in force now), compared with
/// every one in constant time.
pub(super) fn matching_token(state: &AdminState, presented: &str) -> Option<AdminToken> {
    let tokens = state.tokens.current();
    let mut matched = subtle::Choice::from(0);
    // Which token matched, chosen without a branch on the comparison.
    let mut index = 0u32;
    for (i, token) in tokens.iter().enumerate() {
        let equal = token
            .token
            .expose_secret()
            .as_bytes()
            .ct_eq(presented.as_bytes());
        index.conditional_assign(&u32::try_from(i).unwrap_or(u32::MAX), equal);
        matched |= equal;
    }
    if !bool::from(matched) {
        return None;
    }
    tokens.get(index as usize).cloned()
}

/// The token of `Bearer <token>` (scheme case-insensitive, as RFC 7235 says).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() && !token.contains(' '))
        .then_some(token)
}

#[cfg(test)]
mod tests {
    use super::bearer;

    #[test]
    fn only_a_well_formed_bearer_header_yields_a_token() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer abc"), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("Bearer a b"), None);
    }
}
