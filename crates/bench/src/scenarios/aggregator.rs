//! The `aggregator` scenario: the latency the aggregation layer's proxy adds to a GET.
//!
//! The tool serves a minimal extension API server itself (HTTPS with a certificate from a fresh
//! CA, HTTP/1.1 and HTTP/2; discovery of one group version and one namespaced resource, `things`,
//! with a list and a get), registers it through the kubeconfig's server as an APIService backed
//! by a selectorless Service and a hand-written EndpointSlice (EndpointSlices may not name
//! loopback, so the address is this machine's first non-loopback IPv4), and waits for
//! `Available=True`. It then times N sequential GETs, after a warm-up, on one keep-alive
//! connection per target, three ways: straight to the extension server, through the API
//! server's proxy, and a built-in GET of a ConfigMap of about the same size for reference. The
//! three are interleaved (in rotating order) so that a change in the machine's load touches all
//! of them alike.
//!
//! It owns the extension server, the registration and its removal (APIService, EndpointSlice,
//! Service, ConfigMap; unless `--keep`). The requests through the API server are plain API
//! requests, so the scenario runs unchanged against kube-apiserver (which proxies to the
//! endpoint only with `--enable-aggregator-routing=true`, as a cluster without kube-proxy
//! needs). The direct GETs are the one place the tool aims at an address other than the
//! kubeconfig's server: its own extension server, in this process.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use http::Method;
use serde_json::{Value, json};

use super::{
    ClientConfig, CommonOptions, MANAGED_BY_LABEL, MANAGED_BY_VALUE, Workspace, check_common,
    check_duration, check_range,
};
use crate::client::ApiClient;
use crate::error::{BenchError, status_message};
use crate::kubeconfig::{Credentials, ResolvedContext};
use crate::report::{Row, ScenarioResult};
use crate::stats::{Histogram, micros_to_ms};

/// The extension server's group is `<namespace>.bench.ironplane.dev`, one per run, so that two
/// runs (or a run and a leftover of a killed one) never share an APIService.
const GROUP_SUFFIX: &str = "bench.ironplane.dev";
const VERSION: &str = "v1";
/// The Service and EndpointSlice's name, and the served object's.
const SERVICE: &str = "bench-extension";
const OBJECT: &str = "bench";
const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

#[derive(Clone, Debug)]
pub struct AggregatorOptions {
    /// Measured GETs per path.
    pub requests: u64,
    /// Unmeasured GETs per path first (connections, caches, the proxy's transport).
    pub warmup: u64,
    /// The longest the measured phase may run; it stops early (with fewer GETs) past it.
    pub duration: Duration,
    /// The longest wait for `Available=True` and the first proxied answer.
    pub max_wait: Duration,
    pub common: CommonOptions,
}

impl Default for AggregatorOptions {
    fn default() -> Self {
        AggregatorOptions {
            requests: 2_000,
            warmup: 200,
            duration: Duration::from_secs(120),
            max_wait: Duration::from_secs(60),
            common: CommonOptions::default(),
        }
    }
}

impl AggregatorOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        check_common(&self.common)?;
        check_range("requests", self.requests, 1, 1_000_000)?;
        check_range("warmup", self.warmup, 0, 100_000)?;
        check_duration("duration", self.duration, super::MAX_DURATION)?;
        check_duration("max-wait", self.max_wait, Duration::from_secs(600))
    }
}

/// The three measured paths, in the order of the result's rows.
const PATHS: [&str; 3] = ["direct", "proxied", "built-in"];

pub(crate) async fn run(
    cfg: &ClientConfig,
    options: &AggregatorOptions,
) -> Result<ScenarioResult, BenchError> {
    let workspace = Workspace::open(cfg, &options.common).await?;
    let group = format!("{}.{GROUP_SUFFIX}", workspace.namespace);
    let outcome = match Extension::start(&workspace.namespace, &group, options).await {
        Ok(extension) => {
            let outcome = measure(&workspace, &extension, &group, cfg, options).await;
            if !options.common.keep {
                unregister(&workspace, &group).await;
            }
            extension.server.abort();
            outcome
        }
        Err(e) => Err(e),
    };
    workspace.close(outcome).await
}

/// This machine's first non-loopback IPv4 address: the source address the kernel picks for a
/// route out (connecting a UDP socket sends nothing).
pub(crate) fn own_address() -> Option<Ipv4Addr> {
    ["192.0.2.1:9", "10.255.255.1:9", "172.16.0.1:9"]
        .iter()
        .find_map(|target| {
            let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
            socket.connect(target).ok()?;
            match socket.local_addr().ok()? {
                std::net::SocketAddr::V4(a)
                    if !a.ip().is_loopback() && !a.ip().is_unspecified() =>
                {
                    Some(*a.ip())
                }
                _ => None,
            }
        })
}

/// The running extension server.
struct Extension {
    address: Ipv4Addr,
    port: u16,
    ca_pem: String,
    server: tokio::task::JoinHandle<()>,
}

impl Extension {
    /// Serves the extension on an ephemeral port of `own_address()`, with a certificate for the
    /// Service's DNS name (what the aggregator verifies) and for the address (what the direct
    /// client verifies).
    async fn start(
        namespace: &str,
        group: &str,
        options: &AggregatorOptions,
    ) -> Result<Extension, BenchError> {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let setup =
            |e: &dyn std::fmt::Display| BenchError::Protocol(format!("extension setup: {e}"));
        let address = own_address().ok_or_else(|| {
            BenchError::InvalidArgument(
                "the aggregator scenario needs a non-loopback IPv4 address (EndpointSlices may \
                 not name loopback)"
                    .to_string(),
            )
        })?;
        let ca_key = KeyPair::generate().map_err(|e| setup(&e))?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(|e| setup(&e))?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).map_err(|e| setup(&e))?;
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().map_err(|e| setup(&e))?;
        let leaf = CertificateParams::new(vec![
            format!("{SERVICE}.{namespace}.svc"),
            address.to_string(),
        ])
        .map_err(|e| setup(&e))?
        .signed_by(&leaf_key, &issuer)
        .map_err(|e| setup(&e))?;
        let key = rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der())
            .map_err(|e| setup(&e))?;
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| setup(&e))?
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)
        .map_err(|e| setup(&e))?;
        // Either protocol, as a real extension server offers; each client picks by ALPN.
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind((address, 0))
            .await
            .map_err(|e| setup(&e))?;
        let port = listener.local_addr().map_err(|e| setup(&e))?.port();
        let content = Arc::new(Content::new(group, options.common.value_bytes()));
        let server = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                let content = content.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let content = content.clone();
                        async move { Ok::<_, std::convert::Infallible>(content.answer(&req)) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
                });
            }
        });
        Ok(Extension {
            address,
            port,
            ca_pem: ca_cert.pem(),
            server,
        })
    }

    /// A client for the extension server itself, with one connection opened before it returns.
    async fn client(&self, request_timeout: Duration) -> Result<ApiClient, BenchError> {
        let context = ResolvedContext {
            context: "extension".to_string(),
            server: format!("https://{}:{}", self.address, self.port),
            ca_pem: Some(self.ca_pem.clone().into_bytes()),
            insecure_skip_tls_verify: false,
            tls_server_name: None,
            credentials: Credentials::Anonymous,
            namespace: None,
        };
        ApiClient::connect(&context, 1, request_timeout).await
    }
}

/// What the extension server answers, built once.
struct Content {
    group: String,
    group_list: Bytes,
    api_group: Bytes,
    resources: Bytes,
    version: Bytes,
    data: String,
}

impl Content {
    fn new(group: &str, value_bytes: usize) -> Content {
        let group_version = format!("{group}/{VERSION}");
        let version_entry = json!({"groupVersion": group_version, "version": VERSION});
        let api_group = json!({"kind": "APIGroup", "apiVersion": "v1", "name": group,
            "versions": [version_entry], "preferredVersion": version_entry});
        let bytes = |v: &Value| Bytes::from(v.to_string());
        Content {
            group: group.to_string(),
            group_list: bytes(
                &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [api_group]}),
            ),
            api_group: bytes(&api_group),
            resources: bytes(&json!({"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": group_version,
                "resources": [{"name": "things", "singularName": "thing", "namespaced": true,
                               "kind": "Thing", "verbs": ["get", "list"]}]})),
            version: bytes(&json!({"major": "1", "minor": "36", "gitVersion": "v1.36.0-bench"})),
            data: "x".repeat(value_bytes),
        }
    }

    fn thing(&self, namespace: &str, name: &str) -> Value {
        json!({"apiVersion": format!("{}/{VERSION}", self.group), "kind": "Thing",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1",
                         "uid": "6f1c3c52-8d8f-4d39-9c31-000000000001",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "data": {"value": self.data}})
    }

    fn answer<B>(
        &self,
        request: &hyper::Request<B>,
    ) -> hyper::Response<http_body_util::Full<Bytes>> {
        let path = request.uri().path();
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let body = match segments.as_slice() {
            ["healthz" | "readyz" | "livez"] => Some(Bytes::from_static(b"ok")),
            ["version"] => Some(self.version.clone()),
            ["apis"] => Some(self.group_list.clone()),
            ["apis", g] if *g == self.group => Some(self.api_group.clone()),
            ["apis", g, VERSION] if *g == self.group => Some(self.resources.clone()),
            ["apis", g, VERSION, "namespaces", ns, "things"] if *g == self.group => {
                let list = json!({"apiVersion": format!("{}/{VERSION}", self.group),
                    "kind": "ThingList", "metadata": {"resourceVersion": "1"},
                    "items": [self.thing(ns, OBJECT)]});
                Some(Bytes::from(list.to_string()))
            }
            ["apis", g, VERSION, "namespaces", ns, "things", name]
                if *g == self.group && *name == OBJECT =>
            {
                Some(Bytes::from(self.thing(ns, name).to_string()))
            }
            _ => None,
        };
        let (status, body) = match body {
            Some(body) if request.method() == Method::GET => (http::StatusCode::OK, body),
            Some(_) => (
                http::StatusCode::METHOD_NOT_ALLOWED,
                Bytes::from(status_body(405, "MethodNotAllowed", "only GET is served")),
            ),
            None => (
                http::StatusCode::NOT_FOUND,
                Bytes::from(status_body(404, "NotFound", "the server could not find it")),
            ),
        };
        let mut response = hyper::Response::new(http_body_util::Full::new(body));
        *response.status_mut() = status;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }
}

fn status_body(code: u16, reason: &str, message: &str) -> String {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
           "reason": reason, "message": message})
    .to_string()
}

/// Creates the ConfigMap, the Service, the EndpointSlice and the APIService, and waits until the
/// APIService is `Available=True` and a GET through the proxy answers 200.
async fn register(
    workspace: &Workspace,
    extension: &Extension,
    group: &str,
    options: &AggregatorOptions,
) -> Result<(), BenchError> {
    let client = &workspace.client;
    let ns = &workspace.namespace;
    let labels = json!({MANAGED_BY_LABEL: MANAGED_BY_VALUE});
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": OBJECT, "labels": labels},
        "data": {"value": "x".repeat(options.common.value_bytes())}});
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": SERVICE, "labels": labels},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": extension.port}]}});
    let mut slice_labels = labels.clone();
    slice_labels["kubernetes.io/service-name"] = json!(SERVICE);
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{SERVICE}-1"), "labels": slice_labels},
        "addressType": "IPv4",
        "ports": [{"name": "https", "port": extension.port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [extension.address.to_string()],
                       "conditions": {"ready": true}}]});
    let apiservice = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": format!("{VERSION}.{group}"), "labels": labels},
        "spec": {"group": group, "version": VERSION,
                 "groupPriorityMinimum": 1000, "versionPriority": 15,
                 "service": {"namespace": ns, "name": SERVICE, "port": 443},
                 "caBundle": base64::engine::general_purpose::STANDARD.encode(&extension.ca_pem)}});
    for (path, body) in [
        (format!("/api/v1/namespaces/{ns}/configmaps"), configmap),
        (format!("/api/v1/namespaces/{ns}/services"), service),
        (
            format!("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"),
            slice,
        ),
        (APISERVICES.to_string(), apiservice),
    ] {
        client
            .expect_success(Method::POST, &path, Some(Bytes::from(body.to_string())))
            .await?;
    }
    let deadline = Instant::now() + options.max_wait;
    let apiservice = format!("{APISERVICES}/{VERSION}.{group}");
    let mut last = String::from("no answer yet");
    loop {
        let r = client
            .send(Method::GET, &apiservice, None)
            .await
            .map_err(|e| client.unreachable(e))?;
        if r.is_success() {
            if let Some((status, reason, message)) = available(&r.body) {
                if status == "True" {
                    break;
                }
                last = format!("Available={status} ({reason}: {message})");
            }
        } else {
            last = format!("{} {}", r.status.as_u16(), status_message(&r.body));
        }
        if Instant::now() > deadline {
            return Err(BenchError::Protocol(format!(
                "APIService {VERSION}.{group} was not Available within {:?}: {last}",
                options.max_wait
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Available can be seen before the proxy's own view of the APIService is up to date.
    let proxied = thing_path(group, ns);
    loop {
        let r = client
            .send(Method::GET, &proxied, None)
            .await
            .map_err(|e| client.unreachable(e))?;
        if r.is_success() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Protocol(format!(
                "GET {proxied} did not answer 200 within {:?}: {} {}",
                options.max_wait,
                r.status.as_u16(),
                status_message(&r.body)
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The `Available` condition's status, reason and message, from an APIService.
pub(crate) fn available(body: &[u8]) -> Option<(String, String, String)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let condition = value
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?;
    let text = |k: &str| condition[k].as_str().unwrap_or_default().to_string();
    Some((text("status"), text("reason"), text("message")))
}

fn thing_path(group: &str, namespace: &str) -> String {
    format!("/apis/{group}/{VERSION}/namespaces/{namespace}/things/{OBJECT}")
}

/// Deletes the cluster-scoped APIService and, for a server without a namespace controller, the
/// Service and EndpointSlice (the ConfigMap goes with the workspace's cleanup).
async fn unregister(workspace: &Workspace, group: &str) {
    let ns = &workspace.namespace;
    for path in [
        format!("{APISERVICES}/{VERSION}.{group}"),
        format!("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices/{SERVICE}-1"),
        format!("/api/v1/namespaces/{ns}/services/{SERVICE}"),
    ] {
        let _ = workspace.client.send(Method::DELETE, &path, None).await;
    }
}

async fn measure(
    workspace: &Workspace,
    extension: &Extension,
    group: &str,
    cfg: &ClientConfig,
    options: &AggregatorOptions,
) -> Result<ScenarioResult, BenchError> {
    register(workspace, extension, group, options).await?;
    let ns = &workspace.namespace;
    let direct = extension.client(cfg.request_timeout).await?;
    let api = &workspace.client;
    let thing = thing_path(group, ns);
    let configmap = format!("{}/{OBJECT}", workspace.configmaps_path());
    // Connection 0 of the workspace's client only: one connection (HTTP/2) or one keep-alive
    // HTTP/1.1 connection, since the GETs are sequential.
    let targets: [(&ApiClient, &str); 3] = [(&direct, &thing), (api, &thing), (api, &configmap)];
    let mut histograms = [Histogram::new(), Histogram::new(), Histogram::new()];
    let mut errors = [0u64; 3];
    let mut sizes = [0usize; 3];
    let mut samples: Vec<String> = Vec::new();
    let mut started = Instant::now();
    let mut measured = 0u64;
    for i in 0..options.warmup + options.requests {
        let recording = i >= options.warmup;
        if i == options.warmup {
            started = Instant::now();
        }
        if recording && started.elapsed() > options.duration {
            break;
        }
        for k in 0..3 {
            // Rotating order: no path is always the first after the others' work.
            let p = (k + i as usize) % 3;
            let (client, path) = targets[p];
            let begun = Instant::now();
            let outcome = client.send_on(0, Method::GET, path, None).await;
            let took = begun.elapsed();
            let problem = match outcome {
                Ok(r) if r.is_success() => {
                    sizes[p] = r.body.len();
                    if recording {
                        histograms[p].record_duration(took);
                    }
                    None
                }
                Ok(r) => Some(format!(
                    "{} GET {path}: {} {}",
                    PATHS[p],
                    r.status.as_u16(),
                    status_message(&r.body)
                )),
                Err(e) => Some(format!("{} GET {path}: {e}", PATHS[p])),
            };
            if let Some(problem) = problem {
                errors[p] += 1;
                if samples.len() < 5 && !samples.contains(&problem) {
                    samples.push(problem);
                }
            }
        }
        if recording {
            measured += 1;
            if options.common.progress && measured.is_multiple_of(500) {
                eprintln!("aggregator: {measured} of {} rounds", options.requests);
            }
        }
    }
    let elapsed = started.elapsed();
    let mut result = ScenarioResult::new("aggregator", api.server(), api.http2());
    result.param("requests", options.requests);
    result.param("warmup", options.warmup);
    result.param("group_version", format!("{group}/{VERSION}"));
    result.param("extension_http2", direct.http2());
    for (p, label) in PATHS.iter().enumerate() {
        result.rows.push(Row::from_histogram(
            label,
            &histograms[p],
            errors[p],
            elapsed,
        ));
        let name = label.replace('-', "_");
        result.figure(
            &format!("{name}_p90_ms"),
            micros_to_ms(histograms[p].percentile(90.0)),
        );
        result.param(&format!("{name}_response_bytes"), sizes[p]);
    }
    let added = |q: f64| {
        micros_to_ms(histograms[1].percentile(q)) - micros_to_ms(histograms[0].percentile(q))
    };
    result.figure("proxy_added_p50_ms", added(50.0));
    result.figure("proxy_added_p99_ms", added(99.0));
    result.error_samples.extend(samples);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str) -> hyper::Request<()> {
        hyper::Request::get(path).body(()).unwrap()
    }

    async fn body(response: hyper::Response<http_body_util::Full<Bytes>>) -> (u16, Value) {
        use http_body_util::BodyExt;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    #[tokio::test]
    async fn the_extension_serves_discovery_and_its_object() {
        let content = Content::new("g.bench.ironplane.dev", 10);
        let (code, v) = body(content.answer(&get("/apis/g.bench.ironplane.dev/v1"))).await;
        assert_eq!(code, 200);
        assert_eq!(v["kind"], "APIResourceList");
        assert_eq!(v["resources"][0]["name"], "things");
        let (code, v) = body(content.answer(&get("/apis"))).await;
        assert_eq!(code, 200);
        assert_eq!(v["groups"][0]["name"], "g.bench.ironplane.dev");
        let (code, v) = body(content.answer(&get(
            "/apis/g.bench.ironplane.dev/v1/namespaces/n/things/bench",
        )))
        .await;
        assert_eq!(code, 200);
        assert_eq!(v["metadata"]["namespace"], "n");
        assert_eq!(v["data"]["value"], "xxxxxxxxxx");
        let (code, v) =
            body(content.answer(&get("/apis/g.bench.ironplane.dev/v1/namespaces/n/things"))).await;
        assert_eq!((code, v["kind"].as_str()), (200, Some("ThingList")));
        let (code, _) = body(content.answer(&get(
            "/apis/g.bench.ironplane.dev/v1/namespaces/n/things/other",
        )))
        .await;
        assert_eq!(code, 404);
        let (code, _) = body(content.answer(&get("/apis/other.group/v1"))).await;
        assert_eq!(code, 404);
    }

    #[test]
    fn the_available_condition_is_read() {
        let body = br#"{"status":{"conditions":[{"type":"Other","status":"False"},
            {"type":"Available","status":"True","reason":"Passed","message":"all checks passed"}]}}"#;
        assert_eq!(
            available(body),
            Some((
                "True".to_string(),
                "Passed".to_string(),
                "all checks passed".to_string()
            ))
        );
        assert_eq!(available(b"{}"), None);
    }
}
