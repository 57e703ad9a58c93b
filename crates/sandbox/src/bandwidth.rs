//! Bandwidth's messaging callbacks (Messaging API v2), as a campaign's Bandwidth number sends
//! them: a JSON array of callbacks (`message-received` for an inbound text) posted to the
//! application's inbound callback URL. Bandwidth signs nothing: when the application has
//! callback credentials (a username and password set on it), it authenticates with HTTP
//! Basic, as RFC 7235 has it: the callback is first posted without credentials, and posted
//! again with them once the answer is a 401 with a `WWW-Authenticate` challenge (without the
//! header, Bandwidth does not try again). It takes any 2xx answered within 10 s as delivered
//! and retries for 24 hours otherwise.

use anyhow::Context as _;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};

/// The application the sandbox's Bandwidth number belongs to (a fixed id of the sandbox's
/// own), named by every callback.
pub const APPLICATION_ID: &str = "b0a1d2c3-5a4d-4b0c-8a3e-000000000003";
/// The `User-Agent` Bandwidth's callbacks come with.
pub const USER_AGENT: &str = "BandwidthAPI/v2";

/// A new message id in Bandwidth's style: the milliseconds of the Unix time and 16
/// lowercase letters and digits (`14762070468292kw2fuqty55yp2b2`).
pub fn new_message_id() -> String {
    use rand::Rng as _;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::thread_rng();
    let tail: String = (0..16)
        .map(|_| char::from(ALPHABET[rng.gen_range(0..ALPHABET.len())]))
        .collect();
    format!("{}{tail}", Utc::now().timestamp_millis())
}

/// An instant as Bandwidth writes them (RFC 3339, milliseconds, `Z`).
fn instant(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The `message-received` callback of a text from `from` (a person) to the campaign's
/// Bandwidth number `to`, received at `at`, as Bandwidth posts it (one object of the array).
pub fn inbound(message_id: &str, from: &str, to: &str, text: &str, at: DateTime<Utc>) -> Value {
    json!({
        "type": "message-received",
        "time": instant(at),
        "description": "Incoming message received",
        "to": to,
        "message": {
            "id": message_id,
            "owner": to,
            "applicationId": APPLICATION_ID,
            "time": instant(at),
            "segmentCount": 1,
            "direction": "in",
            "to": [to],
            "from": from,
            "text": text,
        },
    })
}

/// The `message-delivered` callback of a text the campaign's Bandwidth number `from` sent
/// to `to` (a person), delivered at `at`: a status of an outbound message (its text is
/// never in it), which a source of inbound texts must take and ignore.
pub fn delivered(message_id: &str, from: &str, to: &str, at: DateTime<Utc>) -> Value {
    json!({
        "type": "message-delivered",
        "time": instant(at),
        "description": "ok",
        "to": to,
        "message": {
            "id": message_id,
            "owner": from,
            "applicationId": APPLICATION_ID,
            "time": instant(at),
            "segmentCount": 1,
            "direction": "out",
            "to": [to],
            "from": from,
            "text": "",
        },
    })
}

/// Posts `callbacks` (as one JSON array) to `url` once, with HTTP Basic credentials when
/// given; the answer's status, body, and `WWW-Authenticate` header if it has one.
pub async fn send(
    http: &reqwest::Client,
    url: &str,
    credentials: Option<(&str, &str)>,
    callbacks: &[Value],
) -> anyhow::Result<(u16, String, Option<String>)> {
    let body = serde_json::to_vec(callbacks).context("writing the callbacks")?;
    let mut request = http
        .post(url)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/json; charset=utf-8",
        )
        .header(reqwest::header::USER_AGENT, USER_AGENT)
        .body(body);
    if let Some((username, password)) = credentials {
        request = request.basic_auth(username, Some(password));
    }
    let answer = request
        .send()
        .await
        .with_context(|| format!("{url}: posting the callbacks"))?;
    let status = answer.status().as_u16();
    let challenge = answer
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    let text = answer
        .text()
        .await
        .with_context(|| format!("{url}: reading the answer"))?;
    Ok((status, text, challenge))
}

/// Delivers `callbacks` to `url` as Bandwidth does: without `credentials`, one post without
/// them; with them, a first post without them, and a second with them when the first is
/// answered 401 with a Basic challenge in `WWW-Authenticate`. The last answer's status and
/// body.
pub async fn deliver(
    http: &reqwest::Client,
    url: &str,
    credentials: Option<(&str, &str)>,
    callbacks: &[Value],
) -> anyhow::Result<(u16, String)> {
    let (status, text, challenge) = send(http, url, None, callbacks).await?;
    let challenged = status == 401
        && challenge.is_some_and(|c| c.trim_start().to_ascii_lowercase().starts_with("basic"));
    match credentials {
        Some(credentials) if challenged => {
            let (status, text, _) = send(http, url, Some(credentials), callbacks).await?;
            Ok((status, text))
        }
        _ => Ok((status, text)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse as _;
    use base64::Engine as _;

    use super::*;
    use crate::config::{DEFAULT_BANDWIDTH_PASSWORD, DEFAULT_BANDWIDTH_USERNAME};

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-03-01T12:00:00.250Z")
            .expect("an instant")
            .with_timezone(&Utc)
    }

    #[test]
    fn an_inbound_text_is_a_message_received_callback_and_a_receipt_is_not() {
        let id = new_message_id();
        let received = inbound(&id, "+14155550100", "+15005550006", "STOP", at());
        assert_eq!(received["type"], "message-received");
        assert_eq!(received["time"], "2026-03-01T12:00:00.250Z");
        assert_eq!(received["to"], "+15005550006");
        let message = &received["message"];
        assert_eq!(message["id"], id.as_str());
        assert_eq!(message["owner"], "+15005550006");
        assert_eq!(message["direction"], "in");
        assert_eq!(message["to"], json!(["+15005550006"]));
        assert_eq!(message["from"], "+14155550100");
        assert_eq!(message["text"], "STOP");
        let receipt = delivered(&id, "+15005550006", "+14155550100", at());
        assert_eq!(receipt["type"], "message-delivered");
        assert_eq!(receipt["message"]["direction"], "out");
        assert_eq!(receipt["message"]["owner"], "+15005550006");
        assert_eq!(receipt["message"]["text"], "");
        assert_eq!(id.len(), 29, "{id}");
        assert!(id[..13].bytes().all(|b| b.is_ascii_digit()), "{id}");
        assert_ne!(new_message_id(), id);
    }

    /// A callback URL guarded as a daemon guards it: 401 with a challenge (or without one,
    /// when `challenge` is false) unless the credentials are the default ones. It records
    /// the `Authorization` header of each request.
    async fn guarded(challenge: bool) -> (String, Arc<Mutex<Vec<Option<String>>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!(
                "{DEFAULT_BANDWIDTH_USERNAME}:{DEFAULT_BANDWIDTH_PASSWORD}"
            ))
        );
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: bytes::Bytes| {
                let authorization = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                log.lock()
                    .expect("not poisoned")
                    .push(authorization.clone());
                let array = serde_json::from_slice::<Value>(&body).is_ok_and(|v| v.is_array());
                async move {
                    match (authorization == Some(expected), challenge) {
                        (true, _) if array => (StatusCode::OK, "taken").into_response(),
                        (true, _) => StatusCode::BAD_REQUEST.into_response(),
                        (false, true) => (
                            StatusCode::UNAUTHORIZED,
                            [("www-authenticate", "Basic realm=\"outreach-sync\"")],
                        )
                            .into_response(),
                        (false, false) => StatusCode::UNAUTHORIZED.into_response(),
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!("http://{}/hook", listener.local_addr().expect("an address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, seen)
    }

    #[tokio::test]
    async fn credentials_are_sent_once_challenged_and_never_without_a_challenge() {
        let http = reqwest::Client::new();
        let callbacks = [inbound(
            &new_message_id(),
            "+14155550100",
            "+15005550006",
            "STOP",
            at(),
        )];
        let credentials = Some((DEFAULT_BANDWIDTH_USERNAME, DEFAULT_BANDWIDTH_PASSWORD));

        let (url, seen) = guarded(true).await;
        let (status, text, challenge) = send(&http, &url, None, &callbacks).await.expect("sent");
        assert_eq!(status, 401);
        assert!(text.is_empty(), "{text}");
        assert_eq!(challenge.as_deref(), Some("Basic realm=\"outreach-sync\""));
        let answer = deliver(&http, &url, credentials, &callbacks)
            .await
            .expect("sent");
        assert_eq!(answer, (200, "taken".to_owned()));
        let answer = send(&http, &url, credentials, &callbacks)
            .await
            .expect("sent");
        assert_eq!(answer, (200, "taken".to_owned(), None));
        let seen = seen.lock().expect("not poisoned").clone();
        assert_eq!(seen.len(), 4, "{seen:?}");
        assert!(seen[0].is_none() && seen[1].is_none(), "{seen:?}");
        assert!(seen[2].as_deref().is_some_and(|a| a.starts_with("Basic ")));

        let (url, seen) = guarded(false).await;
        let answer = deliver(&http, &url, credentials, &callbacks)
            .await
            .expect("sent");
        assert_eq!(answer.0, 401);
        assert_eq!(*seen.lock().expect("not poisoned"), vec![None]);
    }
}
