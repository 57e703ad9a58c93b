//! Serving a router on a bound socket with the limits a listener facing the internet needs:
//! a cap on open connections, and a deadline for every phase in which a client, not the
//! daemon, holds a connection up.
//!
//! Each connection is, at any moment, in one of three phases:
//! - **waiting**: open with no request begun (just accepted, or between keep-alive requests);
//!   closed after [`Limits::idle_timeout`];
//! - **reading a head**: the first byte of a request has arrived, not yet its last header;
//!   closed once [`Limits::header_timeout`] has passed since that first byte;
//! - **busy**: a request is with the router, or its response is still being sent (a
//!   long-poll or an event stream stays busy as long as it runs); its body must arrive
//!   whole within [`Limits::body_timeout`], after which reading it fails with
//!   [`BodyTimedOut`]. A busy connection is never closed for idleness.
//!
//! At the cap a new connection takes the place of a connection with no request in progress:
//! the oldest of the client address holding the most connections (a flood of idle or slow
//! clients evicts itself, not the next delivery); when every connection is busy the new one
//! is closed at once. Nothing is
//! read from an evicted or refused connection, and closing one that is not busy loses
//! nothing: no request of it is with the router.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use crate::metrics::{Closed, Listener, Metrics};

/// Request bodies read against the deadline.
mod body;
/// The cap on open connections and who makes room at it.
mod cap;
pub use body::body_timeout;
use body::{DeadlineBody, HeldBody};
use cap::Open;
pub use cap::{RESERVED_DESCRIPTORS, fit_descriptors};

/// Largest request head (start line and headers) read, in bytes: a larger one is answered
/// 431, so a slow client cannot make a connection hold more than this.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Largest read buffer of a connection (a body is read through it in pieces).
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// How long an accept that failed for want of descriptors waits before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Connections the kernel queues for accepting (capped by `net.core.somaxconn`): a burst of
/// connections, a flood's churn among them, must not overflow the queue, or the kernel
/// drops the next delivery's SYN and its client waits a second to send it again.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds `addr` (reusing a port in TIME_WAIT, as `TcpListener::bind` does) with a queue of
/// [`LISTEN_BACKLOG`].
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// The limits of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Open connections at most.
    pub max_connections: usize,
    /// A request's head must be complete this long after its first byte.
    pub header_timeout: Duration,
    /// A request's body must be complete this long after its head.
    pub body_timeout: Duration,
    /// A connection with no request in progress is closed after this.
    pub idle_timeout: Duration,
}

impl Limits {
    /// Limits from a listener's settings: the cap, and its timeouts in seconds.
    pub fn from_settings(
        max_connections: usize,
        header_timeout_secs: u64,
        body_timeout_secs: u64,
        idle_timeout_secs: u64,
    ) -> Self {
        Self {
            max_connections,
            header_timeout: Duration::from_secs(header_timeout_secs),
            body_timeout: Duration::from_secs(body_timeout_secs),
            idle_timeout: Duration::from_secs(idle_timeout_secs),
        }
    }
}

/// The error a request body yields once [`Limits::body_timeout`] has passed.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTimedOut(pub Duration);

/// Serves `router` on `listener` within `limits` until `shutdown`; then stops accepting,
/// closes every connection that is not busy, lets busy ones finish their request, and
/// returns once all are closed. Each request carries its client's [`ConnectInfo`]. The
/// connections open and closed are counted in `metrics` as `which`'s.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: Limits,
    (which, metrics): (Listener, Arc<Metrics>),
    shutdown: CancellationToken,
) {
    let open = Arc::new(Open::new(limits.max_connections, which, metrics));
    let connections = TaskTracker::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The head's deadline is kept here (from its first byte, not from the end of the
    // previous response), so hyper's own, which needs a timer, stays off.
    builder
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(READ_BUFFER_BYTES)
        .max_headers(100);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                accept_failed(&error, which).await;
                continue;
            }
        };
        let Some(connection) = open.admit(peer.ip()) else {
            open.closed(Closed::Refused);
            continue;
        };
        // Small answers go out at once rather than waiting for the next segment.
        let _ = stream.set_nodelay(true);
        let task = serve_connection(
            builder.clone(),
            stream,
            peer,
            router.clone(),
            limits,
            connection,
            shutdown.clone(),
        );
        let open = open.clone();
        connections.spawn(async move {
            let (id, reason) = task.await;
            open.release(peer.ip(), id);
            if let Some(reason) = reason {
                open.closed(reason);
            }
        });
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

/// Logs a failed accept; when descriptors ran out, waits a moment so the loop does not
/// spin while connections close.
async fn accept_failed(error: &std::io::Error, which: Listener) {
    let out_of_descriptors = matches!(error.raw_os_error(), Some(23 | 24)); // ENFILE, EMFILE
    if out_of_descriptors {
        tracing::warn!(listener = which.label(), %error, "cannot accept: out of file descriptors");
        tokio::time::sleep(ACCEPT_BACKOFF).await;
    } else {
        tracing::debug!(listener = which.label(), %error, "accept failed");
    }
}

/// One connection, served until it ends, times out, is evicted or the listener stops.
/// Gives back its id and, when the daemon closed it, why.
async fn serve_connection(
    builder: hyper::server::conn::http1::Builder,
    stream: TcpStream,
    peer: SocketAddr,
    router: axum::Router,
    limits: Limits,
    connection: Arc<Connection>,
    shutdown: CancellationToken,
) -> (u64, Option<Closed>) {
    let io = TokioIo::new(Watched {
        stream,
        connection: connection.clone(),
    });
    let service = {
        let connection = connection.clone();
        hyper::service::service_fn(move |request| {
            let busy = Busy::begin(connection.clone());
            let request = prepare(request, peer, limits.body_timeout);
            let router = router.clone();
            async move {
                let response = router.oneshot(request).await?;
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    Body::new(HeldBody {
                        inner: body,
                        _busy: busy,
                    })
                }))
            }
        })
    };
    let served = builder.serve_connection(io, service);
    tokio::pin!(served);
    let mut stopping = false;
    let reason = loop {
        tokio::select! {
            result = served.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                }
                break None;
            }
            () = connection.evicted.cancelled(), if !stopping => {
                // A request that began since the choice is answered first.
                if !connection.busy() {
                    break Some(Closed::Evicted);
                }
                served.as_mut().graceful_shutdown();
                stopping = true;
            }
            reason = connection.expired(limits) => break Some(reason),
            () = shutdown.cancelled(), if !stopping => {
                if !connection.busy() {
                    break None;
                }
                // The request in progress is answered; then the connection closes.
                served.as_mut().graceful_shutdown();
                stopping = true;
            }
        }
    };
    (connection.id, reason)
}

/// The request as the router sees it: the client's address, and a body with a deadline.
fn prepare(
    request: hyper::Request<Incoming>,
    peer: SocketAddr,
    body_timeout: Duration,
) -> axum::extract::Request {
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(ConnectInfo(peer));
    let deadline = tokio::time::Instant::now() + body_timeout;
    let body = Body::new(DeadlineBody {
        inner: body,
        timeout: body_timeout,
        deadline: Box::pin(tokio::time::sleep_until(deadline)),
    });
    axum::extract::Request::from_parts(parts, body)
}

/// What the deadlines of one connection are measured from. Times are milliseconds since
/// the listener started.
struct Connection {
    id: u64,
    peer: IpAddr,
    started: Instant,
    /// Requests with the router or still sending their response.
    busy: AtomicU32,
    /// When the connection last had no request in progress (opened, or a response ended).
    waiting_since: AtomicU64,
    /// When the first byte of the next request's head arrived; 0 while none has.
    head_since: AtomicU64,
    /// Woken on every change of phase, so the deadline is recomputed.
    changed: tokio::sync::Notify,
    evicted: CancellationToken,
}

impl Connection {
    fn new(id: u64, peer: IpAddr, started: Instant) -> Self {
        let connection = Self {
            id,
            peer,
            started,
            busy: AtomicU32::new(0),
            waiting_since: AtomicU64::new(0),
            head_since: AtomicU64::new(0),
            changed: tokio::sync::Notify::new(),
            evicted: CancellationToken::new(),
        };
        connection
            .waiting_since
            .store(connection.now(), Ordering::Relaxed);
        connection
    }

    fn now(&self) -> u64 {
        // At least 1, so that 0 keeps meaning "no head begun".
        u64::try_from(self.started.elapsed().as_millis()).map_or(u64::MAX, |ms| ms.max(1))
    }

    fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire) > 0
    }

    /// Bytes arrived: the first after a quiet spell begins a head.
    fn read_some(&self) {
        if !self.busy() && self.head_since.load(Ordering::Relaxed) == 0 {
            self.head_since.store(self.now(), Ordering::Relaxed);
            self.changed.notify_one();
        }
    }

    /// Resolves once the phase the connection is in has lasted longer than allowed.
    async fn expired(&self, limits: Limits) -> Closed {
        loop {
            let changed = self.changed.notified();
            if self.busy() {
                changed.await;
                continue;
            }
            let head_since = self.head_since.load(Ordering::Relaxed);
            let (since, allowed, reason) = if head_since == 0 {
                let since = self.waiting_since.load(Ordering::Relaxed);
                (since, limits.idle_timeout, Closed::Idle)
            } else {
                (head_since, limits.header_timeout, Closed::HeaderTimeout)
            };
            let elapsed = Duration::from_millis(self.now().saturating_sub(since));
            let Some(left) = allowed.checked_sub(elapsed).filter(|l| !l.is_zero()) else {
                return reason;
            };
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep(left) => {}
            }
        }
    }
}

/// A request in progress on a connection: from the router's call until its response has
/// been sent whole (or given up).
struct Busy(Arc<Connection>);

impl Busy {
    fn begin(connection: Arc<Connection>) -> Self {
        connection.busy.fetch_add(1, Ordering::AcqRel);
        connection.head_since.store(0, Ordering::Relaxed);
        connection.changed.notify_one();
        Self(connection)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let connection = &self.0;
        connection
            .waiting_since
            .store(connection.now(), Ordering::Relaxed);
        connection.head_since.store(0, Ordering::Relaxed);
        connection.busy.fetch_sub(1, Ordering::AcqRel);
        connection.changed.notify_one();
    }
}

/// The socket, noting when a request's first bytes arrive.
struct Watched {
    stream: TcpStream,
    connection: Arc<Connection>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.connection.read_some();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
