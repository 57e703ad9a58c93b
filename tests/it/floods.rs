//! The attack suite's connection floods (see `hostile.rs` for the rest): slow heads, slow
//! bodies, idle connections, and a flood past the descriptor limit, against the limits of
//! [`outreach_sync::listener`].

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use outreach_sync::metrics::{Closed, Listener};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{
    ADMIN_TOKEN, consent_event, eventually, metrics_text, pace, series_value, spawn_app, trickle,
    with_admin_token,
};

/// Longest wait for the daemon to take in or close what a test opened.
const PATIENCE: Duration = Duration::from_secs(10);
use crate::daemon_process::{Daemon, SECRET, Signer};

/// How long after it began `stream` was closed by the daemon (read gives end of file or a
/// reset), waiting at most `limit`.
async fn closed_within(
    stream: &mut TcpStream,
    began: Instant,
    limit: Duration,
) -> Option<Duration> {
    let mut buffer = [0u8; 1024];
    tokio::time::timeout(limit, async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return began.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
    .ok()
}

/// Writes `start` at once, then `byte` every 200 ms, 50 times at most, until the daemon
/// closes the connection.
fn dribble(
    mut writer: tokio::net::tcp::OwnedWriteHalf,
    start: &'static [u8],
    byte: &'static [u8],
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let parts: Vec<&[u8]> = std::iter::once(start)
            .chain(std::iter::repeat_n(byte, 50))
            .collect();
        let _ = trickle(&mut writer, &parts, Duration::from_millis(200)).await;
    })
}

/// A connection to `to` from the loopback address `from` (127.0.0.0/8 is all loopback).
async fn connect_from(from: [u8; 4], to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((from, 0)))?;
    socket.connect(to).await
}

/// As found: 1,000 connections sending a header byte every 5 s were all held for 110 s.
#[tokio::test]
async fn a_head_sent_a_byte_at_a_time_is_cut_off_at_the_header_timeout() {
    let app = spawn_app(|s| s.ingest.header_timeout_secs = 1).await;
    let stream = TcpStream::connect(app.addr).await.unwrap();
    let began = Instant::now();
    let (mut reader, writer) = stream.into_split();
    let dribble = dribble(writer, b"POST /webhooks HTTP/1.1\r\n", b"x");
    let mut buffer = [0u8; 64];
    let closed = tokio::time::timeout(Duration::from_secs(6), async {
        while matches!(reader.read(&mut buffer).await, Ok(n) if n > 0) {}
        began.elapsed()
    })
    .await
    .expect("the slow head is still open after 6 s");
    dribble.abort();
    assert!(
        closed >= Duration::from_millis(900),
        "closed after {closed:?}"
    );
    let cut = app
        .metrics
        .connections_closed(Listener::Ingest, Closed::HeaderTimeout);
    assert_eq!(
        cut, 1,
        "the slow head is the one connection cut at the header timeout"
    );
    // The listener is as good as before.
    let event = consent_event("evt_after_slow_head", "+15550000701", true);
    assert_eq!(app.post_signed(&event).await.status(), 200);
    app.stop().await;
}

/// As found: one idle connection stayed open 180 s. An idle connection is closed; a
/// long-poll, busy for longer than the idle timeout, is answered.
#[tokio::test]
async fn a_connection_without_a_request_is_closed_when_idle_but_a_long_poll_outlives_it() {
    let app = spawn_app(|s| {
        with_admin_token(s);
        s.admin.idle_timeout_secs = 1;
    })
    .await;
    let long_poll = {
        let (http, url) = (
            app.http.clone(),
            app.admin_url("/v1/consent/changes?after=0&wait=3"),
        );
        tokio::spawn(async move {
            let began = Instant::now();
            let response = http.get(url).bearer_auth(ADMIN_TOKEN).send().await;
            (response.map(|r| r.status()), began.elapsed())
        })
    };
    let mut idle = TcpStream::connect(app.admin_addr).await.unwrap();
    let closed = closed_within(&mut idle, Instant::now(), Duration::from_secs(6))
        .await
        .expect("the idle connection is still open after 6 s");
    assert!(
        closed >= Duration::from_millis(900),
        "closed after {closed:?}"
    );
    let (status, took) = long_poll.await.unwrap();
    assert_eq!(status.expect("the long-poll is answered"), 200);
    assert!(
        took >= Duration::from_millis(2900),
        "answered after {took:?}"
    );
    app.stop().await;
}

/// A body that does not arrive whole within the body timeout is answered 408, and no
/// delivery is kept of it.
#[tokio::test]
async fn a_body_sent_too_slowly_is_answered_408() {
    let app = spawn_app(|s| s.ingest.body_timeout_secs = 1).await;
    let stream = TcpStream::connect(app.addr).await.unwrap();
    let (mut reader, writer) = stream.into_split();
    let dribble = dribble(
        writer,
        b"POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nX-Signature: 00\r\n\r\n{",
        b" ",
    );
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(6), reader.read_to_end(&mut answer)).await;
    dribble.abort();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within"), "{answer}");
    assert_eq!(app.outbox_rows().await, 0);
    app.stop().await;
}

/// At the cap a new connection takes the place of a quiet one of the address holding the
/// most; with every connection busy it is closed at once, and the busy ones are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_a_flood_evicts_its_own_connections_and_busy_ones_are_never_cut() {
    let app = spawn_app(|s| s.ingest.max_connections = 4).await;
    // A client at 127.0.0.2 takes every place, then a delivery from 127.0.0.1 arrives.
    let mut flood = Vec::new();
    for _ in 0..4 {
        flood.push(connect_from([127, 0, 0, 2], app.addr).await.unwrap());
    }
    let open = || app.metrics.open_connections(Listener::Ingest);
    eventually("the flood's 4 connections taken in", PATIENCE, async || {
        open() == 4
    })
    .await;
    let event = consent_event("evt_at_the_cap", "+15550000702", true);
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let headers = Signer::new(crate::common::SECRET).headers(event.as_bytes());
    let mut request = fresh.post(app.url("/webhooks")).body(event.clone());
    for (name, value) in &headers {
        request = request.header(name, value);
    }
    assert_eq!(request.send().await.unwrap().status(), 200);
    // The oldest of the flood made way.
    let closed = closed_within(&mut flood[0], Instant::now(), Duration::from_secs(3)).await;
    assert!(
        closed.is_some(),
        "the flood's oldest connection is still open"
    );

    // Four busy requests (bodies on their way), then a fifth connection: closed at once.
    let refused = || {
        app.metrics
            .connections_closed(Listener::Ingest, Closed::Refused)
    };
    assert_eq!(refused(), 0);
    assert!(
        app.metrics
            .connections_closed(Listener::Ingest, Closed::Evicted)
            >= 1
    );
    let mut busy = Vec::new();
    drop(flood);
    eventually("the flood's connections closed", PATIENCE, async || {
        open() == 0
    })
    .await;
    for _ in 0..4 {
        let mut stream = TcpStream::connect(app.addr).await.unwrap();
        let head = format!(
            "POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nExpect: 100-continue\r\n{}: {}\r\n\r\n",
            event.len(),
            headers[0].0,
            headers[0].1
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        // `100 Continue` comes when the handler asks for the body: the request is with
        // the router, so the connection is busy.
        let mut continued = [0u8; 25];
        stream.read_exact(&mut continued).await.unwrap();
        assert_eq!(&continued, b"HTTP/1.1 100 Continue\r\n\r\n");
        busy.push(stream);
    }
    let mut fifth = TcpStream::connect(app.addr).await.unwrap();
    let cut = closed_within(&mut fifth, Instant::now(), Duration::from_secs(3)).await;
    assert!(cut.is_some(), "a fifth connection was held with four busy");
    assert_eq!(refused(), 1, "the fifth connection alone was refused");
    // The busy ones finish their bodies and are answered.
    for stream in &mut busy {
        stream.write_all(event.as_bytes()).await.unwrap();
        let mut answer = [0u8; 12];
        stream.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"HTTP/1.1 200");
    }
    app.stop().await;
}

/// As found: with the unit's descriptor limit of 1,024, 10,000 idle connections on the
/// public ingest port stopped ingest, the admin API and `/healthz`. Here a daemon limited
/// to 512 descriptors, an idle flood and slow heads from another address that reconnect
/// whenever they are closed, and signed deliveries and admin requests all the while.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_past_the_descriptor_limit_stalls_neither_deliveries_nor_the_admin_listener() {
    rlimit::increase_nofile_limit(u64::MAX).expect("raise this test's open-file limit");
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(dir.path(), "flood", &[], Some(512)).await;
    // The default caps do not fit 512 descriptors: lowered, with a warning.
    assert!(
        daemon.logs().contains("do not fit the open-file limit"),
        "{}",
        daemon.logs()
    );
    let stop = tokio_util::sync::CancellationToken::new();
    let mut attackers = Vec::new();
    for n in 0..1_200 {
        let (stop, to) = (stop.clone(), daemon.ingest);
        let slow_head = n % 4 == 0;
        attackers.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                if let Ok(mut stream) = connect_from([127, 0, 0, 2], to).await {
                    let (mut reader, mut writer) = stream.split();
                    let mut buffer = [0u8; 64];
                    let closed =
                        async { while matches!(reader.read(&mut buffer).await, Ok(n) if n > 0) {} };
                    // A slow head: its first line, then a byte every 500 ms (for longer
                    // than the test lasts).
                    let head = async {
                        if slow_head {
                            let parts: Vec<&[u8]> =
                                std::iter::once(&b"POST /webhooks HTTP/1.1\r\n"[..])
                                    .chain(std::iter::repeat_n(&b"x"[..], 1_000))
                                    .collect();
                            let _ = trickle(&mut writer, &parts, Duration::from_millis(500)).await;
                        }
                        // Idle (or no longer written to): held until the daemon closes it.
                        std::future::pending::<()>().await;
                    };
                    tokio::select! {
                        () = closed => {}
                        () = head => {}
                        () = stop.cancelled() => {}
                    }
                }
                // Closed, or not taken: back a moment later, as a flood that holds what it
                // can would.
                pace(Duration::from_millis(200)).await;
            }
        }));
    }
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let evicted = async || {
        let metrics = metrics_text(&http, daemon.admin_url("/metrics")).await;
        series_value(
            &metrics,
            "outreach_sync_connections_closed_total{listener=\"ingest\",reason=\"evicted\"}",
        )
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
    };
    eventually("the flood at the cap", PATIENCE, async || {
        evicted().await > 0
    })
    .await;
    let signer = Signer::new(SECRET);
    let mut slowest = Duration::ZERO;
    for n in 0..30 {
        let event = consent_event(&format!("evt_flood_{n}"), "+15550000703", n % 2 == 0);
        let mut request = http.post(daemon.url("/webhooks")).body(event.clone());
        for (name, value) in signer.headers(event.as_bytes()) {
            request = request.header(name, value);
        }
        let began = Instant::now();
        let response = request.send().await.expect("a signed delivery is answered");
        assert_eq!(response.status(), 200);
        slowest = slowest.max(began.elapsed());
        let health = http.get(daemon.admin_url("/healthz")).send().await;
        assert_eq!(health.expect("the admin listener answers").status(), 200);
        pace(Duration::from_millis(100)).await;
    }
    stop.cancel();
    for attacker in attackers {
        let _ = attacker.await;
    }
    println!("slowest signed delivery during the flood: {slowest:?}");
}
