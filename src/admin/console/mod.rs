//! The console: server-rendered pages on the admin listener for the people who answer for
//! consent. Look up a number (its consent now, and every ledger entry with what it stands
//! on), the daemon's status with a chart of deliveries, quarantined deliveries with replay,
//! a local opt-out/opt-in form, the replies put to a person with their decisions, and the import of an opt-out list (previewed, then confirmed).
//!
//! Sign-in takes an admin token (see [`session`]); the changes made in a session are
//! recorded with that token's name as their actor. Nothing is fetched from outside the
//! daemon: the templates (askama, escaped by default) and the one stylesheet are compiled
//! in, and the pages run no script.

mod pages;
mod session;

pub use pages::PendingImports;
mod views;

use std::sync::Arc;

use askama::Template;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use super::AdminState;

/// The console's routes, on the admin listener beside `/v1`.
pub fn router() -> Router<Arc<AdminState>> {
    Router::new()
        .route("/", get(pages::lookup))
        .route("/evidence", get(pages::evidence))
        .route("/status", get(pages::status))
        .route("/quarantine", get(pages::quarantine))
        .route("/quarantine/{id}/replay", post(pages::replay))
        .route("/subscribers/{name}/retry", post(pages::retry_subscriber))
        .route("/destinations/{name}/retry", post(pages::retry_destination))
        .route("/review", get(pages::review))
        .route("/review/{id}", post(pages::decide_reply))
        .route("/change", get(pages::change_form).post(pages::change))
        .route(
            "/import",
            get(pages::import_form)
                .post(pages::preview_import)
                .layer(DefaultBodyLimit::max(pages::MAX_UPLOAD_BYTES)),
        )
        .route("/import/confirm", post(pages::confirm_import))
        .route("/compliance", get(pages::compliance))
        .route("/compliance/report.html", get(pages::compliance_file))
        .route("/signin", get(pages::signin_form).post(pages::signin))
        .route("/signout", post(pages::signout))
        .route("/assets/console.css", get(stylesheet))
        // Browsers ask for it on every page; there is none, and no need to say 401.
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .layer(axum::middleware::map_response(protect))
}

/// Every console answer: no framing, no sniffing, no caching, no referrer to other sites,
/// and nothing loaded from anywhere but here.
async fn protect(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: with it a browser sends `Origin: null` on a form post, and the
    // origin check could no longer tell this site from another.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("console.css"),
    )
}

/// What every page's frame shows: who is signed in, the sign-out form, where we are.
#[derive(Debug, Clone)]
pub struct Frame {
    pub actor: Option<String>,
    pub csrf: String,
    /// The current page of the navigation: `lookup`, `status`, `quarantine`, `change`,
    /// `import`, `compliance`, `review`.
    pub page: &'static str,
}

impl Frame {
    fn of(session: &session::Session, page: &'static str) -> Self {
        Self {
            actor: Some(session.actor.clone()),
            csrf: session.csrf.clone(),
            page,
        }
    }

    fn signed_out() -> Self {
        Self {
            actor: None,
            csrf: String::new(),
            page: "",
        }
    }
}

/// A page, rendered.
fn render(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(error) => ConsoleError::Render(error).into_response(),
    }
}

#[derive(Template)]
#[template(path = "console/error.html")]
struct ErrorPage {
    frame: Frame,
    title: &'static str,
    message: String,
}

/// Why a console request failed, shown as a page.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// Not signed in: to the sign-in page (the location).
    #[error("sign in first")]
    SignIn(String),
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    #[error("the database is unavailable")]
    Database(#[from] crate::store::Error),
    #[error("the page could not be rendered")]
    Render(#[from] askama::Error),
    /// The long reads' places are taken ([`crate::admin::AdminError::Busy`]).
    #[error("{0}")]
    Busy(String),
}

impl From<crate::admin::AdminError> for ConsoleError {
    fn from(error: crate::admin::AdminError) -> Self {
        match error {
            crate::admin::AdminError::Database(error) => ConsoleError::Database(error),
            crate::admin::AdminError::NotFound(message) => ConsoleError::NotFound(message),
            crate::admin::AdminError::Busy => ConsoleError::Busy(error.to_string()),
            other => ConsoleError::BadRequest(other.to_string()),
        }
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let (status, title) = match &self {
            ConsoleError::SignIn(location) => return Redirect::to(location).into_response(),
            ConsoleError::Forbidden(_) => (StatusCode::FORBIDDEN, "Refused"),
            ConsoleError::BadRequest(_) => (StatusCode::BAD_REQUEST, "Not understood"),
            ConsoleError::NotFound(_) => (StatusCode::NOT_FOUND, "Not found"),
            ConsoleError::Busy(_) => (StatusCode::TOO_MANY_REQUESTS, "Busy"),
            ConsoleError::Database(error) => {
                tracing::error!(%error, "console request failed on the database");
                (StatusCode::SERVICE_UNAVAILABLE, "Unavailable")
            }
            ConsoleError::Render(error) => {
                tracing::error!(%error, "console page failed to render");
                (StatusCode::INTERNAL_SERVER_ERROR, "Error")
            }
        };
        let page = ErrorPage {
            frame: Frame::signed_out(),
            title,
            message: self.to_string(),
        };
        let mut response = match page.render() {
            Ok(html) => (status, Html(html)).into_response(),
            Err(_) => (status, self.to_string()).into_response(),
        };
        if let ConsoleError::Busy(_) = self {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(crate::admin::BUSY_RETRY_SECS),
            );
        }
        response
    }
}
