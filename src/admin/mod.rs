//! The admin listener: the consent ledger, the mirror and the daemon's state over HTTP for
//! the campaign's other tools, on localhost by default. Every `/v1` route needs a bearer
//! token from `admin.tokens`; `/healthz` and `/metrics` need none.
//!
//! With no token configured the listener still starts (ingest must not stop because of
//! it) and logs a warning, but every `/v1` request is refused with 401.
//!
//! The router and the OpenAPI document are both generated from the handlers and their
//! records (`api`), so they cannot disagree.

mod api;
mod auth;
mod callers;
mod compliance;
mod consent;
mod console;
mod destinations;
mod error;
mod evidence;
pub mod guard;
mod import;
mod records;
mod review;
mod schemas;
mod sources;
mod state;
mod stream;
mod subscribers;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;

pub use api::openapi_document;
pub use error::{AdminError, BUSY_RETRY_SECS};
pub use state::AdminState;

/// Largest request body: a 10,000-number lookup is about 200 KB.
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// Runs `work` (a report, an import: long, and heavy between its awaits) on a thread of its
/// own rather than on the async workers, which answer every request, acknowledgements
/// included; its reads and writes still go through the runtime.
pub fn off_the_workers<F>(work: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || runtime.block_on(work))
}

/// The admin router over `state`.
pub fn router(state: AdminState) -> Router {
    if state.tokens.current().is_empty() {
        tracing::warn!(
            "admin.tokens is empty: every /v1 request of the admin listener is refused (401)"
        );
    }
    let state = Arc::new(state);
    let (public, with_token, _) = api::routes();
    // Unknown paths need a token too (the fallback is behind the check), so the listener
    // does not tell strangers what it serves.
    let with_token = with_token
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    let public = public.method_not_allowed_fallback(error::method_not_allowed);
    // The console signs in with a token too, but keeps it in a session of its own.
    console::router()
        .merge(public)
        .merge(with_token)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}
