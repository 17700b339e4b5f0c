//! The filter chain, built in one function (`build_handler_chain`), in upstream's request order
//! (k8s.io/apiserver `DefaultBuildHandlerChain`). Its list of filters reads outermost first, so
//! the function reads in the order a request meets the filters:
//!
//! 1. panic recovery — a panic in any later stage becomes a 500 `Status`, the server lives on;
//! 2. request info — parsed once, put in the request's extensions for every later stage;
//! 3. in-flight accounting — graceful shutdown waits for these requests (not for watches);
//! 4. request deadline — non-watch requests end with 504 after `request_timeout`;
//! 5. authentication — x509 client certificates and bearer tokens; without credentials the
//!    anonymous user (`--anonymous-auth`); the user goes into the extensions;
//! 6. audit — `audit.k8s.io/v1` events at the levels and stages the policy asks for;
//! 7. impersonation — `Impersonate-*` headers, each authorized as the verb `impersonate`;
//! 8. flow control — API Priority and Fairness (`crate::flowcontrol`: classification by
//!    FlowSchema, fair queuing per priority level, 429 with `Retry-After` and the
//!    `X-Kubernetes-PF-*` headers) when `--enable-priority-and-fairness` is on, as it is by
//!    default; else max in flight, 429 beyond `--max-requests-inflight` /
//!    `--max-mutating-requests-inflight` (upstream's simpler flow control);
//! 9. authorization — behind the `Authorizer` seam;
//! 10. then the server chain (`GenericApiServer::route_request`).

mod metrics;

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use apimachinery::Status;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tower::{Service, ServiceExt};

use crate::audit::{Level, Record, Stage};
use crate::authentication::{AuthnRequest, UserInfo, anonymous_user};
use crate::authorization::Decision;
use crate::endpoints::negotiation::Encoding;
use crate::endpoints::{Response, response};
use crate::request::RequestInfo;
use crate::server::GenericApiServer;
use crate::serving::tls::PeerCertificates;
use http_body_util::BodyExt;
use serde_json::Value;

/// Request bodies are boxed once, at the connection, so that the chain does not depend on the
/// transport (and tests can drive it with any body).
pub type RequestBody = http_body_util::combinators::UnsyncBoxBody<bytes::Bytes, hyper::Error>;
pub type HttpRequest = http::Request<RequestBody>;
/// The rest of the chain, as a filter sees it: shared, so that handing it to a filter is a
/// reference count, where a boxed service clone copied every layer below it (each filter's call
/// cloned the chain under it: 55 allocations a request for ten filters).
#[derive(Clone)]
pub struct Next(Arc<dyn Fn(HttpRequest) -> BoxFuture<'static, Response> + Send + Sync>);

impl Next {
    /// A chain that ends in the tower `service` (the tests' handlers); the server's own chain
    /// is built of [`filter`]s in front of the route.
    pub fn new<S>(service: S) -> Next
    where
        S: Service<HttpRequest, Response = Response, Error = Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        Next(Arc::new(move |req| {
            let call = service.clone().oneshot(req);
            Box::pin(async move {
                match call.await {
                    Ok(r) => r,
                    Err(never) => match never {},
                }
            })
        }))
    }

    /// Runs the chain on `req`.
    pub fn run(&self, req: HttpRequest) -> BoxFuture<'static, Response> {
        (self.0)(req)
    }
}

impl Service<HttpRequest> for Next {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: HttpRequest) -> Self::Future {
        let run = self.run(req);
        Box::pin(async move { Ok(run.await) })
    }
}

/// A filter: what it does with a request, given the server and the rest of the chain.
type FilterFn = fn(Arc<GenericApiServer>, HttpRequest, Next) -> BoxFuture<'static, Response>;

/// The whole chain, outermost filter first.
pub fn build_handler_chain(server: Arc<GenericApiServer>) -> Next {
    let route = {
        let server = server.clone();
        // Boxed where it is made: the route's future is the whole request's state, and every
        // move of it unboxed is a copy of that size.
        Next(Arc::new(move |req| {
            let server = server.clone();
            Box::pin(async move { server.route_request(req).await })
        }))
    };
    let filters: [FilterFn; 10] = [
        // Outermost, so that a panic anywhere below is caught.
        recover_panics,
        with_request_info,
        with_http_log,
        track_in_flight,
        with_deadline,
        authenticate,
        // Audit before impersonation: it records who really asked, and as whom.
        audit,
        impersonate,
        // After authentication and impersonation: flow control classifies by the user a
        // request acts as (max in flight exempts system:masters).
        limit_in_flight,
        authorize,
    ];
    // Each filter wraps the ones after it, so the chain is built from the route outwards.
    filters
        .into_iter()
        .rev()
        .fold(route, |next, f| filter(server.clone(), f, next))
}

/// `f` in front of `next`.
fn filter(server: Arc<GenericApiServer>, f: FilterFn, next: Next) -> Next {
    Next(Arc::new(move |req| f(server.clone(), req, next.clone())))
}

async fn call_next(next: Next, req: HttpRequest) -> Response {
    next.run(req).await
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

/// Semaphores of the max-in-flight filter; `None` is no limit.
pub struct InFlightLimits {
    read_only: Option<Arc<tokio::sync::Semaphore>>,
    mutating: Option<Arc<tokio::sync::Semaphore>>,
}

impl InFlightLimits {
    pub fn new(read_only: usize, mutating: usize) -> Self {
        let semaphore = |n: usize| (n > 0).then(|| Arc::new(tokio::sync::Semaphore::new(n)));
        Self {
            read_only: semaphore(read_only),
            mutating: semaphore(mutating),
        }
    }
}

/// The user that authentication (or impersonation) put in; anonymous before authentication.
/// Shared, as the request info is: several filters read it on every request.
pub(crate) fn request_user(req: &HttpRequest) -> Arc<UserInfo> {
    req.extensions()
        .get::<Arc<UserInfo>>()
        .cloned()
        .unwrap_or_else(|| Arc::new(anonymous_user()))
}

/// The request info that `with_request_info` put in; present for every later filter.
/// Shared, because half a dozen filters read it on every request.
pub(crate) fn request_info(req: &HttpRequest) -> Arc<RequestInfo> {
    req.extensions()
        .get::<Arc<RequestInfo>>()
        .cloned()
        .unwrap_or_else(|| {
            Arc::new(RequestInfo::parse(
                req.method(),
                req.uri().path(),
                req.uri().query().unwrap_or(""),
            ))
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
    req.extensions_mut().insert(Arc::new(info));
    // The request metrics count the filters' time too, as upstream's received timestamp.
    req.extensions_mut()
        .insert(crate::endpoints::metrics::Received(
            std::time::Instant::now(),
        ));
    let pretty = response::is_pretty_print(
        req.uri().query().unwrap_or(""),
        req.headers()
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok()),
    );
    if !pretty {
        return Box::pin(call_next(next, req));
    }
    // Outermost but for panic recovery, so that the filters' own refusals are indented too.
    Box::pin(async move { response::pretty_print(call_next(next, req).await).await })
}

/// The target of request lines (upstream's `httplog`), which `-v=3` turns on.
pub const HTTPLOG_TARGET: &str = "httplog";

/// Writes one line per request, as upstream's httplog does at `-v=3`: verb, URI, latency, user
/// agent, audit ID, source address and response code; a watch's line when its stream ends. Costs
/// one check of the log filter when the lines are off.
fn with_http_log(
    _: Arc<GenericApiServer>,
    req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    if !tracing::enabled!(target: HTTPLOG_TARGET, tracing::Level::INFO) {
        return Box::pin(call_next(next, req));
    }
    let start = std::time::Instant::now();
    let info = request_info(&req);
    let verb = crate::endpoints::metrics::reported_verb(&info, req.headers());
    let uri = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.uri().path().to_string(), |p| p.to_string());
    let agent = req
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let src = req
        .extensions()
        .get::<crate::serving::PeerAddr>()
        .map(|p| p.0.to_string())
        .unwrap_or_default();
    Box::pin(async move {
        let response = call_next(next, req).await;
        let code = response.status().as_u16();
        let audit_id = response
            .headers()
            .get("audit-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let log = move || {
            tracing::info!(
                target: HTTPLOG_TARGET,
                verb,
                URI = %uri,
                latency = ?start.elapsed(),
                userAgent = %agent,
                "audit-ID" = %audit_id,
                srcIP = %src,
                resp = code,
                "HTTP"
            );
        };
        if info.verb != "watch" {
            log();
            return response;
        }
        let (parts, body) = response.into_parts();
        http::Response::from_parts(parts, response::completing(body, Box::new(log)))
    })
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
    let timeout = match requested_timeout(
        req.uri().query().unwrap_or(""),
        server.config.request_timeout,
    ) {
        Ok(timeout) => timeout,
        Err(status) => return Box::pin(async move { response::status(&status, Encoding::Json) }),
    };
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

/// The deadline a request asks for with `?timeout=` (Go's duration syntax, as kubectl's
/// `--request-timeout` sends it), within the server's maximum: zero or more than the maximum
/// means the maximum, as upstream's `WithRequestDeadline` reads it.
fn requested_timeout(
    query: &str,
    maximum: std::time::Duration,
) -> Result<std::time::Duration, Status> {
    let Some((_, value)) = form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "timeout")
    else {
        return Ok(maximum);
    };
    if value.is_empty() {
        return Ok(maximum);
    }
    let nanos = ironplane_protobuf::parse_go_duration(&value).map_err(|e| {
        Status::bad_request(format!(
            "invalid timeout specified in the request URL - {e}"
        ))
    })?;
    let requested = std::time::Duration::from_nanos(nanos.max(0).unsigned_abs());
    Ok(if nanos > 0 && requested < maximum {
        requested
    } else {
        maximum
    })
}

fn authenticate(
    server: Arc<GenericApiServer>,
    mut req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let peer = req.extensions().get::<PeerCertificates>().cloned();
        let start = std::time::Instant::now();
        // What authenticators say besides the user (a legacy token's audit annotations and
        // warning) is kept for the audit event and the response, which come later in the chain.
        let ((outcome, warnings), annotations) = {
            let authn = AuthnRequest {
                headers: req.headers(),
                peer_certificates: peer.as_ref().map(|p| p.0.as_slice()),
            };
            crate::audit::collect_annotations(crate::warning::record(
                server.config.authenticator.authenticate(&authn),
            ))
            .await
        };
        if !warnings.is_empty() || !annotations.is_empty() {
            req.extensions_mut().insert(AuthnNotes {
                warnings,
                annotations,
            });
        }
        let errored = outcome.is_err();
        let user: UserInfo = match outcome {
            Ok(Some(user)) => user,
            // `--anonymous-auth`: requests without credentials go on as `system:anonymous`,
            // and authorization decides (RBAC lets them read health and version only).
            Ok(None)
                if server.config.anonymous_auth
                    && (server.config.anonymous_paths.is_empty()
                        || server
                            .config
                            .anonymous_paths
                            .iter()
                            .any(|p| p == req.uri().path())) =>
            {
                anonymous_user()
            }
            Ok(None) | Err(_) => {
                let result = if errored {
                    metrics::AuthnResult::Error
                } else {
                    metrics::AuthnResult::Failure
                };
                metrics::record_authentication(result, start);
                return response::status(&Status::unauthorized("Unauthorized"), Encoding::Json);
            }
        };
        metrics::record_authentication(metrics::AuthnResult::Success { user: &user.name }, start);
        req.extensions_mut().insert(Arc::new(user));
        call_next(next, req).await
    })
}

/// The audit annotations and warnings authentication produced, for the audit filter and the
/// response (upstream's authenticators write them into the request's context).
#[derive(Clone, Default)]
pub struct AuthnNotes {
    pub warnings: Vec<String>,
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// Where the impersonation filter leaves the user it switched to, for the audit event.
#[derive(Clone, Default)]
pub struct ImpersonatedSlot(Arc<std::sync::Mutex<Option<UserInfo>>>);

/// A request or response body as the object it encodes (JSON, YAML or protobuf, by its
/// Content-Type; patch documents of their own media types are JSON), for an audit event.
fn decode_for_audit(headers: &http::HeaderMap, bytes: &[u8]) -> Option<Value> {
    let content_type = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    match crate::endpoints::negotiation::body_encoding(content_type) {
        Ok(encoding) => crate::endpoints::decode::parse(bytes, encoding).ok(),
        Err(_) => serde_json::from_slice(bytes).ok(),
    }
}

/// Audit: decides the level from the policy for the authenticated user, and records the
/// stages the policy keeps (upstream: endpoints/filters/audit.go). Requests the policy gives
/// level None pass untouched; so does everything when no policy is configured.
fn audit(
    server: Arc<GenericApiServer>,
    mut req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let Some(auditor) = server.auditor.clone() else {
            return call_next(next, req).await;
        };
        let info = request_info(&req);
        let user = request_user(&req);
        let decision = auditor.policy.decide(&user, &info);
        crate::audit::observe_policy_level(decision.level);
        if decision.level == Level::None {
            return call_next(next, req).await;
        }
        let audit_id = req
            .headers()
            .get("audit-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let slot = ImpersonatedSlot::default();
        req.extensions_mut().insert(slot.clone());
        let mut record = Record {
            audit_id: audit_id.clone(),
            level: decision.level,
            request_uri: req
                .uri()
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            info: info.clone(),
            user: UserInfo::clone(&user),
            impersonated: None,
            source_ips: req
                .extensions()
                .get::<crate::serving::PeerAddr>()
                .map(|a| vec![a.0.ip().to_string()])
                .unwrap_or_default(),
            user_agent: req
                .headers()
                .get(http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            received: crate::audit::micro_time(),
            request_object: None,
            request_object_meta: Default::default(),
            annotations: Default::default(),
        };
        if decision.records(Stage::RequestReceived) {
            auditor
                .sink
                .write(&record.event(Stage::RequestReceived, None, None));
        }
        if decision.level >= Level::Request
            && matches!(
                info.verb.as_str(),
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
        {
            // The request object is read here, then handed on unchanged.
            let (parts, body) = req.into_parts();
            let limited = http_body_util::Limited::new(body, crate::server::MAX_REQUEST_BODY_BYTES);
            let bytes = match limited.collect().await {
                Ok(c) => c.to_bytes(),
                Err(_) => {
                    let s = Status::too_large(format!(
                        "Request entity too large: limit is {}",
                        crate::server::MAX_REQUEST_BODY_BYTES
                    ));
                    return response::status(&s, Encoding::Json);
                }
            };
            // Recorded as decoded, whatever the wire format (kubectl's generators send protobuf).
            record.request_object = decode_for_audit(&parts.headers, &bytes);
            let body = http_body_util::Full::new(bytes)
                .map_err(|never| match never {})
                .boxed_unsync();
            req = http::Request::from_parts(parts, body);
        }
        let from_authentication = req
            .extensions()
            .get::<AuthnNotes>()
            .map(|n| n.annotations.clone())
            .unwrap_or_default();
        let (response, notes) =
            crate::audit::collect_notes_at(decision.level, call_next(next, req)).await;
        record.annotations = from_authentication;
        record.request_object_meta = notes.request_object;
        for (k, v) in notes.annotations {
            record.annotations.entry(k).or_insert(v);
        }
        record.impersonated = slot.0.lock().ok().and_then(|g| g.clone());
        let code = response.status().as_u16();
        let (mut parts, body) = response.into_parts();
        parts.headers.insert(
            "audit-id",
            http::HeaderValue::from_str(&audit_id).unwrap_or(http::HeaderValue::from_static("")),
        );
        if info.verb == "watch" {
            if decision.records(Stage::ResponseStarted) {
                auditor
                    .sink
                    .write(&record.event(Stage::ResponseStarted, Some((code, None)), None));
            }
            let on_end: Box<dyn FnOnce() + Send + Sync> =
                if decision.records(Stage::ResponseComplete) {
                    Box::new(move || {
                        auditor.sink.write(&record.event(
                            Stage::ResponseComplete,
                            Some((code, None)),
                            None,
                        ))
                    })
                } else {
                    Box::new(|| {})
                };
            // The ResponseComplete of a long-running request.
            return http::Response::from_parts(parts, response::completing(body, on_end));
        }
        // Short requests: the answer is whole; read it when the event needs it.
        if !decision.records(Stage::ResponseComplete) {
            return http::Response::from_parts(parts, body);
        }
        let needs_body = code >= 400 || decision.level >= Level::RequestResponse;
        if !needs_body {
            auditor
                .sink
                .write(&record.event(Stage::ResponseComplete, Some((code, None)), None));
            return http::Response::from_parts(parts, body);
        }
        let bytes = match body.collect().await {
            Ok(c) => c.to_bytes(),
            Err(never) => match never {},
        };
        let parsed = decode_for_audit(&parts.headers, &bytes);
        let failure = parsed.as_ref().filter(|_| code >= 400);
        let object = parsed.as_ref().filter(|_| code < 400);
        auditor
            .sink
            .write(&record.event(Stage::ResponseComplete, Some((code, failure)), object));
        http::Response::from_parts(parts, response::full(bytes))
    })
}

const IMPERSONATE_USER: &str = "impersonate-user";
const IMPERSONATE_UID: &str = "impersonate-uid";
const IMPERSONATE_GROUP: &str = "impersonate-group";
const IMPERSONATE_EXTRA: &str = "impersonate-extra-";

/// One thing a request asks to act as, with what authorizing it takes.
struct ActAs {
    api_group: &'static str,
    resource: &'static str,
    subresource: String,
    namespace: String,
    name: String,
}

impl ActAs {
    fn cluster(api_group: &'static str, resource: &'static str, name: &str) -> Self {
        Self {
            api_group,
            resource,
            subresource: String::new(),
            namespace: String::new(),
            name: name.to_string(),
        }
    }
}

fn header_values<'a>(req: &'a HttpRequest, name: &str) -> Vec<&'a str> {
    req.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect()
}

/// `Impersonate-User`, `-Uid`, `-Group` and `-Extra-*`: each requested identity is authorized
/// as the verb `impersonate` for the real user, then the request continues as the impersonated
/// user, with the headers removed (upstream: endpoints/filters/impersonation.go).
fn impersonate(
    server: Arc<GenericApiServer>,
    mut req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let user_name = header_values(&req, IMPERSONATE_USER)
            .first()
            .map(|s| (*s).to_string())
            .filter(|s| !s.is_empty());
        let uid = header_values(&req, IMPERSONATE_UID)
            .first()
            .map(|s| (*s).to_string());
        let groups: Vec<String> = header_values(&req, IMPERSONATE_GROUP)
            .into_iter()
            .map(str::to_string)
            .collect();
        let mut extra: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for (name, value) in req.headers() {
            if let Some(key) = name.as_str().strip_prefix(IMPERSONATE_EXTRA)
                && let Ok(v) = value.to_str()
            {
                let key = percent_encoding::percent_decode_str(key)
                    .decode_utf8_lossy()
                    .to_lowercase();
                extra.entry(key).or_default().push(v.to_string());
            }
        }
        let Some(user_name) = user_name else {
            if uid.is_some() || !groups.is_empty() || !extra.is_empty() {
                let s = Status::internal(
                    "requested uid, groups or user-extra without impersonating a user",
                );
                return response::status(&s, Encoding::Json);
            }
            return call_next(next, req).await;
        };
        let requestor = request_user(&req);
        let service_account = user_name
            .strip_prefix("system:serviceaccount:")
            .and_then(|r| r.split_once(':'));
        let mut checks = vec![match service_account {
            Some((ns, name)) => ActAs {
                namespace: ns.to_string(),
                ..ActAs::cluster("", "serviceaccounts", name)
            },
            None => ActAs::cluster("", "users", &user_name),
        }];
        if let Some(uid) = &uid {
            checks.push(ActAs::cluster("authentication.k8s.io", "uids", uid));
        }
        checks.extend(groups.iter().map(|g| ActAs::cluster("", "groups", g)));
        for (key, values) in &extra {
            checks.extend(values.iter().map(|v| ActAs {
                subresource: key.clone(),
                ..ActAs::cluster("authentication.k8s.io", "userextras", v)
            }));
        }
        for c in checks {
            let info = RequestInfo {
                is_resource_request: true,
                verb: "impersonate".into(),
                api_group: c.api_group.into(),
                resource: c.resource.into(),
                subresource: c.subresource,
                namespace: c.namespace,
                name: c.name,
                ..Default::default()
            };
            let reason = match server.config.authorizer.authorize(&requestor, &info).await {
                Decision::Allow(_) => continue,
                Decision::Deny(reason) | Decision::NoOpinion(reason) => reason,
            };
            return response::status(&forbidden(&requestor, &info, &reason), Encoding::Json);
        }
        // Groups given are the authority; without them a service account has its fixed
        // groups. Either way the impersonated user is authenticated unless a group says
        // otherwise (or it is the anonymous user), as upstream.
        let mut all_groups = match (groups.is_empty(), service_account) {
            (true, Some((ns, _))) => vec![
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{ns}"),
            ],
            _ => groups,
        };
        if !all_groups
            .iter()
            .any(|g| g == "system:authenticated" || g == "system:unauthenticated")
        {
            let marker = if user_name == "system:anonymous" {
                "system:unauthenticated"
            } else {
                "system:authenticated"
            };
            all_groups.push(marker.to_string());
        }
        let acting = UserInfo {
            name: user_name,
            uid: uid.unwrap_or_default(),
            groups: all_groups,
            extra,
        };
        tracing::debug!(user = %requestor.name, as_user = %acting.name, "impersonating");
        let names: Vec<http::HeaderName> = req
            .headers()
            .keys()
            .filter(|n| n.as_str().starts_with("impersonate-"))
            .cloned()
            .collect();
        for n in names {
            req.headers_mut().remove(n);
        }
        if let Some(slot) = req.extensions().get::<ImpersonatedSlot>()
            && let Ok(mut s) = slot.0.lock()
        {
            *s = Some(acting.clone());
        }
        req.extensions_mut().insert(Arc::new(acting));
        call_next(next, req).await
    })
}

/// Upstream's answer when the server is at its limit.
fn too_many_requests() -> Response {
    let s = Status::too_many_requests("Too many requests, please try again later.", 1);
    response::status(&s, Encoding::Json)
}

/// Max in flight: read-only and mutating requests each have a limit; long-running requests
/// (watches) and `system:masters` are exempt, as upstream (endpoints/filters/maxinflight.go).
/// With priority and fairness on, that decides instead (`priority_and_fairness`).
fn limit_in_flight(
    server: Arc<GenericApiServer>,
    req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    if let Some(fc) = server.flow_control.clone() {
        return Box::pin(priority_and_fairness(fc, server, req, next));
    }
    Box::pin(async move {
        let info = request_info(&req);
        let masters = req
            .extensions()
            .get::<Arc<UserInfo>>()
            .is_some_and(|u| u.groups.iter().any(|g| g == "system:masters"));
        if info.verb == "watch" || masters {
            return call_next(next, req).await;
        }
        let read_only = matches!(info.verb.as_str(), "get" | "list" | "head");
        let semaphore = if read_only {
            &server.limits.read_only
        } else {
            &server.limits.mutating
        };
        let _permit = match semaphore {
            None => None,
            Some(s) => match s.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    crate::endpoints::metrics::record_dropped(
                        &info,
                        req.uri().query().unwrap_or(""),
                        req.headers(),
                    );
                    return too_many_requests();
                }
            },
        };
        call_next(next, req).await
    })
}

/// Upstream's long-running requests (`BasicLongRunningRequestCheck` with the verbs `watch`
/// and `proxy` and the subresources of kube-apiserver's streaming endpoints).
fn is_long_running(info: &RequestInfo) -> bool {
    matches!(info.verb.as_str(), "watch" | "proxy")
        || matches!(
            info.subresource.as_str(),
            "attach" | "exec" | "proxy" | "log" | "portforward"
        )
}

/// API Priority and Fairness (upstream: server/filters/priority-and-fairness.go): the request
/// waits for its priority level to run it, or gets 429. Long-running requests other than
/// watches pass untouched; a watch holds its seats until its response starts (its
/// initialization), as upstream's.
async fn priority_and_fairness(
    fc: Arc<crate::flowcontrol::FlowControl>,
    server: Arc<GenericApiServer>,
    req: HttpRequest,
    next: Next,
) -> Response {
    use crate::flowcontrol::{FLOW_SCHEMA_UID_HEADER, Outcome, PRIORITY_LEVEL_UID_HEADER};
    let received = std::time::Instant::now();
    let info = request_info(&req);
    if info.verb != "watch" && is_long_running(&info) {
        return call_next(next, req).await;
    }
    let user = request_user(&req);
    let query = req.uri().query().unwrap_or("").to_string();
    // A watch has no deadline; it waits as long as the server's request timeout allows.
    let deadline = requested_timeout(&query, server.config.request_timeout)
        .unwrap_or(server.config.request_timeout);
    let set_headers = |r: &mut Response, c: &crate::flowcontrol::Classification| {
        for (name, value) in [
            (PRIORITY_LEVEL_UID_HEADER, &c.priority_level_uid),
            (FLOW_SCHEMA_UID_HEADER, &c.flow_schema_uid),
        ] {
            if let Ok(v) = http::HeaderValue::from_str(value) {
                r.headers_mut().insert(name, v);
            }
        }
    };
    let outcome = fc.admit(&user, &info, &query, received, deadline).await;
    if matches!(outcome, Outcome::Reject(_) | Outcome::Unclassified) {
        crate::endpoints::metrics::record_dropped(&info, &query, req.headers());
    }
    match outcome {
        Outcome::Execute(classification, execution) => {
            // A watch counts for the writes' estimates until its response ends.
            let watch = fc.track_watch(&info);
            let mut r = call_next(next, req).await;
            set_headers(&mut r, &classification);
            if let Some(watch) = watch {
                drop(execution);
                let (parts, body) = r.into_parts();
                let body = response::completing(body, Box::new(move || drop(watch)));
                return http::Response::from_parts(parts, body);
            }
            if info.verb == "watch" || !r.body().is_stream() {
                drop(execution);
                return r;
            }
            // A body made while it is sent (a long list, a proxied answer) does the request's
            // work after the handler returns: it keeps its seats until it is over, as upstream's
            // handler keeps them while it writes, but not past the request's deadline, when
            // upstream's handler gives up: a client that stops reading holds no seat for long.
            let seats = Arc::new(std::sync::Mutex::new(Some(execution)));
            let at_deadline = seats.clone();
            let expiry = tokio::spawn(async move {
                tokio::time::sleep_until(tokio::time::Instant::from_std(received + deadline)).await;
                let execution = at_deadline.lock().ok().and_then(|mut s| s.take());
                drop(execution);
            });
            let (parts, body) = r.into_parts();
            let body = response::completing(
                body,
                Box::new(move || {
                    expiry.abort();
                    let execution = seats.lock().ok().and_then(|mut s| s.take());
                    drop(execution);
                }),
            );
            http::Response::from_parts(parts, body)
        }
        Outcome::Reject(classification) => {
            let retry_after = fc.record_dropped(&classification.priority_level);
            let mut r = apf_too_many_requests(retry_after);
            set_headers(&mut r, &classification);
            r
        }
        Outcome::Unclassified => apf_too_many_requests(1),
    }
}

/// Upstream's answer when flow control turns a request away: Go's `http.Error`, a plain-text
/// line rather than a `Status`, with `Retry-After`.
fn apf_too_many_requests(retry_after: i64) -> Response {
    let mut r = response::raw(
        http::StatusCode::TOO_MANY_REQUESTS,
        "text/plain; charset=utf-8",
        "Too many requests, please try again later.\n",
    );
    r.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from(retry_after),
    );
    r.headers_mut().insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        http::HeaderValue::from_static("nosniff"),
    );
    r
}

/// The audit annotations of an authorization decision (upstream's filters/authorization.go).
const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

fn authorize(
    server: Arc<GenericApiServer>,
    req: HttpRequest,
    next: Next,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let info = request_info(&req);
        let user = request_user(&req);
        // The decision and its reason go to the audit event, as upstream's filter adds them.
        let start = std::time::Instant::now();
        let decision = server.config.authorizer.authorize(&user, &info).await;
        let result = match &decision {
            Decision::Allow(_) => "allowed",
            Decision::Deny(_) => "denied",
            Decision::NoOpinion(_) => "no-opinion",
        };
        metrics::record_authorization(result, start);
        match decision {
            Decision::Allow(reason) => {
                crate::audit::add_annotation(DECISION_ANNOTATION, "allow");
                crate::audit::add_annotation(REASON_ANNOTATION, reason);
            }
            Decision::Deny(reason) | Decision::NoOpinion(reason) => {
                crate::audit::add_annotation(DECISION_ANNOTATION, "forbid");
                crate::audit::add_annotation(REASON_ANNOTATION, reason.clone());
                return response::status(&forbidden(&user, &info, &reason), Encoding::Json);
            }
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
        " at the cluster scope".to_string()
    } else {
        format!(" in the namespace \"{}\"", info.namespace)
    };
    let resource = if info.subresource.is_empty() {
        info.resource.clone()
    } else {
        format!("{}/{}", info.resource, info.subresource)
    };
    let why = format!(
        "User \"{}\" cannot {} resource \"{}\" in API group \"{}\"{scope}{}",
        user.name,
        info.verb,
        resource,
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
    #[test]
    fn request_timeouts_follow_the_timeout_parameter() {
        use std::time::Duration;
        let max = Duration::from_secs(60);
        assert_eq!(requested_timeout("", max), Ok(max));
        assert_eq!(
            requested_timeout("timeout=10s", max),
            Ok(Duration::from_secs(10))
        );
        assert_eq!(requested_timeout("timeout=1m30s", max), Ok(max));
        assert_eq!(requested_timeout("timeout=0s", max), Ok(max));
        assert_eq!(
            requested_timeout("timeout=250ms&x=1", max),
            Ok(Duration::from_millis(250))
        );
        assert_eq!(
            requested_timeout("timeout=abc", max).map_err(|s| (s.code, s.message)),
            Err((
                400,
                r#"invalid timeout specified in the request URL - time: invalid duration "abc""#
                    .to_string()
            ))
        );
    }

    use super::*;
    use crate::authentication::UnionAuthenticator;
    use crate::authorization::{Authorizer, Decision};
    use crate::server::Config;
    use tower::ServiceExt;

    /// Authenticated users may do everything; anonymous ones may read `/version`.
    struct AuthenticatedOrVersion;

    #[async_trait::async_trait]
    impl Authorizer for AuthenticatedOrVersion {
        async fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
            if user.groups.iter().any(|g| g == "system:authenticated") || request.path == "/version"
            {
                Decision::Allow(String::new())
            } else {
                Decision::NoOpinion(String::new())
            }
        }
    }
    use http_body_util::{BodyExt, Full};

    fn server_with_limits(read_only: usize, mutating: usize) -> Arc<GenericApiServer> {
        server_with(read_only, mutating, true)
    }

    fn server_with(
        read_only: usize,
        mutating: usize,
        anonymous_auth: bool,
    ) -> Arc<GenericApiServer> {
        let config = Config {
            authenticator: Arc::new(UnionAuthenticator::new(Vec::new())),
            authorizer: Arc::new(AuthenticatedOrVersion),
            anonymous_auth,
            anonymous_paths: Vec::new(),
            request_timeout: std::time::Duration::from_secs(5),
            version: serde_json::json!({}),
            openapi: Default::default(),
            external_address: "127.0.0.1:6443".into(),
            max_requests_inflight: read_only,
            max_mutating_requests_inflight: mutating,
        };
        Arc::new(GenericApiServer::new(
            config,
            Vec::new(),
            Default::default(),
        ))
    }

    fn server() -> Arc<GenericApiServer> {
        server_with_limits(0, 0)
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    /// A request as it leaves authentication: request info and user in the extensions.
    fn authenticated(
        method: http::Method,
        path: &str,
        who: UserInfo,
        headers: &[(&str, &str)],
    ) -> HttpRequest {
        let mut b = http::Request::builder().method(method.clone()).uri(path);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let mut req = b
            .body(
                Full::new(bytes::Bytes::new())
                    .map_err(|e| match e {})
                    .boxed_unsync(),
            )
            .unwrap();
        req.extensions_mut()
            .insert(Arc::new(RequestInfo::parse(&method, path, "")));
        req.extensions_mut().insert(Arc::new(who));
        req
    }

    async fn body_json(r: Response) -> serde_json::Value {
        serde_json::from_slice(&r.into_body().collect().await.unwrap().to_bytes()).unwrap()
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
        let chain: Next = filter(server(), recover_panics, Next::new(handler));
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
    async fn requests_without_credentials_are_anonymous_unless_anonymous_auth_is_off() {
        let chain = build_handler_chain(server());
        let r = chain
            .clone()
            .oneshot(request("/api/v1/namespaces"))
            .await
            .unwrap();
        assert_eq!(r.status(), 403);
        let body = body_json(r).await;
        assert_eq!(
            body["message"],
            r#"namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" in API group "" at the cluster scope"#
        );
        let r = chain.oneshot(request("/version")).await.unwrap();
        assert_eq!(
            r.status(),
            200,
            "the authorizer lets anonymous users read /version"
        );
        let closed = build_handler_chain(server_with(0, 0, false));
        for path in ["/api/v1/namespaces", "/version"] {
            let r = closed.clone().oneshot(request(path)).await.unwrap();
            assert_eq!(r.status(), 401, "{path}");
            assert_eq!(body_json(r).await["reason"], "Unauthorized");
        }
    }

    #[tokio::test]
    async fn impersonation_switches_the_user_and_drops_the_headers() {
        let echo = tower::service_fn(|req: HttpRequest| async move {
            let u = UserInfo::clone(req.extensions().get::<Arc<UserInfo>>().unwrap());
            let leaked = req
                .headers()
                .keys()
                .any(|k| k.as_str().starts_with("impersonate-"));
            let body = serde_json::json!({"name": u.name, "groups": u.groups, "extra": u.extra, "leaked": leaked});
            Ok::<_, Infallible>(response::raw(
                http::StatusCode::OK,
                "application/json",
                body.to_string(),
            ))
        });
        let chain: Next = filter(server(), impersonate, Next::new(echo));
        let admin = user(
            "kubernetes-admin",
            &["system:masters", "system:authenticated"],
        );
        let r = chain
            .clone()
            .oneshot(authenticated(
                http::Method::GET,
                "/api",
                admin.clone(),
                &[
                    ("Impersonate-User", "jane"),
                    ("Impersonate-Group", "devs"),
                    ("Impersonate-Extra-Scopes", "view"),
                ],
            ))
            .await
            .unwrap();
        let b = body_json(r).await;
        assert_eq!(b["name"], "jane");
        assert_eq!(
            b["groups"],
            serde_json::json!(["devs", "system:authenticated"])
        );
        assert_eq!(b["extra"], serde_json::json!({"scopes": ["view"]}));
        assert_eq!(b["leaked"], false);
        // A service account gets its fixed groups.
        let r = chain
            .clone()
            .oneshot(authenticated(
                http::Method::GET,
                "/api",
                admin.clone(),
                &[("Impersonate-User", "system:serviceaccount:ns1:robot")],
            ))
            .await
            .unwrap();
        assert_eq!(
            body_json(r).await["groups"],
            serde_json::json!([
                "system:serviceaccounts",
                "system:serviceaccounts:ns1",
                "system:authenticated"
            ])
        );
        // Groups without a user are refused.
        let r = chain
            .oneshot(authenticated(
                http::Method::GET,
                "/api",
                admin,
                &[("Impersonate-Group", "devs")],
            ))
            .await
            .unwrap();
        assert_eq!(r.status(), 500);
    }

    #[tokio::test]
    async fn impersonation_needs_permission() {
        let echo = tower::service_fn(|_req: HttpRequest| async {
            Ok::<_, Infallible>(response::raw(http::StatusCode::OK, "text/plain", "ok"))
        });
        let chain: Next = filter(server(), impersonate, Next::new(echo));
        let r = chain
            .oneshot(authenticated(
                http::Method::GET,
                "/api",
                anonymous_user(),
                &[("Impersonate-User", "jane")],
            ))
            .await
            .unwrap();
        assert_eq!(r.status(), 403);
        let b = body_json(r).await;
        assert_eq!(b["reason"], "Forbidden");
        assert!(
            b["message"].as_str().unwrap().starts_with(
                r#"users "jane" is forbidden: User "system:anonymous" cannot impersonate resource "users" in API group "" at the cluster scope"#
            ),
            "{b}"
        );
    }

    #[tokio::test]
    async fn priority_and_fairness_replaces_max_in_flight_when_on() {
        let release = Arc::new(tokio::sync::Notify::new());
        let held = release.clone();
        let slow = tower::service_fn(move |_req: HttpRequest| {
            let held = held.clone();
            async move {
                held.notified().await;
                Ok::<_, Infallible>(response::raw(http::StatusCode::OK, "text/plain", "done"))
            }
        });
        // One seat in all: the mandatory catch-all level takes it (exempt has no shares).
        // The max-in-flight limits would let both requests through.
        let server = server_with_limits(100, 100);
        let server = Arc::new(GenericApiServer {
            flow_control: Some(crate::flowcontrol::FlowControl::new(1)),
            ..Arc::into_inner(server).unwrap()
        });
        let chain: Next = filter(server, limit_in_flight, Next::new(slow));
        let bob = user("bob", &["system:authenticated"]);
        let get = |who: &UserInfo| {
            authenticated(
                http::Method::GET,
                "/api/v1/namespaces/a/configmaps",
                who.clone(),
                &[],
            )
        };
        let first = tokio::spawn(chain.clone().oneshot(get(&bob)));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let second = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            chain.clone().oneshot(get(&bob)),
        )
        .await
        .expect("answered at once, not run")
        .unwrap();
        assert_eq!(second.status(), 429);
        assert_eq!(second.headers()[http::header::RETRY_AFTER], "1");
        assert!(
            second
                .headers()
                .contains_key(crate::flowcontrol::FLOW_SCHEMA_UID_HEADER)
        );
        assert!(
            second
                .headers()
                .contains_key(crate::flowcontrol::PRIORITY_LEVEL_UID_HEADER)
        );
        let body = second.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"Too many requests, please try again later.\n");
        // system:masters matches the exempt schema.
        let admin = user("admin", &["system:masters", "system:authenticated"]);
        let masters = tokio::spawn(chain.clone().oneshot(get(&admin)));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        release.notify_waiters();
        let first = first.await.unwrap().unwrap();
        assert_eq!(first.status(), 200);
        assert!(
            first
                .headers()
                .contains_key(crate::flowcontrol::FLOW_SCHEMA_UID_HEADER)
        );
        assert_eq!(masters.await.unwrap().unwrap().status(), 200);
    }

    #[tokio::test]
    async fn a_body_made_while_it_is_sent_keeps_its_seats_until_it_is_over() {
        // The handler answers `/streamed` with a stream of two frames, the second sent when the
        // test says, `/stalled` with a stream that never ends, and any other path whole.
        let (more, frames) = tokio::sync::mpsc::channel::<bytes::Bytes>(1);
        let frames = Arc::new(std::sync::Mutex::new(Some(frames)));
        let handler = tower::service_fn(move |req: HttpRequest| {
            let stalled = req.uri().path().ends_with("/stalled");
            let frames = if req.uri().path().ends_with("/streamed") {
                frames.lock().unwrap().take()
            } else {
                None
            };
            async move {
                if stalled {
                    // A stream whose client never reads on: it never ends.
                    let never = futures_util::stream::pending::<
                        Result<http_body::Frame<bytes::Bytes>, Infallible>,
                    >();
                    let body = response::Body::stream(http_body_util::StreamBody::new(never));
                    return Ok(http::Response::new(body));
                }
                let Some(frames) = frames else {
                    return Ok::<_, Infallible>(response::raw(
                        http::StatusCode::OK,
                        "text/plain",
                        "whole",
                    ));
                };
                let stream = futures_util::stream::unfold(frames, |mut frames| async move {
                    let next = frames.recv().await?;
                    Some((Ok::<_, Infallible>(http_body::Frame::data(next)), frames))
                });
                let body = response::Body::stream(http_body_util::StreamBody::new(stream));
                let mut r = http::Response::new(body);
                *r.status_mut() = http::StatusCode::OK;
                Ok(r)
            }
        });
        let server = server_with_limits(100, 100);
        let server = Arc::new(GenericApiServer {
            flow_control: Some(crate::flowcontrol::FlowControl::new(1)),
            ..Arc::into_inner(server).unwrap()
        });
        let chain: Next = filter(server, limit_in_flight, Next::new(handler));
        let bob = user("bob", &["system:authenticated"]);
        let send = |path: &str| {
            chain
                .clone()
                .oneshot(authenticated(http::Method::GET, path, bob.clone(), &[]))
        };
        let whole = "/api/v1/namespaces/a/configmaps/x";

        assert_eq!(send(whole).await.unwrap().status(), 200);
        assert_eq!(
            send(whole).await.unwrap().status(),
            200,
            "a whole answer gave its seat back"
        );

        let streamed = send("/api/v1/namespaces/a/configmaps/streamed")
            .await
            .unwrap();
        assert_eq!(streamed.status(), 200);
        let mut body = streamed.into_body();
        more.send(bytes::Bytes::from("first")).await.unwrap();
        assert_eq!(
            body.frame().await.unwrap().unwrap().into_data().unwrap(),
            "first"
        );
        assert_eq!(
            send(whole).await.unwrap().status(),
            429,
            "the stream still holds the only seat"
        );
        more.send(bytes::Bytes::from("last")).await.unwrap();
        drop(more);
        let rest = body.collect().await.unwrap().to_bytes();
        assert_eq!(&rest[..], b"last");
        assert_eq!(
            send(whole).await.unwrap().status(),
            200,
            "the seat came back when the stream ended"
        );

        // A stream that never ends gives its seat back at the request's deadline.
        let stalled = send("/api/v1/namespaces/a/configmaps/stalled?timeout=1s")
            .await
            .unwrap();
        assert_eq!(stalled.status(), 200);
        assert_eq!(send(whole).await.unwrap().status(), 429);
        tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
        assert_eq!(
            send(whole).await.unwrap().status(),
            200,
            "the seat came back at the deadline, the stream still open"
        );
        drop(stalled);
        assert_eq!(send(whole).await.unwrap().status(), 200);
    }

    #[tokio::test]
    async fn max_in_flight_answers_429_beyond_the_limit_but_not_for_masters() {
        let release = Arc::new(tokio::sync::Notify::new());
        let held = release.clone();
        let slow = tower::service_fn(move |_req: HttpRequest| {
            let held = held.clone();
            async move {
                held.notified().await;
                Ok::<_, Infallible>(response::raw(
                    http::StatusCode::CREATED,
                    "text/plain",
                    "done",
                ))
            }
        });
        let chain: Next = filter(server_with_limits(0, 1), limit_in_flight, Next::new(slow));
        let bob = user("bob", &["system:authenticated"]);
        let first = tokio::spawn(chain.clone().oneshot(authenticated(
            http::Method::POST,
            "/api/v1/namespaces/a/configmaps",
            bob.clone(),
            &[],
        )));
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let second = chain
            .clone()
            .oneshot(authenticated(
                http::Method::POST,
                "/api/v1/namespaces/a/configmaps",
                bob.clone(),
                &[],
            ))
            .await
            .unwrap();
        assert_eq!(second.status(), 429);
        assert_eq!(
            second.headers().get(http::header::RETRY_AFTER).unwrap(),
            "1"
        );
        let b = body_json(second).await;
        assert_eq!(
            (b["reason"].as_str(), b["message"].as_str()),
            (
                Some("TooManyRequests"),
                Some("Too many requests, please try again later.")
            )
        );
        // system:masters is exempt, as upstream.
        let admin = user("admin", &["system:masters", "system:authenticated"]);
        let masters = tokio::spawn(chain.clone().oneshot(authenticated(
            http::Method::POST,
            "/api/v1/namespaces/a/configmaps",
            admin,
            &[],
        )));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        release.notify_waiters();
        assert_eq!(first.await.unwrap().unwrap().status(), 201);
        assert_eq!(masters.await.unwrap().unwrap().status(), 201);
    }
}
