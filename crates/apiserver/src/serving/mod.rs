//! Secure serving: accept TCP, TLS with ALPN (HTTP/2 and HTTP/1.1, with upgrades), one task per
//! connection, and graceful shutdown: stop accepting, let in-flight requests drain, end watches.

pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::filters;
use crate::server::GenericApiServer;
use tls::PeerCertificates;

/// The client's address, put in each request's extensions (audit records it).
#[derive(Clone, Copy, Debug)]
pub struct PeerAddr(pub SocketAddr);

/// How long shutdown waits for in-flight requests before closing connections anyway.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Serves until `shutdown` resolves, then drains. Returns once every connection is closed or
/// the drain timeout passed.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    server: Arc<GenericApiServer>,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    // Built once; each connection and request gets a clone.
    let chain = filters::build_handler_chain(server);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
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
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let chain = chain.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match acceptor.accept(tcp).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
            };
            let peer_certs = tls.get_ref().1.peer_certificates().map(|c| {
                PeerCertificates(Arc::new(c.iter().map(|c| c.clone().into_owned()).collect()))
            });
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let mut req = req.map(|b| b.boxed_unsync());
                if let Some(p) = &peer_certs {
                    req.extensions_mut().insert(p.clone());
                }
                req.extensions_mut().insert(PeerAddr(peer));
                chain.clone().oneshot(req)
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), service);
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    // Open watches end when the shutdown signal reaches them; the rest drain.
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(DRAIN_TIMEOUT) => tracing::warn!("connections did not drain in time"),
    }
    Ok(())
}

/// Binds the secure port.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}
