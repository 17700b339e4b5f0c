//! The filter chain, built as tower layers in one function (`build_handler_chain`), in
//! upstream's request order (k8s.io/apiserver `DefaultBuildHandlerChain`). `ServiceBuilder`
//! reads outermost first, so the function reads in the order a request meets the filters:
//!
//! 1. panic recovery — a panic in any later stage becomes a 500 `Status`, the server lives on;
//! 2. request info — parsed once, put in the request's extensions for every later stage;
//! 3. in-flight accounting — graceful shutdown waits for these requests (not for watches);
//! 4. request deadline — non-watch requests end with 504 after `request_timeout`;
//! 5. authentication — x509 client certificates and bearer tokens; anonymous only for the
//!    public health and version paths; the user goes into the extensions;
//! 6. authorization — behind the `Authorizer` seam;
//! 7. then the server chain (`GenericApiServer::route`).
//!
//! Audit, impersonation and flow control (max in flight / priority and fairness) belong between
//! authentication and authorization; they are not built yet.

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use apimachinery::Status;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tower::util::BoxCloneService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

use crate::authentication::{AuthnRequest, UserInfo, anonymous_user};
use crate::authorization::Decision;
use crate::endpoints::negotiation::Encoding;
use crate::endpoints::{Response, response};
use crate::request::RequestInfo;
use crate::server::GenericApiServer;
use crate::serving::tls::PeerCertificates;

/// Request bodies are boxed once, at the connection, so that the chain does not depend on the
/// transport (and tests can drive it with any body).
pub type RequestBody = http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, hyper::Error>;
pub type HttpRequest = http::Request<RequestBody>;
/// The rest of the chain, as a filter sees it.
pub type Next = BoxCloneService<HttpRequest, Response, Infallible>;
/// A filter: what it does with a request, given the server and the rest of the chain.
type FilterFn = fn(Arc<GenericApiServer>, HttpRequest, Next) -> BoxFuture<'static, Response>;

/// The whole chain, outermost filter first.
pub fn build_handler_chain(server: Arc<GenericApiServer>) -> Next {
    let s = || server.clone();
    let route = {
        let server = server.clone();
        tower::service_fn(move |req: HttpRequest| {
            let server = server.clone();
            async move { Ok::<_, Infallible>(server.route_request(req).await) }
        })
    };
    ServiceBuilder::new()
        // Outermost, so that a panic anywhere below is caught.
        .layer(filter(s(), recover_panics))
        .layer(filter(s(), with_request_info))
        .layer(filter(s(), track_in_flight))
        .layer(filter(s(), with_deadline))
        // Flow control will go after authentication: it classifies requests by user.
        .layer(filter(s(), authenticate))
        .layer(filter(s(), authorize))
        .service(route)
        .boxed_clone()
}

fn filter(server: Arc<GenericApiServer>, f: FilterFn) -> FilterLayer {
    FilterLayer { server, f }
}

#[derive(Clone)]
struct FilterLayer {
    server: Arc<GenericApiServer>,
    f: FilterFn,
}

impl<S> Layer<S> for FilterLayer
where
    S: Service<HttpRequest, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Service = FilterService;

    fn layer(&self, inner: S) -> FilterService {
        FilterService {
            server: self.server.clone(),
            f: self.f,
            next: BoxCloneService::new(inner),
        }
    }
}

#[derive(Clone)]
struct FilterService {
    server: Arc<GenericApiServer>,
    f: FilterFn,
    next: Next,
}

impl Service<HttpRequest> for FilterService {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Filters never apply back-pressure; the rest of the chain is driven with `oneshot`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: HttpRequest) -> Self::Future {
        let fut = (self.f)(self.server.clone(), req, self.next.clone());
        Box::pin(async move { Ok(fut.await) })
    }
}

async fn call_next(next: Next, req: HttpRequest) -> Response {
    match next.oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

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

/// The request info that `with_request_info` put in; present for every later filter.
fn request_info(req: &HttpRequest) -> RequestInfo {
    req.extensions()
        .get::<RequestInfo>()
        .cloned()
        .unwrap_or_else(|| {
            RequestInfo::parse(
                req.method(),
                req.uri().path(),
                req.uri().query().unwrap_or(""),
            )
        })
}

fn recover_panics(
    _: Arc<GenericApiServer>,
    req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    Box::pin(async move {
        match AssertUnwindSafe(call_next(next, req)).catch_unwind().await {
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
    })
}

fn with_request_info(
    _: Arc<GenericApiServer>,
    mut req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    let info = RequestInfo::parse(
        req.method(),
        req.uri().path(),
        req.uri().query().unwrap_or(""),
    );
    req.extensions_mut().insert(info);
    Box::pin(call_next(next, req))
}

fn track_in_flight(
    server: Arc<GenericApiServer>,
    req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    // Watches are long-running and end through the shutdown signal instead.
    let guard = (request_info(&req).verb != "watch").then(|| InFlightGuard::enter(&server));
    Box::pin(async move {
        let r = call_next(next, req).await;
        drop(guard);
        r
    })
}

fn with_deadline(
    server: Arc<GenericApiServer>,
    req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    if request_info(&req).verb == "watch" {
        return Box::pin(call_next(next, req));
    }
    let timeout = server.config.request_timeout;
    Box::pin(async move {
        match tokio::time::timeout(timeout, call_next(next, req)).await {
            Ok(r) => r,
            Err(_) => response::status(
                &Status::timeout(
                    "request did not complete within requested timeout - context deadline exceeded",
                ),
                Encoding::Json,
            ),
        }
    })
}

fn authenticate(
    server: Arc<GenericApiServer>,
    mut req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let info = request_info(&req);
        let peer = req.extensions().get::<PeerCertificates>().cloned();
        let outcome = {
            let authn = AuthnRequest {
                headers: req.headers(),
                peer_certificates: peer.as_ref().map(|p| p.0.as_slice()),
            };
            server.config.authenticator.authenticate(&authn).await
        };
        let user: UserInfo = match outcome {
            Ok(Some(user)) => user,
            Ok(None) if is_public(&info.path) => anonymous_user(),
            Ok(None) | Err(_) => {
                return response::status(&Status::unauthorized("Unauthorized"), Encoding::Json);
            }
        };
        req.extensions_mut().insert(user);
        call_next(next, req).await
    })
}

fn authorize(
    server: Arc<GenericApiServer>,
    req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let info = request_info(&req);
        let user = req
            .extensions()
            .get::<UserInfo>()
            .cloned()
            .unwrap_or_else(anonymous_user);
        let reason = match server.config.authorizer.authorize(&user, &info).await {
            Decision::Allow => None,
            Decision::Deny(reason) => Some(reason),
            Decision::NoOpinion => Some(String::new()),
        };
        if let Some(reason) = reason.filter(|_| !is_public(&info.path)) {
            return response::status(&forbidden(&user, &info, &reason), Encoding::Json);
        }
        call_next(next, req).await
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authentication::UnionAuthenticator;
    use crate::authorization::AllowAuthenticated;
    use crate::server::Config;
    use http_body_util::{BodyExt, Full};

    fn server() -> Arc<GenericApiServer> {
        Arc::new(GenericApiServer {
            config: Config {
                authenticator: Arc::new(UnionAuthenticator::new(Vec::new())),
                authorizer: Arc::new(AllowAuthenticated),
                request_timeout: std::time::Duration::from_secs(5),
                version: serde_json::json!({}),
                openapi: Default::default(),
                external_address: "127.0.0.1:6443".into(),
            },
            chain: Vec::new(),
            health: Default::default(),
            in_flight: Default::default(),
        })
    }

    fn request(path: &str) -> HttpRequest {
        http::Request::get(path)
            .body(
                Full::new(bytes::Bytes::new())
                    .map_err(|e| match e {})
                    .boxed_unsync(),
            )
            .unwrap()
    }

    #[tokio::test]
    async fn a_panic_becomes_a_500_status_and_the_chain_keeps_serving() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let handler = tower::service_fn(move |req: HttpRequest| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            async move {
                if req.uri().path() == "/boom" {
                    panic!("handler exploded");
                }
                Ok::<_, Infallible>(response::raw(
                    http::StatusCode::OK,
                    "text/plain",
                    format!("call {n}"),
                ))
            }
        });
        let chain: Next = ServiceBuilder::new()
            .layer(filter(server(), recover_panics))
            .service(handler)
            .boxed_clone();
        let r = chain.clone().oneshot(request("/boom")).await.unwrap();
        assert_eq!(r.status(), 500);
        let body: serde_json::Value =
            serde_json::from_slice(&r.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert_eq!(
            (body["kind"].as_str(), body["reason"].as_str()),
            (Some("Status"), Some("InternalError"))
        );
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("handler exploded")
        );
        let r = chain.oneshot(request("/fine")).await.unwrap();
        assert_eq!(r.status(), 200, "the next request is served");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn requests_without_credentials_get_401_except_public_paths() {
        let chain = build_handler_chain(server());
        let r = chain
            .clone()
            .oneshot(request("/api/v1/namespaces"))
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        let body: serde_json::Value =
            serde_json::from_slice(&r.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert_eq!(body["reason"], "Unauthorized");
        let r = chain.oneshot(request("/version")).await.unwrap();
        assert_eq!(r.status(), 200, "anonymous users may read /version");
    }
}
