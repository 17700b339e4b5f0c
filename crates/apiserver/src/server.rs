//! `GenericApiServer`: the configured server — its delegation chain, health checks, discovery,
//! OpenAPI and version — and `route`, which serves what the filter chain lets through.
//! Upstream: k8s.io/apiserver/pkg/server (config.go, genericapiserver.go).

use std::sync::Arc;
use std::time::Duration;

use apimachinery::Status;
use async_trait::async_trait;
use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Limited};
use serde_json::Value;

use crate::authentication::{Authenticator, UserInfo};
use crate::authorization::Authorizer;
use crate::endpoints::metrics::Monitor;
use crate::endpoints::negotiation::{Encoding, View, negotiate};
use crate::endpoints::{ApiRequest, ApiResources, Response, discovery, response};
use crate::filters::{InFlight, RequestBody};
use crate::health::Health;
use crate::openapi::OpenApi;
use crate::registry::ResourceInfo;
use crate::request::RequestInfo;

/// Upstream's limit on request bodies (3 MiB), beyond which a request gets 413.
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A server in the delegation chain: it serves a request or hands it to the next one.
#[async_trait]
pub trait Delegate: Send + Sync {
    async fn serve(&self, req: ApiRequest) -> Result<Result<Response, Status>, ApiRequest>;
    /// The resources it serves, for discovery.
    fn resources(&self) -> Vec<ResourceInfo>;
    /// The OpenAPI v3 documents of what it serves that the server's own documents lack, by path
    /// below `/openapi/v3/` (custom resources' `apis/<group>/<version>`), each with a hash that
    /// changes with its content (the index's `?hash=`).
    fn openapi_v3_paths(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// One of those documents, as JSON, built when asked for.
    fn openapi_v3_doc(&self, _path: &str) -> Option<Bytes> {
        None
    }
    /// What it adds to the one `/openapi/v2` document (`paths` and `definitions` of custom
    /// resources), with a fingerprint that changes with its content; None when nothing.
    fn openapi_v2_fragment(&self) -> Option<(String, Arc<serde_json::Value>)> {
        None
    }
    /// Puts the whole chain's discovery rows in the order discovery lists them (upstream's
    /// aggregator sorts every group by its APIServices' priorities); most leave them as they are.
    fn order_discovery(&self, _infos: &mut [ResourceInfo]) {}
    /// Group versions it lists in discovery whether or not it has rows for them, each with its
    /// aggregated discovery entry (the aggregator's remote APIServices); most list none.
    fn listed_versions(&self) -> Vec<discovery::ListedVersion> {
        Vec::new()
    }
}

#[async_trait]
impl Delegate for ApiResources {
    async fn serve(&self, req: ApiRequest) -> Result<Result<Response, Status>, ApiRequest> {
        ApiResources::serve(self, req).await
    }

    fn resources(&self) -> Vec<ResourceInfo> {
        self.infos().cloned().collect()
    }
}

/// A handler that sees a request before its body is read, and either serves it — with the body
/// still streaming, as a proxy needs — or hands it back untouched (the aggregator's proxy to
/// extension API servers, upstream's `proxyHandler` at the head of the server chain).
#[async_trait]
pub trait StreamingHandler: Send + Sync {
    async fn serve_streaming(
        &self,
        req: http::Request<RequestBody>,
        info: &RequestInfo,
        user: &UserInfo,
    ) -> Result<Response, http::Request<RequestBody>>;
}

pub struct Config {
    pub authenticator: Arc<dyn Authenticator>,
    pub authorizer: Arc<dyn Authorizer>,
    /// `--anonymous-auth`: requests without credentials are `system:anonymous` (else 401).
    pub anonymous_auth: bool,
    /// When not empty, anonymous requests are let in on these paths only (the `anonymous`
    /// conditions of `--authentication-config`).
    pub anonymous_paths: Vec<String>,
    pub request_timeout: Duration,
    pub version: Value,
    pub openapi: OpenApi,
    /// `host:port` clients are told to use in `/api`.
    pub external_address: String,
    /// `--max-requests-inflight`: read-only requests served at once; 0 is no limit.
    pub max_requests_inflight: usize,
    /// `--max-mutating-requests-inflight`: writes served at once; 0 is no limit.
    pub max_mutating_requests_inflight: usize,
}

pub struct GenericApiServer {
    pub config: Config,
    /// First match wins: aggregator, built-in groups, extensions.
    pub chain: Vec<Arc<dyn Delegate>>,
    pub health: Health,
    pub in_flight: InFlight,
    pub limits: crate::filters::InFlightLimits,
    /// API Priority and Fairness (`--enable-priority-and-fairness`): when set, it replaces
    /// the max-in-flight limits.
    pub flow_control: Option<Arc<crate::flowcontrol::FlowControl>>,
    /// `--audit-policy-file` and `--audit-log-path`; `None` audits nothing.
    pub auditor: Option<Arc<crate::audit::Auditor>>,
    /// Fixed documents served at non-resource paths (the service-account issuer's OIDC
    /// discovery document and key set).
    pub documents: Vec<Document>,
    /// Asked first for every request that passed the filter chain (discovery of a group version
    /// included: an extension server answers for its own), before the body is read.
    pub streaming: Option<Arc<dyn StreamingHandler>>,
}

/// A document served as it is at `path` (with or without a trailing slash), with a
/// `Cache-Control: public, max-age=...` header, as upstream serves its OIDC metadata.
pub struct Document {
    pub path: String,
    pub content_type: &'static str,
    pub body: Bytes,
    pub max_age_seconds: u32,
}

/// The non-resource handlers upstream instruments with its request metrics, as the path label
/// and component each reports: the health endpoints' roots and OpenAPI v3.
fn instrumented_non_resource(path: &str) -> Option<(&'static str, &'static str)> {
    match path.trim_end_matches('/') {
        "/healthz" => Some(("/healthz", "")),
        "/livez" => Some(("/livez", "")),
        "/readyz" => Some(("/readyz", "")),
        "/openapi/v3" => Some(("openapi/v3", "")),
        p if p.starts_with("/openapi/v3/") => Some(("openapi/v3/", "")),
        _ => None,
    }
}

fn text(code: StatusCode, body: impl Into<Bytes>) -> Response {
    response::raw(code, "text/plain; charset=utf-8", body)
}

impl GenericApiServer {
    pub fn new(config: Config, chain: Vec<Arc<dyn Delegate>>, health: Health) -> Self {
        let limits = crate::filters::InFlightLimits::new(
            config.max_requests_inflight,
            config.max_mutating_requests_inflight,
        );
        Self {
            config,
            chain,
            health,
            in_flight: InFlight::default(),
            limits,
            flow_control: None,
            auditor: None,
            documents: Vec::new(),
            streaming: None,
        }
    }

    fn infos(&self) -> Vec<ResourceInfo> {
        let mut infos: Vec<ResourceInfo> = self.chain.iter().flat_map(|d| d.resources()).collect();
        for d in &self.chain {
            d.order_discovery(&mut infos);
        }
        infos
    }

    /// What discovery lists: the rows, with a placeholder for each listed group version that
    /// has none (an extension server's while it is unavailable), all in discovery order; and the
    /// listed group versions' own entries.
    fn discovery_infos(&self) -> (Vec<ResourceInfo>, Vec<discovery::ListedVersion>) {
        let listed: Vec<discovery::ListedVersion> = self
            .chain
            .iter()
            .flat_map(|d| d.listed_versions())
            .collect();
        let mut infos: Vec<ResourceInfo> = self.chain.iter().flat_map(|d| d.resources()).collect();
        for l in &listed {
            if !infos
                .iter()
                .any(|i| i.group == l.group && i.version == l.version)
            {
                infos.push(discovery::placeholder(&l.group, &l.version));
            }
        }
        for d in &self.chain {
            d.order_discovery(&mut infos);
        }
        (infos, listed)
    }

    /// Every resource the chain serves, built-in and custom: what discovery lists (for
    /// in-process clients that map resources to kinds, as a RESTMapper over discovery does).
    pub fn served_resources(&self) -> Vec<ResourceInfo> {
        self.infos()
    }

    /// The JSON of the document `/openapi/v3/<path>` serves: the server's own, else a
    /// delegate's (custom resources).
    pub fn openapi_v3_json(&self, path: &str) -> Option<Vec<u8>> {
        if let Some(doc) = self.config.openapi.v3.get(path) {
            return doc.inflate().ok();
        }
        self.chain
            .iter()
            .find_map(|d| d.openapi_v3_doc(path))
            .map(|b| b.to_vec())
    }

    /// The end of the filter chain: the request info and user are in the extensions.
    pub async fn route_request(&self, req: http::Request<RequestBody>) -> Response {
        let mut req = req;
        let info = req
            .extensions_mut()
            .remove::<std::sync::Arc<RequestInfo>>()
            .unwrap_or_else(|| crate::filters::request_info(&req));
        let user = req
            .extensions_mut()
            .remove::<std::sync::Arc<UserInfo>>()
            .unwrap_or_else(|| crate::filters::request_user(&req));
        let (info, user) = (
            std::sync::Arc::unwrap_or_clone(info),
            std::sync::Arc::unwrap_or_clone(user),
        );
        self.route(req, info, user).await
    }

    /// Serves a request that passed the filter chain.
    pub async fn route(
        &self,
        req: http::Request<RequestBody>,
        info: RequestInfo,
        user: UserInfo,
    ) -> Response {
        let accept = req
            .headers()
            .get(http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let error_encoding = match negotiate(accept.as_deref(), &[View::Object]) {
            Ok(n) if n.encoding == Encoding::Yaml => Encoding::Yaml,
            _ => Encoding::Json,
        };
        // Warnings recorded while serving reach the client whether the request succeeds or not,
        // as upstream's recorder writes them to the response headers as they are added.
        let from_authentication = req
            .extensions()
            .get::<crate::filters::AuthnNotes>()
            .map(|n| n.warnings.clone())
            .unwrap_or_default();
        let received = req
            .extensions()
            .get::<crate::endpoints::metrics::Received>()
            .map_or_else(std::time::Instant::now, |r| r.0);
        let monitor = if info.is_resource_request {
            Some(Monitor::resource(
                &info,
                req.uri().query().unwrap_or(""),
                req.headers(),
                received,
            ))
        } else {
            instrumented_non_resource(&info.path)
                .map(|(path, component)| Monitor::non_resource(path, component, received))
        };
        let mut served = !info.is_resource_request;
        // Long-running requests are not in the executing count, as upstream's.
        let _executing =
            (info.verb != "watch").then(|| crate::endpoints::metrics::Executing::start(&info.verb));
        let (result, warnings) = crate::warning::record(async {
            crate::warning::add_all(from_authentication);
            self.route_inner(req, info, user, accept.as_deref(), &mut served)
                .await
        })
        .await;
        let response = match result {
            Ok(r) => r,
            Err(s) => {
                if s.code >= 500 {
                    tracing::warn!(code = s.code, message = %s.message, "request failed");
                }
                response::status(&s, error_encoding)
            }
        };
        let response = crate::warning::append(response, warnings);
        // Upstream records what a route served: not a resource request no route matched.
        match monitor {
            Some(m) if served => m.finish(response),
            _ => response,
        }
    }

    async fn route_inner(
        &self,
        req: http::Request<RequestBody>,
        info: RequestInfo,
        user: UserInfo,
        accept: Option<&str>,
        served: &mut bool,
    ) -> Result<Response, Status> {
        let req = match &self.streaming {
            Some(handler) => match handler.serve_streaming(req, &info, &user).await {
                Ok(response) => return Ok(response),
                Err(back) => back,
            },
            None => req,
        };
        let path = info.path.trim_end_matches('/').to_string();
        let query = req.uri().query().unwrap_or("").to_string();
        if !info.is_resource_request {
            return self
                .non_resource(&path, &query, &info, accept, req.headers())
                .await;
        }
        let (parts, body) = req.into_parts();
        let body = read_body(body).await?;
        let mut api_req = ApiRequest {
            method: parts.method,
            headers: parts.headers,
            query,
            info,
            user,
            body,
        };
        for delegate in &self.chain {
            match delegate.serve(api_req).await {
                Ok(result) => {
                    *served = true;
                    return result;
                }
                Err(back) => api_req = back,
            }
        }
        // Not found: inside a served group version, or under a root of upstream's REST
        // container, the answer is a Status; elsewhere upstream's mux answers with its
        // plain-text 404 page.
        let known_gv = self
            .infos()
            .iter()
            .any(|i| i.group == api_req.info.api_group && i.version == api_req.info.api_version);
        if known_gv {
            Err(Status::path_not_found())
        } else {
            self.not_found(&api_req.info.path)
        }
    }

    /// Whether `path` falls under a root of upstream's REST (go-restful) container, whose own
    /// 404 is a Status: `/api`, `/version` and each built-in group's `/apis/<group>` (the
    /// director hands it any path below a root, even one naming nothing, as
    /// `/api//v1/namespaces` or `/apis/apps/v9`). Custom resources' groups are served beside
    /// that container. Checked against kube-apiserver v1.36.2.
    fn under_rest_root(&self, path: &str) -> bool {
        let mut segments = path.trim_start_matches('/').split('/');
        match (segments.next(), segments.next()) {
            (Some("api"), _) | (Some("version"), Some(_)) => true,
            (Some("apis"), Some(group)) if !group.is_empty() => self
                .infos()
                .iter()
                .any(|i| i.group == group && !i.unstructured),
            _ => false,
        }
    }

    /// The not-found answer of a path no handler serves (see [`Self::under_rest_root`]).
    fn not_found(&self, path: &str) -> Result<Response, Status> {
        if self.under_rest_root(path) {
            Err(Status::path_not_found())
        } else {
            Ok(text(StatusCode::NOT_FOUND, "404 page not found\n"))
        }
    }

    async fn non_resource(
        &self,
        path: &str,
        query: &str,
        info: &RequestInfo,
        accept: Option<&str>,
        headers: &http::HeaderMap,
    ) -> Result<Response, Status> {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match segments.as_slice() {
            [endpoint @ ("healthz" | "livez" | "readyz")]
            | [endpoint @ ("healthz" | "livez" | "readyz"), _] => {
                let sub = if segments.len() == 2 {
                    Some(path.splitn(3, '/').nth(2).unwrap_or(""))
                } else {
                    None
                };
                return Ok(match self.health.answer(endpoint, sub, query) {
                    Some(a) => text(
                        StatusCode::from_u16(a.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                        a.body,
                    ),
                    None => text(StatusCode::NOT_FOUND, "404 page not found\n"),
                });
            }
            ["healthz" | "livez" | "readyz", ..] => {
                // Per-check paths may contain slashes: `/readyz/poststarthook/bootstrap`.
                let (endpoint, sub) = path
                    .trim_start_matches('/')
                    .split_once('/')
                    .unwrap_or(("", ""));
                return Ok(match self.health.answer(endpoint, Some(sub), query) {
                    Some(a) => text(
                        StatusCode::from_u16(a.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                        a.body,
                    ),
                    None => text(StatusCode::NOT_FOUND, "404 page not found\n"),
                });
            }
            _ => {}
        }
        if info.verb != "get" && info.verb != "head" {
            return Ok(text(StatusCode::NOT_FOUND, "404 page not found\n"));
        }
        // Routes of upstream's REST container have no HEAD: the version, the OIDC documents,
        // legacy discovery and built-in group versions. Its plain handlers (health, OpenAPI,
        // `/apis` and groups, which the aggregator serves, and custom resources' discovery)
        // answer HEAD as GET. Checked against kube-apiserver v1.36.2.
        if info.verb == "head" {
            let restful = match segments.as_slice() {
                ["version"] | ["api", ..] | [".well-known", ..] | ["openid", ..] => true,
                ["apis", group, version] => self
                    .infos()
                    .iter()
                    .any(|i| i.group == *group && i.version == *version && !i.unstructured),
                _ => false,
            };
            if restful {
                return Err(Status::method_not_allowed());
            }
        }
        if let Some(doc) = self.documents.iter().find(|d| d.path == path) {
            let mut r = response::raw(StatusCode::OK, doc.content_type, doc.body.clone());
            if let Ok(v) =
                http::HeaderValue::from_str(&format!("public, max-age={}", doc.max_age_seconds))
            {
                r.headers_mut().insert(http::header::CACHE_CONTROL, v);
            }
            return Ok(r);
        }
        let json = |v: &Value| {
            response::value(
                StatusCode::OK,
                v,
                crate::endpoints::negotiation::Negotiated::JSON,
            )
        };
        match segments.as_slice() {
            // Upstream writes the version with `WriteRawJSON`: indented, whatever the client.
            ["version"] => Ok(response::raw(
                StatusCode::OK,
                "application/json",
                version_json(&self.config.version),
            )),
            ["debug", "api_priority_and_fairness", dump] if self.flow_control.is_some() => {
                let Some(fc) = self.flow_control.as_deref() else {
                    return Ok(text(StatusCode::NOT_FOUND, "404 page not found\n"));
                };
                use crate::flowcontrol::debug;
                let body = match *dump {
                    "dump_priority_levels" => debug::dump_priority_levels(fc),
                    "dump_queues" => debug::dump_queues(fc),
                    "dump_requests" => debug::dump_requests(
                        fc,
                        form_urlencoded::parse(query.as_bytes())
                            .any(|(k, v)| k == "includeRequestDetails" && !v.is_empty()),
                    ),
                    _ => return Ok(text(StatusCode::NOT_FOUND, "404 page not found\n")),
                };
                Ok(text(StatusCode::OK, body))
            }
            ["metrics"] => Ok(response::raw(
                StatusCode::OK,
                crate::metrics::TEXT_CONTENT_TYPE,
                crate::metrics::encode(),
            )),
            ["metrics", "slis"] => Ok(response::raw(
                StatusCode::OK,
                crate::metrics::TEXT_CONTENT_TYPE,
                crate::metrics::encode_slis(),
            )),
            ["api"] | ["apis"] => {
                let (infos, listed) = self.discovery_infos();
                let n = negotiate(accept, &[View::Object, View::AggregatedDiscovery])?;
                let core = segments[0] == "api";
                let doc = if n.view == View::AggregatedDiscovery {
                    let mut r = response::value(
                        StatusCode::OK,
                        &discovery::aggregated(core, infos.iter(), &listed),
                        n,
                    )?;
                    r.headers_mut().insert(
                        http::header::CONTENT_TYPE,
                        http::HeaderValue::from_static(
                            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                        ),
                    );
                    return Ok(r);
                } else if core {
                    discovery::api_versions(&self.config.external_address)
                } else {
                    discovery::group_list(&discovery::groups(infos.iter()))
                };
                response::value(StatusCode::OK, &doc, n)
            }
            ["api", version] => {
                let infos = self.infos();
                if !infos
                    .iter()
                    .any(|i| i.group.is_empty() && i.version == *version)
                {
                    return self.not_found(path);
                }
                json(&discovery::resource_list("", version, infos.iter()))
            }
            ["apis", group] => {
                let (infos, _) = self.discovery_infos();
                match discovery::groups(infos.iter())
                    .into_iter()
                    .find(|(g, _)| g == group)
                {
                    Some((g, versions)) => json(&discovery::group(&g, &versions)),
                    None => Ok(text(StatusCode::NOT_FOUND, "404 page not found\n")),
                }
            }
            ["apis", group, version] => {
                let infos = self.infos();
                if !infos
                    .iter()
                    .any(|i| i.group == *group && i.version == *version)
                {
                    return self.not_found(path);
                }
                json(&discovery::resource_list(group, version, infos.iter()))
            }
            ["openapi", "v2"] => {
                let fragments: Vec<(String, Arc<serde_json::Value>)> = self
                    .chain
                    .iter()
                    .filter_map(|d| d.openapi_v2_fragment())
                    .collect();
                Ok(self
                    .config
                    .openapi
                    .serve_v2_with(&fragments, headers)
                    .unwrap_or_else(|| text(StatusCode::NOT_FOUND, "404 page not found\n")))
            }
            ["openapi", "v3"] => {
                let mut index = self.config.openapi.v3_index();
                for (path, hash) in self.chain.iter().flat_map(|d| d.openapi_v3_paths()) {
                    index["paths"][&path] = serde_json::json!({
                        "serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")
                    });
                }
                json(&index)
            }
            ["openapi", "v3", rest @ ..] => {
                let key = rest.join("/");
                if let Some(doc) = self.config.openapi.v3.get(&key) {
                    return self.openapi_doc(Some(doc), accept);
                }
                match self.chain.iter().find_map(|d| d.openapi_v3_doc(&key)) {
                    Some(doc) => Ok(response::raw(
                        StatusCode::OK,
                        "application/json",
                        doc.to_vec(),
                    )),
                    None => Ok(text(StatusCode::NOT_FOUND, "404 page not found\n")),
                }
            }
            _ => self.not_found(path),
        }
    }

    fn openapi_doc(
        &self,
        doc: Option<&crate::openapi::GzDoc>,
        accept: Option<&str>,
    ) -> Result<Response, Status> {
        let Some(doc) = doc else {
            return Ok(text(StatusCode::NOT_FOUND, "404 page not found\n"));
        };
        if let Some(a) = accept
            && a.contains("protobuf")
            && !a.contains("json")
            && !a.contains("*/*")
        {
            return Err(Status::not_acceptable(
                "only application/json is served for OpenAPI documents",
            ));
        }
        let body = doc.inflate().map_err(Status::internal)?;
        Ok(response::raw(StatusCode::OK, "application/json", body))
    }
}

/// Reads a request body, refusing more than upstream's 3 MiB with 413.
async fn read_body(body: RequestBody) -> Result<Bytes, Status> {
    match Limited::new(body, MAX_REQUEST_BODY_BYTES).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(Status::too_large(format!(
                "Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}"
            )))
        }
        Err(e) => Err(Status::bad_request(format!(
            "error reading the request body: {e}"
        ))),
    }
}

/// `version.Info` as Go's `json.MarshalIndent` writes it: fields in declaration order, then
/// anything else the server's version holds.
fn version_json(version: &Value) -> Vec<u8> {
    const ORDER: [&str; 13] = [
        "major",
        "minor",
        "emulationMajor",
        "emulationMinor",
        "minCompatibilityMajor",
        "minCompatibilityMinor",
        "gitVersion",
        "gitCommit",
        "gitTreeState",
        "buildDate",
        "goVersion",
        "compiler",
        "platform",
    ];
    let Some(fields) = version.as_object() else {
        return apimachinery::gojson::to_vec(version);
    };
    let mut out = Vec::with_capacity(512);
    apimachinery::gojson::write_in_order(fields, &ORDER, &mut out, &|_, value, out| {
        apimachinery::gojson::write(value, out)
    });
    apimachinery::gojson::indent(&out, "  ").unwrap_or(out)
}
