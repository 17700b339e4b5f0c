//! The filter chain, built in one function in upstream's request order (k8s.io/apiserver
//! `DefaultBuildHandlerChain`, read outermost first):
//!
//! 1. panic recovery — a panic in any later stage becomes a 500 `Status`, the server lives on;
//! 2. request info — parsed once, read by every later stage;
//! 3. in-flight accounting — graceful shutdown waits for these requests (not for watches);
//! 4. request deadline — non-watch requests end with 504 after `request_timeout`;
//! 5. authentication — x509 client certificates and bearer tokens; anonymous only for the
//!    public health and version paths;
//! 6. authorization — behind the `Authorizer` seam;
//! 7. then the server chain (`GenericApiServer::route`).
//!
//! Audit, impersonation and flow control (max in flight / priority and fairness) belong between
//! authentication and authorization; they are not built yet.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use apimachinery::Status;
use futures_util::FutureExt;
use hyper::body::Incoming;

use crate::authentication::{AuthnRequest, UserInfo, anonymous_user};
use crate::authorization::Decision;
use crate::endpoints::negotiation::Encoding;
use crate::endpoints::{Response, response};
use crate::request::RequestInfo;
use crate::server::GenericApiServer;
use crate::serving::tls::PeerCertificates;

/// Paths anonymous users may read, as upstream's `system:public-info-viewer` role allows.
fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/livez" | "/readyz" | "/version" | "/version/"
    ) || path.starts_with("/healthz/")
        || path.starts_with("/livez/")
        || path.starts_with("/readyz/")
}

/// Counts requests in flight so that shutdown can wait for them to drain.
#[derive(Default)]
pub struct InFlight(AtomicUsize);

impl InFlight {
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

struct InFlightGuard(Arc<GenericApiServer>);

impl InFlightGuard {
    fn enter(server: &Arc<GenericApiServer>) -> Self {
        server.in_flight.0.fetch_add(1, Ordering::AcqRel);
        Self(server.clone())
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.in_flight.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs one request through the chain.
pub async fn handle(server: Arc<GenericApiServer>, req: http::Request<Incoming>) -> Response {
    // 1. Panic recovery: nothing a handler does may take the connection or the server down.
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    match AssertUnwindSafe(after_recovery(server, req))
        .catch_unwind()
        .await
    {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            tracing::error!(%method, %path, panic = %what, "handler panicked");
            response::status(&Status::internal(format!("panic: {what}")), Encoding::Json)
        }
    }
}

async fn after_recovery(server: Arc<GenericApiServer>, req: http::Request<Incoming>) -> Response {
    // 2. Request info.
    let info = RequestInfo::parse(
        req.method(),
        req.uri().path(),
        req.uri().query().unwrap_or(""),
    );
    // 3. In-flight accounting; watches are long-running and end through the shutdown signal.
    let _guard = (info.verb != "watch").then(|| InFlightGuard::enter(&server));
    // 4. Deadline for everything but watches.
    if info.verb == "watch" {
        return authenticate(server, req, info).await;
    }
    let timeout = server.config.request_timeout;
    match tokio::time::timeout(timeout, authenticate(server, req, info)).await {
        Ok(r) => r,
        Err(_) => response::status(
            &Status::timeout(
                "request did not complete within requested timeout - context deadline exceeded",
            ),
            Encoding::Json,
        ),
    }
}

async fn authenticate(
    server: Arc<GenericApiServer>,
    req: http::Request<Incoming>,
    info: RequestInfo,
) -> Response {
    // 5. Authentication.
    let peer = req.extensions().get::<PeerCertificates>().cloned();
    let authn = AuthnRequest {
        headers: req.headers(),
        peer_certificates: peer.as_ref().map(|p| p.0.as_slice()),
    };
    let user: UserInfo = match server.config.authenticator.authenticate(&authn).await {
        Ok(Some(user)) => user,
        Ok(None) if is_public(&info.path) => anonymous_user(),
        Ok(None) | Err(_) => {
            return response::status(&Status::unauthorized("Unauthorized"), Encoding::Json);
        }
    };
    // 6. Authorization.
    let reason = match server.config.authorizer.authorize(&user, &info).await {
        Decision::Allow => None,
        Decision::Deny(reason) => Some(reason),
        Decision::NoOpinion => Some(String::new()),
    };
    if let Some(reason) = reason.filter(|_| !is_public(&info.path)) {
        return response::status(&forbidden(&user, &info, &reason), Encoding::Json);
    }
    // 7. The server chain.
    server.route(req, info, user).await
}

/// Upstream's 403 message: `<resource> "<name>" is forbidden: User "<user>" cannot <verb>
/// resource "<resource>" in API group "<group>" in the namespace "<ns>": <reason>`.
fn forbidden(user: &UserInfo, info: &RequestInfo, reason: &str) -> Status {
    if !info.is_resource_request {
        let mut s = Status::new(
            403,
            apimachinery::Reason::Forbidden,
            format!(
                "forbidden: User \"{}\" cannot {} path \"{}\"{}",
                user.name,
                info.verb,
                info.path,
                if reason.is_empty() {
                    String::new()
                } else {
                    format!(": {reason}")
                }
            ),
        );
        s.details = Some(Box::default());
        return s;
    }
    let gr = apimachinery::GroupResource::new(info.api_group.clone(), info.resource.clone());
    let scope = if info.namespace.is_empty() {
        String::new()
    } else {
        format!(" in the namespace \"{}\"", info.namespace)
    };
    let why = format!(
        "User \"{}\" cannot {} resource \"{}\" in API group \"{}\"{scope}{}",
        user.name,
        info.verb,
        info.resource,
        info.api_group,
        if reason.is_empty() {
            String::new()
        } else {
            format!(": {reason}")
        }
    );
    Status::forbidden(&gr, &info.name, why)
}
