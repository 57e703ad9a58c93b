//! Following the ledger live: `GET /v1/consent/stream` (Server-Sent Events, resumed with
//! `Last-Event-ID`) and `wait=` on `GET /v1/consent/changes`.

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::Value;

use crate::common::{
    ADMIN_TOKEN, Backend, TestApp, consent_event, eventually, on_both_backends, spawn_app,
    spawn_app_on, with_admin_token,
};

const PATIENCE: Duration = Duration::from_secs(10);

/// One Server-Sent Event.
#[derive(Debug)]
struct SseEvent {
    id: i64,
    event: String,
    data: Value,
}

/// A connection to the stream, read event by event.
struct SseClient {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    text: String,
}

impl SseClient {
    async fn connect(app: &TestApp, last_event_id: Option<i64>) -> Self {
        let mut request = app
            .http
            .get(app.admin_url("/v1/consent/stream"))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await.expect("stream");
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"].to_str().expect("text"),
            "text/event-stream"
        );
        Self {
            body: response.bytes_stream().boxed(),
            text: String::new(),
        }
    }

    /// The next event (comments skipped), or `None` if none comes within `limit`.
    async fn next(&mut self, limit: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            while let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let field = |name: &str| {
                    block
                        .lines()
                        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                        .map(|v| v.trim_start().to_owned())
                };
                if let (Some(id), Some(event), Some(data)) =
                    (field("id"), field("event"), field("data"))
                {
                    return Some(SseEvent {
                        id: id.parse().expect("a seq"),
                        event,
                        data: serde_json::from_str(&data).expect("JSON data"),
                    });
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .ok()??;
            self.text
                .push_str(std::str::from_utf8(&chunk.expect("chunk")).expect("utf-8"));
        }
    }

    async fn ids(&mut self, n: usize) -> Vec<i64> {
        let mut ids = Vec::new();
        for _ in 0..n {
            let event = self.next(PATIENCE).await.expect("an event");
            assert_eq!(event.event, "consent");
            assert_eq!(event.data["seq"], event.id);
            ids.push(event.id);
        }
        ids
    }
}

async fn opt_out(app: &TestApp, i: usize) {
    let event = consent_event(&format!("evt_{i}"), &format!("+1555300{i:04}"), true);
    assert_eq!(app.post_signed(&event).await.status(), 200);
}

async fn an_sse_client_that_resumes_with_last_event_id_misses_nothing(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    for i in 1..=3 {
        opt_out(&app, i).await;
    }
    let mut client = SseClient::connect(&app, None).await;
    assert_eq!(client.ids(3).await, [1, 2, 3]);
    // Live: entries committed while connected arrive without asking.
    for i in 4..=5 {
        opt_out(&app, i).await;
    }
    assert_eq!(client.ids(2).await, [4, 5]);
    drop(client);

    for i in 6..=8 {
        opt_out(&app, i).await;
    }
    let mut resumed = SseClient::connect(&app, Some(5)).await;
    assert_eq!(resumed.ids(3).await, [6, 7, 8]);
    // The stream sends in order: anything sent twice or made up would come before the
    // next entry.
    opt_out(&app, 9).await;
    assert_eq!(resumed.ids(1).await, [9], "nothing twice, nothing made up");
    // `after=` works as a start too, and a malformed Last-Event-ID is refused.
    let after: Vec<i64> = {
        let response = app
            .http
            .get(app.admin_url("/v1/consent/stream?after=7"))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .expect("stream");
        let mut client = SseClient {
            body: response.bytes_stream().boxed(),
            text: String::new(),
        };
        client.ids(1).await
    };
    assert_eq!(after, [8]);
    let bad = app
        .http
        .get(app.admin_url("/v1/consent/stream"))
        .bearer_auth(ADMIN_TOKEN)
        .header("Last-Event-ID", "latest")
        .send()
        .await
        .expect("request");
    assert_eq!(bad.status(), 400);
    app.stop().await;
}
on_both_backends!(an_sse_client_that_resumes_with_last_event_id_misses_nothing);

async fn the_change_feed_waits_for_the_next_entry_when_asked(backend: Backend) {
    let Some(app) = spawn_app_on(backend, with_admin_token).await else {
        return;
    };
    opt_out(&app, 1).await;
    let app = std::sync::Arc::new(app);
    let waiting = {
        let app = app.clone();
        tokio::spawn(async move {
            let page: Value = app
                .admin_get("/v1/consent/changes?after=1&wait=30")
                .await
                .json()
                .await
                .expect("json");
            (page, Instant::now())
        })
    };
    // Nothing newer yet: the request waits (a request answered at once never counts).
    eventually("the request to wait", PATIENCE, async || {
        app.metrics.change_feed_waiting() == 1
    })
    .await;
    assert!(!waiting.is_finished(), "the request waits unanswered");
    let posted = Instant::now();
    opt_out(&app, 2).await;
    let (page, answered) = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("answered")
        .expect("join");
    assert_eq!(page["items"][0]["seq"], 2);
    assert_eq!(page["next"], 2);
    assert_eq!(
        app.metrics.change_feed_waiting(),
        0,
        "answered: no longer waits"
    );
    if backend == Backend::Sqlite {
        // Woken by the commit, not by a poll (which comes every second).
        let waited = answered - posted;
        assert!(waited < Duration::from_millis(900), "{waited:?}");
    }

    let started = Instant::now();
    let empty: Value = app
        .admin_get("/v1/consent/changes?after=2&wait=1")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(empty["items"].as_array().map(Vec::len), Some(0));
    assert_eq!(empty["next"], 2);
    assert!(started.elapsed() >= Duration::from_millis(950));
    let too_long = app.admin_get("/v1/consent/changes?after=2&wait=61").await;
    assert_eq!(too_long.status(), 400);
    if let Ok(app) = std::sync::Arc::try_unwrap(app) {
        app.stop().await;
    }
}
on_both_backends!(
    the_change_feed_waits_for_the_next_entry_when_asked,
    flavor = "multi_thread",
    worker_threads = 2
);

#[tokio::test]
async fn the_openapi_document_describes_the_stream_and_the_subscribers() {
    let app = spawn_app(with_admin_token).await;
    let document: Value = app
        .admin_get("/v1/openapi.json")
        .await
        .json()
        .await
        .expect("json");
    let paths = &document["paths"];
    assert!(
        paths["/v1/consent/stream"]["get"]["responses"]["200"]["content"]["text/event-stream"]
            .is_object()
    );
    let wait = paths["/v1/consent/changes"]["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .any(|p| p["name"] == "wait");
    assert!(wait);
    assert!(paths["/v1/subscribers"]["get"].is_object());
    assert!(paths["/v1/subscribers/{name}/replay"]["post"]["requestBody"].is_object());
    app.stop().await;
}
