//! A subscriber for tests: a real HTTP server on loopback that answers as scripted, checks
//! every request's signature with the `standardwebhooks` crate (not the daemon's code), and
//! keeps what it was sent.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::Notify;

/// The secret tests configure subscribers with.
pub const SUBSCRIBER_SECRET: &str = "whsec_c3Vic2NyaWJlci1zZWNyZXQtMDEyMzQ1Njc4OWFi";

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
pub enum Reply {
    Ok,
    Status(u16),
    /// 429 with `Retry-After` in seconds.
    TooManyRequests(u64),
    /// No answer before the test is over (the daemon stops or moves on): never counted as
    /// accepted.
    Hang,
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    pub webhook_id: String,
    /// The signature checked out with the subscriber's secret.
    pub verified: bool,
    pub body: serde_json::Value,
    pub seqs: Vec<i64>,
    pub reply: Reply,
}

#[derive(Default)]
struct Shared {
    script: Mutex<(VecDeque<Reply>, Vec<Received>)>,
    arrived: Notify,
}

/// A running receiver.
pub struct Receiver {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// Serves on a free port, answering `script` in order and 200 after it.
    pub async fn start(script: impl IntoIterator<Item = Reply>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        Self::serve(listener, script)
    }

    /// Serves on `addr` (a port a test reserved, to come up late).
    pub async fn start_on(addr: SocketAddr, script: impl IntoIterator<Item = Reply>) -> Self {
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        Self::serve(listener, script)
    }

    fn serve(listener: tokio::net::TcpListener, script: impl IntoIterator<Item = Reply>) -> Self {
        let addr = listener.local_addr().expect("addr");
        let shared = Arc::new(Shared::default());
        shared.script.lock().expect("lock").0 = script.into_iter().collect();
        let router = axum::Router::new()
            .route("/hooks", axum::routing::post(receive))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.expect("serve");
        });
        Self { addr, shared, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hooks", self.addr)
    }

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        self.shared.script.lock().expect("lock").1.clone()
    }

    /// The seqs of the accepted requests, in arrival order, with repeats (the same
    /// `webhook-id` again) left out.
    pub fn accepted_seqs(&self) -> Vec<i64> {
        let mut seen = std::collections::HashSet::new();
        self.received()
            .into_iter()
            .filter(|r| matches!(r.reply, Reply::Ok))
            .filter(|r| seen.insert(r.webhook_id.clone()))
            .flat_map(|r| r.seqs)
            .collect()
    }

    /// Waits until `done` holds of the requests received, failing the test after `limit`.
    pub async fn wait_for(&self, limit: Duration, done: impl Fn(&[Received]) -> bool) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let arrived = self.shared.arrived.notified();
            if done(&self.received()) {
                return;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                panic!(
                    "the subscriber did not receive what was expected within {limit:?}; it got {:?}",
                    self.received()
                        .iter()
                        .map(|r| (&r.webhook_id, r.reply))
                        .collect::<Vec<_>>()
                );
            }
        }
    }

    /// Waits until the accepted entries are exactly `seqs`.
    pub async fn wait_for_seqs(&self, limit: Duration, seqs: &[i64]) {
        let want = seqs.to_vec();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let arrived = self.shared.arrived.notified();
            let got = self.accepted_seqs();
            if got.len() >= want.len() {
                assert_eq!(got, want, "the entries arrived in seq order, each once");
                return;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                panic!("after {limit:?} the subscriber had {got:?}, expected {want:?}");
            }
        }
    }

    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let verified = standardwebhooks::Webhook::new(SUBSCRIBER_SECRET)
        .expect("secret")
        .verify(&body, &headers)
        .is_ok();
    let body: serde_json::Value = serde_json::from_slice(&body).expect("a JSON body");
    let seqs = body["data"]["items"]
        .as_array()
        .expect("data.items")
        .iter()
        .map(|e| e["seq"].as_i64().expect("seq"))
        .collect();
    let reply = {
        let mut script = shared.script.lock().expect("lock");
        let reply = script.0.pop_front().unwrap_or(Reply::Ok);
        script.1.push(Received {
            at: Instant::now(),
            webhook_id: headers
                .get("webhook-id")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned(),
            verified,
            body,
            seqs,
            reply,
        });
        reply
    };
    shared.arrived.notify_waiters();
    match reply {
        // The daemon gives up on the request (its timeout, or its stop) before this ends.
        Reply::Hang => std::future::pending().await,
        Reply::Ok => StatusCode::OK.into_response(),
        Reply::Status(code) => StatusCode::from_u16(code).expect("status").into_response(),
        Reply::TooManyRequests(secs) => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", secs.to_string())],
        )
            .into_response(),
    }
}
