//! The request engine shared by the v3 and v2 methods: rate limit, token, retries.
//!
//! One file over 400 lines on purpose: the retry loop, the token cache and the rate limit
//! decide together what a request does next, and read best side by side.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use chrono::Utc;
use reqwest::{Method, StatusCode, Url};
use secrecy::ExposeSecret;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::Mutex;

use super::config::ClientConfig;
use super::error::ClientError;
use super::models::ErrorBody;
use super::rate::RateLimiter;
use super::token::{
    AccessToken, MemoryTokenGuardStore, TokenGuardState, TokenGuardStore, TokenResponse, TokenSlot,
};
use crate::model::backoff::Backoff;
use crate::settings::ApiVersion;

/// Whether a request may be sent again after the service may have acted on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replay {
    /// Reads, upserts, PUT, PATCH and DELETE: repeating them does no harm.
    Safe,
    /// Creations: retried only when the service surely did not act (429, refused connection).
    Unsafe,
}

/// One request, described once so every attempt sends the same thing.
pub(crate) struct Call {
    pub method: Method,
    pub url: Url,
    pub body: Option<Bytes>,
    pub replay: Replay,
}

/// What the service answered with a 2xx.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

impl Answer {
    pub fn json<T: DeserializeOwned>(&self, endpoint: &str) -> Result<T, ClientError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| ClientError::decode(endpoint, &e.to_string()))
    }
}

/// A failed attempt, and whether another may follow.
enum Attempt {
    Retry {
        error: ClientError,
        retry_after: Option<Duration>,
    },
    Fail(ClientError),
}

pub(crate) struct Inner {
    pub http: reqwest::Client,
    pub config: ClientConfig,
    base: Url,
    limiter: RateLimiter,
    token: Mutex<TokenSlot>,
    guard: Arc<dyn TokenGuardStore>,
    token_requests: AtomicU64,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceClient")
            .field("base_url", &self.config.base_url)
            .field("client_id", &self.config.client_id)
            .finish_non_exhaustive()
    }
}

impl Inner {
    pub fn new(config: ClientConfig, guard: Arc<dyn TokenGuardStore>) -> Result<Self, ClientError> {
        let base = Url::parse(&config.base_url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && !u.cannot_be_a_base())
            .ok_or_else(|| {
                ClientError::invalid(
                    "base_url",
                    format!(
                        "{} is not an http(s) URL",
                        crate::model::text::quoted(&config.base_url)
                    ),
                )
            })?;
        let http = reqwest::Client::builder()
            // A redirect is an answer, never followed: reqwest would send the request again,
            // body and all, to wherever `Location` points (a 307 after the token request
            // carries the client secret there; after a registration, its signing secret).
            .redirect(reqwest::redirect::Policy::none())
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("outreach-sync/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientError::transport(&e))?;
        Ok(Self {
            http,
            limiter: RateLimiter::new(config.requests_per_second, config.burst),
            base,
            config,
            token: Mutex::new(TokenSlot::default()),
            guard,
            token_requests: AtomicU64::new(0),
        })
    }

    pub fn memory_guard() -> Arc<dyn TokenGuardStore> {
        Arc::new(MemoryTokenGuardStore::default())
    }

    /// `{base_url}/{segments...}`, each segment percent-encoded.
    pub fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    /// Token requests made so far (successful or not).
    pub fn token_requests(&self) -> u64 {
        self.token_requests.load(Ordering::Relaxed)
    }

    /// Sends `call` until it succeeds, fails for good, or runs out of retries.
    pub async fn execute(&self, call: &Call) -> Result<Answer, ClientError> {
        let mut retries = 0u32;
        let mut refreshed = false;
        loop {
            let outcome = match self.current_token().await {
                Ok(token) => self.attempt(call, &token, &mut refreshed).await,
                Err(error) => Err(token_failure(error)),
            };
            let (error, retry_after) = match outcome {
                Ok(Some(answer)) => return Ok(answer),
                // A 401 replaced the token: go again at once, without spending a retry.
                Ok(None) => continue,
                Err(Attempt::Fail(error)) => return Err(error),
                Err(Attempt::Retry { error, retry_after }) => (error, retry_after),
            };
            if retries >= self.config.max_retries {
                return Err(ClientError::RetriesExhausted {
                    attempts: retries + 1,
                    last: Box::new(error),
                });
            }
            retries += 1;
            let wait = self.backoff(retries, retry_after);
            tracing::debug!(
                method = %call.method,
                path = call.url.path(),
                retry = retries,
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                error = %error,
                "retrying"
            );
            tokio::time::sleep(wait).await;
        }
    }

    /// One attempt. `Ok(None)`: the token was refused and has been replaced.
    async fn attempt(
        &self,
        call: &Call,
        token: &AccessToken,
        refreshed: &mut bool,
    ) -> Result<Option<Answer>, Attempt> {
        self.limiter.acquire().await;
        let mut request = self
            .http
            .request(call.method.clone(), call.url.clone())
            .bearer_auth(token.value.expose_secret())
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = &call.body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                self.config
                    .metrics
                    .upstream_transport_error(&self.config.account);
                return Err(transport_failure(&e, call.replay));
            }
        };
        let status = response.status();
        self.config
            .metrics
            .upstream_status(&self.config.account, status.as_u16());
        if status.is_redirection() {
            return Err(Attempt::Fail(redirected(&response)));
        }
        let retry_after = retry_after(response.headers());
        let body = match read_body(response, self.config.max_answer_bytes).await {
            Ok(body) => body,
            Err(Unread::TooLarge(limit)) => {
                return Err(Attempt::Fail(ClientError::TooLarge { limit }));
            }
            Err(Unread::Transport(e)) => return Err(transport_failure(&e, call.replay)),
        };
        tracing::debug!(method = %call.method, path = call.url.path(), status = status.as_u16(), "answered");
        if status.is_success() {
            return Ok(Some(Answer { status, body }));
        }
        let error_body = ErrorBody::parse_lenient(status.as_u16(), &body);
        if status == StatusCode::UNAUTHORIZED {
            if *refreshed {
                return Err(Attempt::Fail(ClientError::Unauthorized {
                    body: error_body,
                }));
            }
            *refreshed = true;
            self.invalidate(token.generation).await;
            return Ok(None);
        }
        let error = ClientError::Api {
            status: status.as_u16(),
            body: error_body,
        };
        let retryable = status == StatusCode::TOO_MANY_REQUESTS
            || (status.is_server_error() && call.replay == Replay::Safe);
        if retryable {
            Err(Attempt::Retry { error, retry_after })
        } else {
            Err(Attempt::Fail(error))
        }
    }

    /// The service's `Retry-After` when it gave one (up to `retry_after_max`), else the
    /// backoff from `backoff_base` to `backoff_max`.
    fn backoff(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.config.retry_after_max);
        }
        Backoff {
            first: self.config.backoff_base,
            most: self.config.backoff_max,
        }
        .wait(retry)
    }

    /// The shared token, minting one if there is none or it is about to expire. The lock is
    /// held while minting so that concurrent callers wait for one token instead of each
    /// asking for their own.
    pub async fn current_token(&self) -> Result<AccessToken, ClientError> {
        let mut slot = self.token.lock().await;
        if let Some(token) = slot.token.as_ref().filter(|t| t.is_fresh()) {
            return Ok(token.clone());
        }
        slot.token = None;
        let policy = self.config.token_policy;
        let state = self
            .guard
            .load()
            .await
            .map_err(|e| ClientError::Store(format!("{e:#}")))?;
        if let Some(until) = state.blocked_until.filter(|until| *until > Utc::now()) {
            return Err(ClientError::TokenBlocked {
                until,
                consecutive_failures: state.consecutive_failures,
            });
        }
        match self.request_token().await {
            Ok(response) => {
                if state != TokenGuardState::default() {
                    self.guard
                        .reset()
                        .await
                        .map_err(|e| ClientError::Store(format!("{e:#}")))?;
                }
                slot.minted += 1;
                let lifetime = Duration::try_from_secs_f64(response.expires_in.max(0.0))
                    .unwrap_or(Duration::ZERO);
                let token = AccessToken::new(
                    response.access_token,
                    lifetime,
                    policy.refresh_margin,
                    slot.minted,
                );
                slot.token = Some(token.clone());
                Ok(token)
            }
            Err(error) => {
                let ClientError::TokenRejected { status, .. } = error else {
                    // Not the service refusing the credentials (no answer, a 5xx, a 429): the
                    // request loop retries it with the ordinary backoff, and the guard, which
                    // is about credentials, does not count it.
                    tracing::warn!(error = %error, "token request failed; not a refusal of the credentials, will retry");
                    return Err(error);
                };
                let block_until = Utc::now()
                    + chrono::Duration::from_std(policy.block_for).unwrap_or(chrono::Duration::MAX);
                // Counted in the store, with every other process's failures.
                let TokenGuardState {
                    consecutive_failures,
                    blocked_until,
                } = self
                    .guard
                    .record_failure(policy.max_consecutive_failures, block_until)
                    .await
                    .map_err(|e| ClientError::Store(format!("{e:#}")))?;
                let blocked_until = blocked_until.filter(|until| *until > Utc::now());
                tracing::warn!(
                    consecutive_failures,
                    status,
                    "token request refused: check service.client_id and service.client_secret"
                );
                match blocked_until {
                    Some(until) => Err(ClientError::TokenBlocked {
                        until,
                        consecutive_failures,
                    }),
                    None => Err(ClientError::TokenRejected {
                        status,
                        consecutive_failures,
                    }),
                }
            }
        }
    }

    /// Forgets the token of `generation`, unless another task already replaced it.
    async fn invalidate(&self, generation: u64) {
        let mut slot = self.token.lock().await;
        if slot
            .token
            .as_ref()
            .is_some_and(|t| t.generation == generation)
        {
            slot.token = None;
        }
    }

    /// One token request. The response body is never echoed into errors: it may hold a
    /// token.
    async fn request_token(&self) -> Result<TokenResponse, ClientError> {
        #[derive(Serialize)]
        struct Grant<'a> {
            grant_type: &'static str,
            client_id: &'a str,
            client_secret: &'a str,
        }
        self.token_requests.fetch_add(1, Ordering::Relaxed);
        let version = match self.config.api_version {
            ApiVersion::V3 => "v3",
            ApiVersion::V2 => "v2",
        };
        let grant = Grant {
            grant_type: "client_credentials",
            client_id: &self.config.client_id,
            client_secret: self.config.client_secret.expose_secret(),
        };
        let response = self
            .http
            .post(self.url(&[version, "oauth", "token"]))
            .json(&grant)
            .send()
            .await
            .map_err(|e| ClientError::transport(&e))?;
        let status = response.status();
        self.config
            .metrics
            .upstream_status(&self.config.account, status.as_u16());
        if status.is_redirection() {
            return Err(redirected(&response));
        }
        let body = read_body(response, self.config.max_answer_bytes)
            .await
            .map_err(|unread| match unread {
                Unread::TooLarge(limit) => ClientError::TooLarge { limit },
                Unread::Transport(e) => ClientError::transport(&e),
            })?;
        if matches!(status.as_u16(), 400 | 401 | 403) {
            return Err(ClientError::TokenRejected {
                status: status.as_u16(),
                consecutive_failures: 0,
            });
        }
        if !status.is_success() {
            // Only the error body's message: a non-2xx carries no token.
            return Err(ClientError::Api {
                status: status.as_u16(),
                body: ErrorBody::parse_lenient(status.as_u16(), &body),
            });
        }
        serde_json::from_slice(&body).map_err(|_| ClientError::Decode {
            endpoint: "oauth/token".into(),
            message: "no access_token and expires_in in the answer".into(),
        })
    }
}

/// The error of a redirect answer, naming where it pointed.
fn redirected(response: &reqwest::Response) -> ClientError {
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .map(|value| value.as_bytes());
    ClientError::redirected(response.status().as_u16(), location)
}

/// Why an answer's body was not read.
enum Unread {
    /// It is longer than the limit (by its `Content-Length`, or as it arrived).
    TooLarge(usize),
    Transport(reqwest::Error),
}

/// The answer's body, read as it arrives and given up on past `limit` bytes: a body is
/// never held whole before its size is known (an answer may come chunked, without a
/// length).
async fn read_body(mut response: reqwest::Response, limit: usize) -> Result<Bytes, Unread> {
    let declared = response.content_length();
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(Unread::TooLarge(limit));
    }
    let capacity = declared.map_or(0, |length| length as usize);
    let mut body = bytes::BytesMut::with_capacity(capacity);
    while let Some(chunk) = response.chunk().await.map_err(Unread::Transport)? {
        if body.len() + chunk.len() > limit {
            return Err(Unread::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// Token failures that a later attempt may cure are retried by the request loop; only a
/// refusal of the credentials counts against the guard.
fn token_failure(error: ClientError) -> Attempt {
    match &error {
        ClientError::Transport(_) => Attempt::Retry {
            error,
            retry_after: None,
        },
        ClientError::Api { status, .. } if *status == 429 || *status >= 500 => Attempt::Retry {
            error,
            retry_after: None,
        },
        _ => Attempt::Fail(error),
    }
}

fn transport_failure(error: &reqwest::Error, replay: Replay) -> Attempt {
    // A refused connection means the request never left; a timeout means it may have been
    // acted on, so only safe requests go again.
    let retryable = error.is_connect()
        || (replay == Replay::Safe
            && (error.is_timeout() || error.is_request() || error.is_body()));
    let error = ClientError::transport(error);
    if retryable {
        Attempt::Retry {
            error,
            retry_after: None,
        }
    } else {
        Attempt::Fail(error)
    }
}

/// `Retry-After` as seconds or an HTTP date.
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs.max(0.0)).ok();
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    (when.with_timezone(&Utc) - Utc::now())
        .to_std()
        .ok()
        .or(Some(Duration::ZERO))
}
