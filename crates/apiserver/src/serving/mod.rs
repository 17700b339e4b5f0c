//! Secure serving: accept TCP, TLS with ALPN (HTTP/2 and HTTP/1.1, with upgrades), one task per
//! connection, the connection hygiene of upstream's `secure_serving.go` (handshake, header and
//! idle timeouts, 1 MiB of headers, a stream limit per HTTP/2 connection), a cap on open
//! connections, and graceful shutdown: stop accepting, end idle connections at once, let
//! in-flight requests drain up to a deadline.
//!
//! This module owns connections, not requests: everything a request sees is the filter chain's.

mod coalesce;
pub mod tls;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::endpoints::response::Body;
use crate::filters;
use crate::server::GenericApiServer;
use tls::PeerCertificates;

/// The client's address, put in each request's extensions (audit records it).
#[derive(Clone, Copy, Debug)]
pub struct PeerAddr(pub SocketAddr);

/// How a secure port treats connections. The defaults are kube-apiserver's.
#[derive(Clone, Debug)]
pub struct ServingLimits {
    /// Upstream's `ReadHeaderTimeout` (32 s, "just shy of requestTimeoutUpperBound"). It bounds
    /// the wait for a request's headers, and also for the next request on an idle HTTP/1.1
    /// connection: hyper starts that clock as soon as it waits for a request head.
    pub read_header_timeout: Duration,
    /// Go bounds the TLS handshake by the smallest of its read and write timeouts, which for
    /// kube-apiserver is the read-header timeout.
    pub tls_handshake_timeout: Duration,
    /// Upstream's `IdleTimeout` (90 s): a connection with no request in flight for this long is
    /// closed (HTTP/2 with a GOAWAY).
    pub idle_timeout: Duration,
    /// Upstream's `MaxHeaderBytes` (1 MiB), for HTTP/1.1 headers and HTTP/2 header lists.
    pub max_header_bytes: usize,
    /// `--http2-max-streams-per-connection`; kube-apiserver's default is 100 (its secure serving
    /// matches the initial stream limit Go's clients assume, so that a client can open only so
    /// many streams before the server's settings reach it).
    pub http2_max_streams: u32,
    /// Open connections at most; one more is accepted and closed at once, so that a flood
    /// cannot exhaust the process's file descriptors. Set from the descriptor limit.
    pub max_connections: usize,
    /// Connections that have not yet completed a request (handshaking, or waiting for their
    /// first headers) at most; past it the oldest of them is closed to make room. This is what
    /// keeps slow or silent clients from holding the port: real clients complete their first
    /// request within milliseconds. Zero is no limit.
    pub max_pending_connections: usize,
    /// How long shutdown waits for in-flight requests before closing connections anyway.
    pub drain_timeout: Duration,
}

impl Default for ServingLimits {
    fn default() -> Self {
        ServingLimits {
            read_header_timeout: Duration::from_secs(32),
            tls_handshake_timeout: Duration::from_secs(32),
            idle_timeout: Duration::from_secs(90),
            max_header_bytes: 1 << 20,
            http2_max_streams: 100,
            max_connections: 10_000,
            max_pending_connections: 0,
            drain_timeout: Duration::from_secs(60),
        }
    }
}

/// Serves until `shutdown` resolves, then drains. Returns once every connection is closed or
/// the drain deadline passed. The listening socket stays open (but unused) until then, so that
/// nothing else takes the port while this process still answers.
pub async fn serve(
    listener: TcpListener,
    tls: tls::ServerTls,
    server: Arc<GenericApiServer>,
    limits: ServingLimits,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    // Built once; each connection and request gets a clone.
    let chain = filters::build_handler_chain(server);
    let limits = Arc::new(limits);
    let connections = Arc::new(Connections::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut next_id: u64 = 0;
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Running out of file descriptors is transient; back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        if connections.open.load(Ordering::Acquire) >= limits.max_connections {
            // A clean refusal: the client sees its connection closed, and the descriptor is
            // free again at once.
            tracing::debug!(%peer, "too many open connections; refusing one");
            drop(tcp);
            continue;
        }
        let _ = tcp.set_nodelay(true);
        next_id += 1;
        let id = next_id;
        let open = OpenGuard::enter(&connections);
        // The task waits until it is registered as pending, so that its first request cannot
        // unregister it before it is there (and leave it to be closed as "pending" later).
        let (registered_tx, registered_rx) = tokio::sync::oneshot::channel::<()>();
        let connection = serve_connection(
            tcp,
            peer,
            id,
            tls.clone(),
            chain.clone(),
            limits.clone(),
            connections.clone(),
            stop_rx.clone(),
            open,
        );
        let task = tokio::spawn(async move {
            let _ = registered_rx.await;
            connection.await;
        });
        if limits.max_pending_connections > 0 {
            connections.pending_started(id, task.abort_handle(), limits.max_pending_connections);
        }
        let _ = registered_tx.send(());
    }
    // Stop: idle connections close at once, busy ones after their requests (open watches end
    // when the watch shutdown signal reaches them).
    let _ = stop_tx.send(true);
    let deadline = tokio::time::sleep(limits.drain_timeout);
    tokio::pin!(deadline);
    loop {
        if connections.open.load(Ordering::Acquire) == 0 {
            break;
        }
        tokio::select! {
            _ = connections.closed.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = &mut deadline => {
                tracing::warn!(
                    open = connections.open.load(Ordering::Acquire),
                    "connections did not drain in time"
                );
                break;
            }
        }
    }
    drop(listener);
    Ok(())
}

/// Binds the secure port.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// The connections of one secure port: how many are open, and which have not completed a
/// request yet (oldest first), so the oldest can be closed when too many wait.
#[derive(Default)]
struct Connections {
    open: AtomicUsize,
    closed: tokio::sync::Notify,
    pending: Mutex<BTreeMap<u64, AbortHandle>>,
}

impl Connections {
    fn pending_started(&self, id: u64, handle: AbortHandle, max: usize) {
        let Ok(mut pending) = self.pending.lock() else {
            return;
        };
        pending.insert(id, handle);
        while max > 0 && pending.len() > max {
            if let Some((_, oldest)) = pending.pop_first() {
                oldest.abort();
            }
        }
    }

    fn pending_done(&self, id: u64) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.remove(&id);
        }
    }
}

/// Counts a connection as open until its task ends, however it ends (an aborted task drops it).
struct OpenGuard(Arc<Connections>);

impl OpenGuard {
    fn enter(connections: &Arc<Connections>) -> Self {
        connections.open.fetch_add(1, Ordering::AcqRel);
        OpenGuard(connections.clone())
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
        self.0.closed.notify_waiters();
    }
}

/// Whether a connection has requests in flight, and since when it has none.
struct Activity {
    active: AtomicUsize,
    /// Whether a request has arrived yet.
    served: AtomicBool,
    idle_since: Mutex<Instant>,
}

impl Activity {
    /// When the connection is to be closed if nothing happens before: the idle timeout after
    /// its last request; before its first one, the read-header timeout, as Go's server bounds
    /// the wait for a first request (hyper's own header timeout starts only with the first
    /// bytes of a request, and nothing bounds the wait for HTTP/2's preface).
    fn close_at(&self, limits: &ServingLimits) -> Option<Instant> {
        if self.active.load(Ordering::Acquire) > 0 {
            return None;
        }
        let since = self.idle_since.lock().ok().map(|t| *t)?;
        Some(if self.served.load(Ordering::Acquire) {
            since + limits.idle_timeout
        } else {
            since + limits.read_header_timeout
        })
    }
}

/// Held by a request from its start until its response body is gone.
struct ActiveGuard(Arc<Activity>);

impl ActiveGuard {
    fn enter(activity: &Arc<Activity>) -> Self {
        activity.served.store(true, Ordering::Release);
        activity.active.fetch_add(1, Ordering::AcqRel);
        ActiveGuard(activity.clone())
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        if let Ok(mut t) = self.0.idle_since.lock() {
            *t = Instant::now();
        }
        self.0.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request counted as active while it streams (a watch is
/// in flight for as long as its body is).
/// The answer to a HEAD request: the headers of what a GET would get, with its length, and no
/// body. HTTP/2 forbids data on a HEAD response (hyper sends what it is given, and the client
/// then sees the stream reset), so no handler's body may reach the connection.
fn without_body(response: crate::endpoints::Response) -> crate::endpoints::Response {
    let (mut parts, body) = response.into_parts();
    if !parts.headers.contains_key(http::header::CONTENT_LENGTH)
        && let Some(n) = http_body::Body::size_hint(&body).exact()
    {
        parts
            .headers
            .insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(n));
    }
    http::Response::from_parts(parts, crate::endpoints::response::empty())
}

struct TrackedBody {
    inner: Body,
    _active: ActiveGuard,
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[allow(clippy::too_many_arguments)]
async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    id: u64,
    server_tls: tls::ServerTls,
    chain: filters::Next,
    limits: Arc<ServingLimits>,
    connections: Arc<Connections>,
    mut stop: watch::Receiver<bool>,
    _open: OpenGuard,
) {
    let handshake = tokio::time::timeout(limits.tls_handshake_timeout, server_tls.accept(tcp));
    let tls = tokio::select! {
        result = handshake => match result {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                connections.pending_done(id);
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                connections.pending_done(id);
                return;
            }
        },
        _ = stop.wait_for(|s| *s) => {
            connections.pending_done(id);
            return;
        }
    };
    let peer_certs =
        tls.get_ref().1.peer_certificates().map(|c| {
            PeerCertificates(Arc::new(c.iter().map(|c| c.clone().into_owned()).collect()))
        });
    let activity = Arc::new(Activity {
        active: AtomicUsize::new(0),
        served: AtomicBool::new(false),
        idle_since: Mutex::new(Instant::now()),
    });
    let service = {
        let activity = activity.clone();
        let connections = connections.clone();
        service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            // The first request makes the connection a client's, not a pending one.
            if !activity.served.load(Ordering::Acquire) {
                connections.pending_done(id);
            }
            let active = ActiveGuard::enter(&activity);
            let mut req = req.map(|b| b.boxed_unsync());
            if let Some(p) = &peer_certs {
                req.extensions_mut().insert(p.clone());
            }
            req.extensions_mut().insert(PeerAddr(peer));
            let head = req.method() == http::Method::HEAD;
            let call = chain.run(req);
            async move {
                let mut response = call.await;
                if head {
                    response = without_body(response);
                }
                Ok::<_, Infallible>(response.map(|inner| TrackedBody {
                    inner,
                    _active: active,
                }))
            }
        })
    };
    // The protocol is what ALPN chose, as Go's server decides it: h2, or HTTP/1.1 (with
    // upgrades) for everything else.
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
    if h2 {
        // The streams of one HTTP/2 connection are many tasks writing through one: their frames
        // are gathered per turn of the connection's task (see `coalesce`).
        let turns = coalesce::Turns::default();
        let io = TokioIo::new(coalesce::Coalescing::new(tls, turns.clone()));
        let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.http2_max_streams)
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
            .serve_connection(io, service);
        drive(
            conn,
            |c| c.graceful_shutdown(),
            Some(&turns),
            &activity,
            &limits,
            &mut stop,
            peer,
        )
        .await;
    } else {
        let io = TokioIo::new(tls);
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.read_header_timeout)
            // Go allows 4 KiB over MaxHeaderBytes ("slop") before answering 431; the buffer
            // may hold that much and a little body.
            .max_header_size(limits.max_header_bytes + 4096)
            .max_buf_size(limits.max_header_bytes + 8192)
            .max_headers(MAX_HEADER_COUNT)
            .serve_connection(io, service)
            .with_upgrades();
        drive(
            conn,
            |c| c.graceful_shutdown(),
            None,
            &activity,
            &limits,
            &mut stop,
            peer,
        )
        .await;
    }
    connections.pending_done(id);
}

/// Serves one connection to its end: closes it gracefully once it has been idle too long or the
/// server stops, and then lets it finish what is in flight. Each poll of the connection is a
/// turn of `turns`, when its transport gathers writes per turn.
async fn drive<C, E>(
    conn: C,
    graceful_shutdown: impl Fn(Pin<&mut C>),
    turns: Option<&coalesce::Turns>,
    activity: &Activity,
    limits: &ServingLimits,
    stop: &mut watch::Receiver<bool>,
    peer: SocketAddr,
) where
    C: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    tokio::pin!(conn);
    let mut shutting_down = false;
    loop {
        // Wake when the connection would have been idle for too long; while requests are in
        // flight, look again after an idle timeout.
        let idle_deadline = activity
            .close_at(limits)
            .unwrap_or_else(|| Instant::now() + limits.idle_timeout);
        let serve = std::future::poll_fn(|cx| {
            if let Some(turns) = turns {
                turns.next();
            }
            conn.as_mut().poll(cx)
        });
        tokio::select! {
            result = serve => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            _ = tokio::time::sleep_until(idle_deadline), if !shutting_down => {
                if activity.close_at(limits).is_some_and(|at| at <= Instant::now()) {
                    tracing::debug!(%peer, "closing an idle connection");
                    shutting_down = true;
                    graceful_shutdown(conn.as_mut());
                }
            }
            _ = stop.wait_for(|s| *s), if !shutting_down => {
                shutting_down = true;
                graceful_shutdown(conn.as_mut());
            }
        }
    }
}

/// Headers per HTTP/1.1 request at most. Go counts only bytes; hyper also counts headers, and
/// its default (100) is lower than what some clients send with long impersonation lists.
const MAX_HEADER_COUNT: usize = 1024;
