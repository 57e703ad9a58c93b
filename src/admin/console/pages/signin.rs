//! Sign-in and sign-out.

use std::sync::Arc;
use std::time::Duration;

use askama::Template;
use axum::Form;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{AppendHeaders, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::CsrfForm;
use crate::admin::AdminState;
use crate::admin::console::session::{self, Session};
use crate::admin::console::{ConsoleError, Frame, render};
use crate::admin::guard::{ClientAddress, Limited};
use crate::metrics::AuthAttempt;

/// A wrong token is answered this late, to slow down guessing.
const SIGNIN_FAILURE_DELAY: Duration = Duration::from_millis(500);
/// Said on the sign-in page of a daemon without tokens.
const NO_TOKENS: &str =
    "No admin token is configured (admin.tokens or admin.tokens_file), so no one can sign in yet.";
#[derive(Deserialize)]
pub struct SigninQuery {
    next: Option<String>,
    #[serde(rename = "signedOut")]
    signed_out: Option<bool>,
}

#[derive(Template)]
#[template(path = "console/signin.html")]
struct SigninPage {
    frame: Frame,
    form_token: String,
    next: String,
    error: Option<String>,
    notice: Option<String>,
}

/// Where to go after sign-in: a path of this listener, never another site; anything else
/// goes to `/`.
fn local_path(next: Option<&str>) -> String {
    match next {
        Some(path) if is_local_path(path) => path.to_owned(),
        _ => "/".to_owned(),
    }
}

/// `path` (as decoded from the query) names a page of this listener: one leading `/` not
/// followed by another `/` or a `\`, and no control character, white space or backslash
/// anywhere. Browsers drop tabs and line breaks from a URL and read `\` as `/`, so
/// `/<TAB>/evil.example` or `/\evil.example` would take a signed-in user to another host;
/// a line break would also split the `location` header.
fn is_local_path(path: &str) -> bool {
    let mut chars = path.chars();
    chars.next() == Some('/')
        && !matches!(chars.next(), Some('/' | '\\'))
        && !path
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '\\')
}

fn signin_page(
    headers: &HeaderMap,
    status: StatusCode,
    next: String,
    error: Option<String>,
    notice: Option<String>,
) -> Response {
    let (form_token, cookie) = session::signin_form(headers);
    let page = SigninPage {
        frame: Frame::signed_out(),
        form_token,
        next,
        error,
        notice,
    };
    let mut response = render(status, &page);
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

pub async fn signin_form(
    session: Option<Session>,
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    query: Result<Query<SigninQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(query) = query?;
    let next = local_path(query.next.as_deref());
    if session.is_some() {
        return Ok(Redirect::to(&next).into_response());
    }
    let notice = query
        .signed_out
        .unwrap_or(false)
        .then(|| "You have signed out.".to_owned());
    let error = state
        .tokens
        .current()
        .is_empty()
        .then(|| NO_TOKENS.to_owned());
    Ok(signin_page(&headers, StatusCode::OK, next, error, notice))
}

#[derive(Deserialize)]
pub struct SigninForm {
    csrf: Option<String>,
    token: Option<String>,
    next: Option<String>,
}

pub async fn signin(
    State(state): State<Arc<AdminState>>,
    ClientAddress(client): ClientAddress,
    headers: HeaderMap,
    form: Result<Form<SigninForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    session::check_signin_form(&headers, form.csrf.as_deref())?;
    let next = local_path(form.next.as_deref());
    if let Err(limited) = state.failed_auth.check(client) {
        state
            .failed_auth
            .refused_unread(AuthAttempt::SignIn, &state.metrics);
        return Ok(too_many_failures(&headers, next, limited));
    }
    let token = form.token.unwrap_or_default();
    let Some((signed_in, id)) = session::sign_in(&state, &token).await? else {
        tokio::time::sleep(SIGNIN_FAILURE_DELAY).await;
        if let Err(limited) = state
            .failed_auth
            .failed(client, AuthAttempt::SignIn, &state.metrics)
        {
            return Ok(too_many_failures(&headers, next, limited));
        }
        let message = if state.tokens.current().is_empty() {
            NO_TOKENS
        } else {
            "That is not one of the admin tokens (admin.tokens). Check it and try again."
        };
        return Ok(signin_page(
            &headers,
            StatusCode::UNAUTHORIZED,
            next,
            Some(message.to_owned()),
            None,
        ));
    };
    tracing::info!(actor = %signed_in.actor, "signed in to the console");
    let cookie = session::set_cookie(&headers, session::COOKIE, &id, session::LIFETIME);
    Ok((
        AppendHeaders([
            (header::SET_COOKIE, cookie),
            (
                header::SET_COOKIE,
                session::clear_cookie(session::SIGNIN_COOKIE),
            ),
        ]),
        Redirect::to(&next),
    )
        .into_response())
}

/// The sign-in page, answered 429 with `Retry-After` to an address past the limit of
/// failed sign-ins.
fn too_many_failures(headers: &HeaderMap, next: String, limited: Limited) -> Response {
    let secs = limited.retry_after_secs();
    let message = format!(
        "Too many failed sign-ins from your address. Try again in {secs} second{}.",
        if secs == 1 { "" } else { "s" }
    );
    let mut response = signin_page(
        headers,
        StatusCode::TOO_MANY_REQUESTS,
        next,
        Some(message),
        None,
    );
    if let Ok(value) = header::HeaderValue::from_str(&secs.to_string()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

pub async fn signout(
    session: Session,
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    session.check_form(&headers, form.csrf.as_deref())?;
    session::sign_out(&state.pool, &session).await?;
    tracing::info!(actor = %session.actor, "signed out of the console");
    Ok((
        AppendHeaders([(header::SET_COOKIE, session::clear_cookie(session::COOKIE))]),
        Redirect::to("/signin?signedOut=true"),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::local_path;

    #[test]
    fn sign_in_returns_only_to_a_page_of_this_listener() {
        assert_eq!(local_path(Some("/status")), "/status");
        assert_eq!(local_path(Some("//evil.example/")), "/");
        assert_eq!(local_path(Some("https://evil.example/")), "/");
        assert_eq!(local_path(Some("/\\evil.example")), "/");
        assert_eq!(local_path(None), "/");
        // As found: `?next=%2F%09%2Fevil.example`, which a browser reads as `//evil.example`.
        assert_eq!(local_path(Some("/\t/evil.example")), "/");
        assert_eq!(local_path(Some("/\n/evil.example")), "/");
        assert_eq!(local_path(Some("/status\r\nSet-Cookie: x=1")), "/");
        assert_eq!(local_path(Some(" //evil.example")), "/");
        assert_eq!(local_path(Some("/\u{0}/evil.example")), "/");
        assert_eq!(local_path(Some("/\u{3000}/evil.example")), "/");
        assert_eq!(local_path(Some("javascript:alert(1)")), "/");
        assert_eq!(
            local_path(Some("/lookup?phoneNumber=%2B1555")),
            "/lookup?phoneNumber=%2B1555"
        );
    }

    proptest::proptest! {
        #[test]
        fn whatever_next_says_the_redirect_is_a_valid_header_to_a_page_of_this_listener(
            next in proptest::option::of(".*"),
        ) {
            let path = local_path(next.as_deref());
            proptest::prop_assert!(path.starts_with('/'));
            proptest::prop_assert!(!path[1..].starts_with(['/', '\\']));
            proptest::prop_assert!(http::HeaderValue::from_str(&path).is_ok(), "{path:?}");
            if let Some(next) = &next {
                proptest::prop_assert!(path == "/" || &path == next);
            }
        }
    }
}
