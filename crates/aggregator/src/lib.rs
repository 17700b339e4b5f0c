//! The aggregation layer (upstream: k8s.io/kube-aggregator), at the head of the server chain.
//! It owns what APIService objects (apiregistration.k8s.io/v1, stored by the built-in catalog)
//! mean at run time:
//!
//! - `autoregister`: a local APIService for every built-in and custom group version this server
//!   serves, kept as upstream's autoregister and crdregistration controllers keep them;
//! - `availability`: the `Available` condition of remote APIServices (those naming a Service),
//!   from the Service, its EndpointSlices and a discovery request to the extension server, with
//!   the `aggregator_unavailable_apiservice` gauge; local ones are always available;
//! - `proxy`: requests for a remote group version streamed to the Service's endpoint over TLS,
//!   as the user who asked (the `X-Remote-*` headers, the proxy client certificate);
//!   `proxy_cert`: that certificate read again when its files change;
//! - `discovery_manager`: every remote APIService's group version in discovery, with the
//!   extension server's aggregated (or, failing that, legacy) discovery, or stale while it
//!   cannot be fetched; `discovery`: those documents read as entries and rows, and the order of
//!   every group and version;
//! - `openapi`: the extension servers' OpenAPI v2 paths and definitions and v3 documents,
//!   merged into this server's;
//! - `readiness`: its post-start hooks and the `autoregister-completion` check, as upstream
//!   names and orders them.
//!
//! What it must not do: serve a local group version (those go on down the chain), or read a
//! request body (the proxy streams it, watches and large writes alike).

mod autoregister;
mod availability;
mod discovery;
mod discovery_manager;
mod openapi;
mod priorities;
mod proxy;
mod proxy_cert;
mod readiness;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use apimachinery::Status;
use apimachinery::object::ObjectExt;
use apiserver::authentication::UserInfo;
use apiserver::endpoints::{ApiRequest, ApiResources, Response};
use apiserver::filters::RequestBody;
use apiserver::registry::ResourceInfo;
use apiserver::request::RequestInfo;
use apiserver::util::webhook::ServiceResolver;
use async_trait::async_trait;
use serde_json::Value;

pub use availability::unavailable_gauge;
pub use proxy_cert::ProxyCertFiles;
pub use readiness::Readiness;

/// The label autoregistration marks its APIServices with: `onstart` (built-in groups, written
/// once at start) or `true` (custom resources' groups, kept in step while the server runs).
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";

/// The Service an APIService names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ServiceRef {
    pub namespace: String,
    pub name: String,
    pub port: i32,
}

/// What this server needs of an APIService.
#[derive(Clone, Debug)]
pub(crate) struct ApiService {
    pub name: String,
    pub group: String,
    pub version: String,
    /// None for a local APIService (served by this server).
    pub service: Option<ServiceRef>,
    pub ca_bundle: Vec<u8>,
    pub insecure_skip_tls_verify: bool,
    /// `Available` is `True`.
    pub available: bool,
    /// `groupPriorityMinimum` and `versionPriority`: where discovery lists it.
    pub group_priority: i64,
    pub version_priority: i64,
    pub object: Value,
}

impl ApiService {
    pub(crate) fn parse(obj: &Value) -> ApiService {
        use base64::Engine;
        let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
        let service = obj
            .pointer("/spec/service")
            .filter(|s| s.is_object())
            .map(|s| ServiceRef {
                namespace: s["namespace"].as_str().unwrap_or("").to_string(),
                name: s["name"].as_str().unwrap_or("").to_string(),
                port: s
                    .get("port")
                    .and_then(Value::as_i64)
                    .and_then(|p| i32::try_from(p).ok())
                    .unwrap_or(443),
            });
        let available = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Available" && c["status"] == "True");
        ApiService {
            name: obj.name().to_string(),
            group: text("/spec/group").to_string(),
            version: text("/spec/version").to_string(),
            service,
            ca_bundle: base64::engine::general_purpose::STANDARD
                .decode(text("/spec/caBundle"))
                .unwrap_or_default(),
            insecure_skip_tls_verify: obj
                .pointer("/spec/insecureSkipTLSVerify")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            available,
            group_priority: obj
                .pointer("/spec/groupPriorityMinimum")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            version_priority: obj
                .pointer("/spec/versionPriority")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            object: obj.clone(),
        }
    }
}

/// The aggregator: the APIServices as last seen, what each remote one serves, and the proxy's
/// transports. One per server; its controllers run from [`Aggregator::run`].
pub struct Aggregator {
    api: Arc<ApiResources>,
    transports: proxy::Transports,
    /// Every APIService by name, kept by a reflector on their store.
    apiservices: RwLock<BTreeMap<String, Arc<ApiService>>>,
    /// What discovery lists of each remote APIService, and the extension servers' documents.
    discovery: RwLock<discovery_manager::State>,
    /// What each remote APIService's extension server adds to the OpenAPI documents.
    openapi: RwLock<BTreeMap<String, openapi::Documents>>,
    /// The group versions of established custom resources (served versions), asked at each
    /// autoregistration pass.
    crd_versions: CustomVersions,
    /// Woken by the reflector at each change of an APIService (autoregistration puts back what
    /// it manages at once, as upstream's queue gets its informer's events).
    apiservices_changed: tokio::sync::Notify,
    /// Where the proxy client certificate is read again from when it changes.
    proxy_cert: Option<ProxyCertFiles>,
}

/// The custom resources' served group versions, for autoregistration.
pub struct CustomVersions {
    /// Each served `(group, version)`, asked when a pass runs.
    pub list: Box<dyn Fn() -> Vec<(String, String)> + Send + Sync>,
    /// Marked changed when the list may have changed; autoregistration runs a pass at once (no
    /// polling delay: a CRD's APIService appears and goes with it, as upstream's crdregistration
    /// controller follows its informer). `None`: no custom resources are served.
    pub changed: Option<tokio::sync::watch::Receiver<()>>,
}

impl Aggregator {
    /// `proxy_cert`: the files of the proxy client certificate chain and key (PEM) presented
    /// to extension servers (`--proxy-client-cert-file`, `--proxy-client-key-file`), read now
    /// (a pair that cannot be read or loaded is the error) and again whenever they change.
    pub fn new(
        api: Arc<ApiResources>,
        resolver: Arc<dyn ServiceResolver>,
        proxy_cert: Option<ProxyCertFiles>,
        crd_versions: CustomVersions,
    ) -> Result<Arc<Aggregator>, String> {
        let identity = proxy_cert.as_ref().map(ProxyCertFiles::read).transpose()?;
        Ok(Arc::new(Aggregator {
            api,
            transports: proxy::Transports::new(identity, resolver)?,
            proxy_cert,
            apiservices: RwLock::new(BTreeMap::new()),
            discovery: RwLock::default(),
            openapi: RwLock::new(BTreeMap::new()),
            crd_versions,
            apiservices_changed: tokio::sync::Notify::new(),
        }))
    }

    /// The remote APIService that serves `group`/`version`, if one does.
    fn remote_for(&self, group: &str, version: &str) -> Option<Arc<ApiService>> {
        // Every request asks, so this is a lookup by name (validation makes an APIService's
        // name `<version>.<group>`) rather than a walk over all of them.
        let name = format!("{version}.{group}");
        let services = self.apiservices.read().unwrap_or_else(|e| e.into_inner());
        services
            .get(&name)
            .filter(|s| s.service.is_some() && s.group == group && s.version == version)
            .cloned()
    }

    /// Starts the aggregator's controllers: the APIService reflector, autoregistration and the
    /// availability controllers, setting `readiness`'s checks as upstream's hooks complete.
    pub async fn run(self: Arc<Self>, readiness: Arc<Readiness>) {
        if let Some(files) = self.proxy_cert.clone() {
            tokio::spawn(proxy_cert::run(self.clone(), files));
        }
        let Some(store) = self
            .api
            .get("apiregistration.k8s.io", "v1", "apiservices")
            .cloned()
        else {
            tracing::warn!("apiservices are not served: the aggregator does not run");
            return;
        };
        // `autoregister-completion` waits for the built-in group versions' APIServices only.
        readiness.expect(
            autoregister::desired(&autoregister::builtin_group_versions(&self.api), &[])
                .into_keys()
                .collect(),
        );
        let (listed_tx, mut listed_rx) = tokio::sync::watch::channel(false);
        {
            let this = self.clone();
            let readiness = readiness.clone();
            tokio::spawn(apiserver::registry::reflector::run(store, move |delta| {
                use apiserver::registry::reflector::Delta;
                let mut services = this.apiservices.write().unwrap_or_else(|e| e.into_inner());
                match delta {
                    Delta::Replace(all) => {
                        *services = all
                            .iter()
                            .map(|o| (o.name().to_string(), Arc::new(ApiService::parse(o))))
                            .collect();
                        services.values().for_each(|s| readiness.observe(s));
                        let _ = listed_tx.send(true);
                    }
                    Delta::Upsert(o) => {
                        let parsed = Arc::new(ApiService::parse(&o));
                        readiness.observe(&parsed);
                        services.insert(o.name().to_string(), parsed);
                    }
                    Delta::Deleted(o) => {
                        services.remove(o.name());
                        availability::forget(o.name());
                        drop(services);
                        this.discovery
                            .write()
                            .unwrap_or_else(|e| e.into_inner())
                            .listed
                            .remove(o.name());
                        this.openapi
                            .write()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(o.name());
                    }
                }
                this.apiservices_changed.notify_one();
            }));
        }
        if listed_rx.wait_for(|listed| *listed).await.is_err() {
            return;
        }
        // Listed: the registration controller has every APIService, and the proxy serves each
        // available one from this same list.
        readiness.registration.set(true);
        readiness.first_sync.set(true);
        tokio::spawn(autoregister::run(self.clone()));
        tokio::spawn(discovery_manager::run(self.clone(), readiness));
        availability::run(self).await;
    }

    /// Every APIService as last seen.
    fn snapshot(&self) -> Vec<Arc<ApiService>> {
        self.apiservices
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

/// The group version a request is for, when it is under `/apis/<group>/<version>` (resource
/// requests, and the group version's own discovery document).
fn group_version(info: &RequestInfo) -> Option<(&str, &str)> {
    if info.is_resource_request {
        return (!info.api_group.is_empty())
            .then_some((info.api_group.as_str(), info.api_version.as_str()));
    }
    let mut segments = info.path.trim_start_matches('/').split('/');
    match (segments.next(), segments.next(), segments.next()) {
        (Some("apis"), Some(group), Some(version)) if !group.is_empty() && !version.is_empty() => {
            Some((group, version))
        }
        _ => None,
    }
}

#[async_trait]
impl apiserver::server::StreamingHandler for Aggregator {
    async fn serve_streaming(
        &self,
        req: http::Request<RequestBody>,
        info: &RequestInfo,
        user: &UserInfo,
    ) -> Result<Response, http::Request<RequestBody>> {
        let Some((group, version)) = group_version(info) else {
            return Err(req);
        };
        let Some(apiservice) = self.remote_for(group, version) else {
            return Err(req);
        };
        // Upstream's proxy answers 503 for an APIService not marked available, whatever the
        // extension server would say.
        if !apiservice.available {
            return Ok(refuse(
                &req,
                info,
                http::StatusCode::SERVICE_UNAVAILABLE,
                "service unavailable",
            ));
        }
        // Upstream resolves an endpoint for every request and answers 503 when there is none.
        if let Some(service) = &apiservice.service
            && !availability::has_endpoint(self, service).await
        {
            tracing::warn!(service = %format!("{}/{}", service.namespace, service.name), "no endpoint for an aggregated API's service");
            return Ok(refuse(
                &req,
                info,
                http::StatusCode::SERVICE_UNAVAILABLE,
                "service unavailable",
            ));
        }
        Ok(self.transports.forward(&apiservice, req, info, user).await)
    }
}

/// Upstream's name for the aggregator in `apiserver_request_terminations_total`.
const COMPONENT: &str = "aggregator";

/// The proxy's own error answer (upstream's `proxyError`): Go's plain-text error, counted in
/// `apiserver_request_terminations_total`. Failures to reach the extension server are not
/// counted, as upstream's proxy responder does not count them.
fn refuse<B>(
    req: &http::Request<B>,
    info: &RequestInfo,
    code: http::StatusCode,
    message: &str,
) -> Response {
    apiserver::endpoints::metrics::record_termination(
        info,
        req.method(),
        req.uri().query().unwrap_or(""),
        req.headers(),
        COMPONENT,
        code.as_u16(),
    );
    proxy::error_text(code, message)
}

/// In the delegation chain the aggregator serves nothing itself (its proxy has answered before
/// the chain is asked); it lends discovery the extension servers' resources.
#[async_trait]
impl apiserver::Delegate for Aggregator {
    async fn serve(&self, req: ApiRequest) -> Result<Result<Response, Status>, ApiRequest> {
        Err(req)
    }

    fn resources(&self) -> Vec<ResourceInfo> {
        let discovery = self.discovery.read().unwrap_or_else(|e| e.into_inner());
        let services = self.apiservices.read().unwrap_or_else(|e| e.into_inner());
        // In the APIServices' order, only for those still registered.
        services
            .keys()
            .filter_map(|name| discovery.listed.get(name))
            .flat_map(|l| l.rows.iter())
            .cloned()
            .collect()
    }

    fn listed_versions(&self) -> Vec<apiserver::endpoints::discovery::ListedVersion> {
        let discovery = self.discovery.read().unwrap_or_else(|e| e.into_inner());
        let services = self.apiservices.read().unwrap_or_else(|e| e.into_inner());
        services
            .values()
            .filter(|s| s.service.is_some())
            .filter_map(|s| {
                discovery.listed.get(&s.name).map(|l| {
                    apiserver::endpoints::discovery::ListedVersion {
                        group: s.group.clone(),
                        version: s.version.clone(),
                        entry: l.entry.clone(),
                    }
                })
            })
            .collect()
    }

    fn openapi_v3_paths(&self) -> Vec<(String, String)> {
        let docs = self.openapi.read().unwrap_or_else(|e| e.into_inner());
        docs.values()
            .filter_map(|d| d.v3.as_ref())
            .map(|(path, _, hash)| (path.clone(), hash.clone()))
            .collect()
    }

    fn openapi_v3_doc(&self, path: &str) -> Option<bytes::Bytes> {
        let docs = self.openapi.read().unwrap_or_else(|e| e.into_inner());
        docs.values()
            .filter_map(|d| d.v3.as_ref())
            .find(|(p, _, _)| p == path)
            .map(|(_, body, _)| body.clone())
    }

    fn openapi_v2_fragment(&self) -> Option<(String, Arc<serde_json::Value>)> {
        openapi::merged_v2(&self.openapi.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn order_discovery(&self, infos: &mut [ResourceInfo]) {
        discovery::order(&self.snapshot(), infos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(path: &str, resource: bool, group: &str, version: &str) -> RequestInfo {
        RequestInfo {
            path: path.into(),
            is_resource_request: resource,
            api_group: group.into(),
            api_version: version.into(),
            ..Default::default()
        }
    }

    #[test]
    fn requests_under_a_group_version_are_the_proxys_to_consider() {
        assert_eq!(
            group_version(&info("/apis/metrics.k8s.io/v1beta1", false, "", "")),
            Some(("metrics.k8s.io", "v1beta1"))
        );
        assert_eq!(
            group_version(&info(
                "/apis/metrics.k8s.io/v1beta1/pods",
                true,
                "metrics.k8s.io",
                "v1beta1"
            )),
            Some(("metrics.k8s.io", "v1beta1"))
        );
        // The group's own document and the core group are this server's.
        assert_eq!(
            group_version(&info("/apis/metrics.k8s.io", false, "", "")),
            None
        );
        assert_eq!(group_version(&info("/api/v1/pods", true, "", "v1")), None);
        assert_eq!(group_version(&info("/apis", false, "", "")), None);
    }

    #[test]
    fn an_apiservice_is_read_with_upstreams_defaults() {
        let s = ApiService::parse(&serde_json::json!({
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                     "service": {"namespace": "kube-system", "name": "metrics-server"},
                     "caBundle": "UEVN"},
            "status": {"conditions": [{"type": "Available", "status": "False"}]},
        }));
        assert_eq!(
            s.service,
            Some(ServiceRef {
                namespace: "kube-system".into(),
                name: "metrics-server".into(),
                port: 443
            })
        );
        assert_eq!(s.ca_bundle, b"PEM");
        assert!(!s.available);
        let local = ApiService::parse(&serde_json::json!({
            "metadata": {"name": "v1.apps"},
            "spec": {"group": "apps", "version": "v1", "service": null},
            "status": {"conditions": [{"type": "Available", "status": "True"}]},
        }));
        assert!(local.service.is_none() && local.available);
    }
}
